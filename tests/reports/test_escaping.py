"""User text in every medium: hostile agent, env, scenario and test names and messages stay
text in summary.md (which goes to $GITHUB_STEP_SUMMARY) and in index.html."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest

from pytest_rlaudit.auditing.comparison import compare_records
from pytest_rlaudit.auditing.tolerances import parse_tolerance
from pytest_rlaudit.reports.html import html
from pytest_rlaudit.reports.markdown import markdown, md, md_code
from pytest_rlaudit.reports.summary import summary

#: Raw HTML, a cell break, a new line with a heading, a code span, emphasis, a link.
EVIL = "<script>alert(1)</script> | cell\n## heading `code` *em* [link](http://x)"


def _rec(n: int, **fields: Any) -> dict[str, Any]:
    base = {
        "nodeid": f"test_x.py::test_x[{EVIL}-{n}]", "agent": f"agent {n} {EVIL}",
        "env": f"Env{n}|{EVIL}", "scenario": f"scenario{n} {EVIL}", "category": "deployment",
        "episodes": 3, "seed": 0, "seeds": [0, 1, 2], "returns": [10.0, 10.0, 10.0],
        "nominal_returns": [20.0, 20.0, 20.0], "reference_score": 0.0, "ratio": 0.5,
        "ci_low": 0.4, "ci_high": 0.6, "confidence": 0.95, "p_value": 0.01, "rating": "FAIL",
        "diagnosis": {"pattern": EVIL, "cause": EVIL, "fix": f"train with {EVIL}; or not"},
        "gate": {"min_ratio": None, "min_rating": "MILD", "mode": "point"}, "passed": False,
        "thresholds": {"pass": 0.95, "mild": 0.8, "degraded": 0.5}, "order": n,
        "mixable": True,
        "schedule": {"description": EVIL, "repr": f"Schedule({EVIL})", "timeline": []},
        "tolerance": {"param": EVIL, "default": 1, "min_ratio": 0.8, "tolerated": 1,
                      "breaks_at": 2, "curve": [[1, 1.0, 1.0, 1.0], [2, 0.1, 0.1, 0.1]]},
    }
    return {**base, **fields}


@pytest.fixture
def doc() -> dict[str, Any]:
    records = [_rec(0), _rec(1)]
    moved = [{**r, "returns": [1.0, 1.0, 1.0]} for r in records]
    comparison = compare_records(records, moved, [parse_tolerance("return:5%")])
    comparison.mismatches.append(f"{EVIL}: cannot be paired")
    comparison.new.append(EVIL)
    return summary(records, version="0", extra={
        "seed": 0, "note": EVIL, "lost": [{"nodeid": EVIL, "scenario": EVIL}],
        "errors": [{"nodeid": EVIL, "when": "call", "message": EVIL}],
        "comparison": {"baseline": f"base {EVIL}.json", **comparison.to_dict()}})


OUR_TAGS = {"<details>", "</details>", "<summary>", "</summary>"}
OUR_HEADINGS = ("## RL robustness audit", "### Tolerance curves", "### Compared with the baseline")


def test_markdown_keeps_user_text_inert(doc):
    text = markdown(doc)
    # outside code spans (where HTML and Markdown are text) no tag but ours
    prose = re.sub(r"(`+).+?\1", "", text.replace("\\`", ""))
    tags = set(re.findall(r"</?[A-Za-z][^>]*>", prose))
    assert tags <= OUR_TAGS, tags - OUR_TAGS
    assert [line for line in text.splitlines()
            if line.startswith("#") and not line.startswith(OUR_HEADINGS)] == []
    for line in text.splitlines():  # no cell break: each row has its table's cells
        if line.startswith("|") and not line.startswith("|---"):
            cells = len(re.findall(r"(?<!\\)\|", line))
            assert cells in (12, 8), line  # the audit table, the comparison table
    assert "](" not in prose  # no link or image
    assert "&lt;script>alert(1)&lt;/script> \\| cell ## heading \\`code\\` \\*em\\*" in text
    # a code span (to copy) holds the text as it is, between fences longer than its backticks
    assert f"- lost with a crashed xdist worker: ``{EVIL.replace(chr(10), ' ')}``" in text
    assert markdown(doc) == text  # a function of the document


@pytest.mark.parametrize(("value", "shown"), [
    ("a|b", "a\\|b"), ("line\r\nnext", "line next"), ("<b>", "&lt;b>"), ("&amp;", "&amp;amp;"),
    ("snake_case_name", "snake_case_name"), ("_em_", "\\_em\\_"), ("a\\|b", "a\\\\\\|b"),
    ("[x](y)", "[x]\\(y)"), ("~~gone~~", "\\~\\~gone\\~\\~"),
])
def test_md_escapes_what_acts_mid_line_and_nothing_else(value, shown):
    assert md(value) == shown


def test_md_code_fences_past_any_backtick_in_the_value():
    assert md_code("a``b") == "```a``b```"
    assert md_code("`x`") == "`` `x` ``"
    assert md_code("two\nlines") == "`two lines`"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs.update(name for name, _ in attrs)


def test_the_html_page_keeps_user_text_inert(doc, tmp_path):
    page = html(doc, tmp_path)
    parsed = _Tags()
    parsed.feed(page)
    assert "script" not in parsed.tags and not {a for a in parsed.attrs if a.startswith("on")}
    assert "&lt;script&gt;alert(1)&lt;/script&gt; | cell\n## heading" in page
