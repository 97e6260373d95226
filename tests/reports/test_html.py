"""index.html (pytest_rlaudit.reports.html) on hand-made records: self-contained, escaped,
complete; and rendered by headless Chromium without a console message."""

from __future__ import annotations

import base64
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from browser import chromium

from pytest_rlaudit.auditing.comparison import compare_records, parse_tolerance
from pytest_rlaudit.reports.html import PLOT_HINT, html
from pytest_rlaudit.reports.summary import summary

THRESHOLDS = {"pass": 0.95, "mild": 0.8, "degraded": 0.5}
RATINGS = ((0.95, "PASS"), (0.8, "MILD"), (0.5, "DEGRADED"))
EVIL = "<b>bold</b> & 'quoted'"


def rec(scenario: str, ratio: float, *, agent: str = "PPO", env: str = "CartPole-v1",
        order: int = 0, diagnosis: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A record as the plugin writes one, with 6 paired episodes."""
    category = "stress" if scenario == "speed_5x" else "deployment"
    nominal = [500.0, 480.0, 490.0, 470.0, 500.0, 460.0]
    return {
        "nodeid": f"test_x.py::test_x[{agent}-{scenario}]", "agent": agent, "env": env,
        "scenario": scenario, "category": category, "params": {}, "schedule": None,
        "episodes": 6, "seed": 0, "seeds": list(range(6)),
        "returns": [x * ratio for x in nominal], "nominal_returns": nominal,
        "reference": 0.0, "reference_score": 0.0, "mean_return": 483.3 * ratio,
        "ratio": ratio, "ci_low": ratio - 0.1, "ci_high": min(1.0, ratio + 0.05),
        "confidence": 0.95, "p_value": 0.01,
        "rating": next((name for limit, name in RATINGS if ratio > limit), "FAIL"),
        "diagnosis": diagnosis, "passed": True, "order": order, "thresholds": THRESHOLDS,
        "gate": None if category == "stress" else {"min_ratio": None, "min_rating": "MILD",
                                                   "mode": "point"},
        "tolerance": None, **extra,
    }


def diag(scenario: str) -> dict[str, str]:
    return {"pattern": f"{scenario} keeps 40% of the nominal return (FAIL)",
            "cause": "the policy assumes a fixed control period",
            "fix": "train with Jitter(env, base=2, jitter=1); add the elapsed time"}


CURVE = {"param": "steps", "default": 1, "min_ratio": 0.8, "tolerated": 1, "breaks_at": 2,
         "curve": [[1, 0.9, 0.85, 0.95], [2, 0.4, 0.3, 0.5], [3, 0.1, 0.0, 0.2]]}


def gif(path: Path) -> bytes:
    """A two-frame GIF written to ``path``; its bytes."""
    from PIL import Image

    frames = [Image.new("RGB", (16, 8), colour) for colour in ("red", "blue")]
    path.parent.mkdir(parents=True, exist_ok=True)
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=100, loop=0)
    return path.read_bytes()


def records() -> list[dict[str, Any]]:
    """Three agents (one on a second env), diagnoses, a curve, a video, a skipped one."""
    out = [
        rec("jitter", 0.4, diagnosis=diag("jitter"),
            video={"file": "videos/ppo-jitter.gif", "episode": 2, "seed": 2,
                   "parting_step": 17, "start": 0, "stop": 40}),
        rec("delay", 0.9, tolerance=CURVE),
        rec("speed_5x", 0.3, video={"skipped": "the env does not render rgb_array"}),
        rec("jitter", 0.97, agent="SAC"),
        rec(EVIL, 0.6, agent="SAC", diagnosis={"pattern": EVIL, "cause": EVIL, "fix": EVIL}),
        rec("spike", 0.85, agent="A2C", env="Acrobot-v1"),
        rec("obs_noise", 1.02, agent="A2C", env="Acrobot-v1"),
        rec("spike", 0.7, agent="A2C"),
    ]
    for order, r in enumerate(out):
        r["order"] = order
    return out


def document(directory: Path) -> dict[str, Any]:
    """A summary.json document with a comparison, and the video it names in ``directory``."""
    current = records()
    baseline = [{**r, "returns": r["nominal_returns"]} for r in current[:3]]
    comparison = compare_records(baseline, current[:3], [parse_tolerance("return:5%"),
                                                         parse_tolerance("ratio:0.05")])
    gif(directory / "videos" / "ppo-jitter.gif")
    return summary(current, version="9.9", extra={
        "seed": 0, "lost": [{"nodeid": "rl-audit::push", "scenario": "push"}],
        "errors": [{"nodeid": "rl-audit::zoo", "when": "call", "message": "cannot load <x>"}],
        "comparison": {"baseline": "base.json", **comparison.to_dict()}})


class Page(HTMLParser):
    """What a page holds: h2 and h3 texts, img sources, tags seen, all text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.headings: list[tuple[str, str]] = []
        self.images: list[str] = []
        self.tags: set[str] = set()
        self.text: list[str] = []
        self._open: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "img":
            self.images.append(dict(attrs).get("src") or "")
        if tag in ("h2", "h3"):
            self._open = tag
            self.headings.append((tag, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == self._open:
            self._open = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._open:
            tag, text = self.headings[-1]
            self.headings[-1] = (tag, text + data)

    def plain(self) -> str:
        """The page's text as it reads, whitespace runs as one space."""
        return " ".join("".join(self.text).split())

    def sections(self) -> dict[str, list[str]]:
        """{h2 text: the h3 texts under it} (h3 texts without their rating)."""
        out: dict[str, list[str]] = {}
        current = ""
        for tag, text in self.headings:
            if tag == "h2":
                current = text.strip()
                out[current] = []
            else:
                out[current].append(text.strip().rsplit(" ", 1)[0])
        return out


def expected_sections() -> dict[str, list[str]]:
    """Every agent on every env (sorted, as the aggregates) with its scenarios in order."""
    out: dict[str, list[str]] = {}
    for r in sorted(records(), key=lambda r: (r["agent"], r["env"], r["order"])):
        out.setdefault(f"{r['agent']} on {r['env']}", []).append(r["scenario"])
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A report folder with its page (drawn with matplotlib), made once for this module;
    write_report's files are test_report's and test_badges' business."""
    pytest.importorskip("matplotlib")  # a dev dependency: present wherever the suite runs
    folder = tmp_path_factory.mktemp("report")
    doc = document(folder)
    (folder / "index.html").write_text(html(doc, folder), encoding="utf-8")
    return folder, doc


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError


# ============================================================================ the page


def test_the_page_is_one_self_contained_file(report: tuple[Path, dict[str, Any]]):
    page = (report[0] / "index.html").read_text(encoding="utf-8")
    for needle in ("http://", "https://", 'src="http', "<script", "<link", "@import", "url(http"):
        assert needle not in page, needle
    parsed = Page(page)
    assert parsed.images and all(src.startswith("data:") for src in parsed.images)
    assert "script" not in parsed.tags and "iframe" not in parsed.tags
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert page.count("<svg") >= 3 + len(records())  # a forest per pair, a paired plot each


def test_the_page_holds_every_pair_and_scenario_and_the_details(
        report: tuple[Path, dict[str, Any]]):
    folder, doc = report
    assert doc["comparison"]["decision"] == "hold" and doc["comparison"]["power_note"]
    parsed = Page((folder / "index.html").read_text(encoding="utf-8"))
    sections = parsed.sections()
    assert {k: v for k, v in sections.items() if " on " in k} == expected_sections()
    text = parsed.plain()
    # the aggregates, in the heading's words
    assert "deployment: worst FAIL 0.400 (jitter); stress: worst FAIL 0.300 (speed_5x)" in text
    # the diagnoses in full
    d = diag("jitter")
    for part in (d["pattern"], d["cause"], d["fix"]):
        assert part in text
    # the comparison, the problems, the tolerance curve, the video's caption and note
    assert "Compared with the baseline: hold" in sections
    assert "Baseline base.json; fail tolerances: return:5%, ratio:0.05." in text
    assert doc["comparison"]["power_note"] in text
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert page.count("<td>regressed</td>") == 3  # the ratio row of each scenario
    assert "lost with a crashed xdist worker: rl-audit::push" in text
    assert "error: rl-audit::zoo: cannot load <x>" in text
    assert "Tolerance curve: delay: tolerates 1 step, breaks at 2" in text
    assert ("Perturbed (left) and nominal (right), episode 2, seed 2, env steps 0 to 39; "
            "the two runs part at step 17.") in text
    assert "No video: the env does not render rgb_array" in text
    assert PLOT_HINT not in text


def test_the_video_is_inlined_from_the_report_folder(report: tuple[Path, dict[str, Any]]):
    folder, _ = report
    data = (folder / "videos" / "ppo-jitter.gif").read_bytes()
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert f'src="data:image/gif;base64,{base64.b64encode(data).decode()}"' in page


def test_a_missing_video_file_is_a_note_not_an_error(tmp_path: Path):
    doc = summary([rec("jitter", 0.4, video={"file": "videos/gone.gif", "episode": 0,
                                             "seed": 0, "parting_step": None, "start": 0,
                                             "stop": 9})], version="1")
    text = Page(html(doc, tmp_path)).plain()
    assert "Video videos/gone.gif cannot be read" in text


def test_text_is_escaped_everywhere(report: tuple[Path, dict[str, Any]]):
    page = (report[0] / "index.html").read_text(encoding="utf-8")
    assert "<b>" not in page  # not in the HTML, nor in an SVG figure's labels
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &#x27;quoted&#x27;" in page
    parsed = Page(page)
    assert EVIL in parsed.sections()["SAC on CartPole-v1"]  # and it reads literally
    assert "cannot load <x>" in parsed.plain()


def test_without_matplotlib_the_page_has_the_tables_and_says_how_to_get_plots(
        tmp_path: Path, no_matplotlib: None):
    doc = document(tmp_path)
    page = html(doc, tmp_path)
    parsed = Page(page)
    assert PLOT_HINT in parsed.plain()
    assert "<svg" not in page  # badges are <img> data URIs; no figure
    assert {k: v for k, v in parsed.sections().items() if " on " in k} == expected_sections()
    assert "Tolerance curve: delay: tolerates 1 step, breaks at 2" in parsed.plain()
    # a table per pair, the comparison's, the returns of each scenario
    assert page.count("<table>") == len(expected_sections()) + 1 + len(records())


def test_the_page_is_reproducible(report: tuple[Path, dict[str, Any]]):
    folder, doc = report
    assert html(doc, folder) == (folder / "index.html").read_text(encoding="utf-8")


def test_a_run_without_results_says_so_and_why(tmp_path: Path):
    doc = summary([], version="1", extra={"note": "audit tests were skipped: run with "
                                                  "--rl-audit", "errors": [], "lost": []})
    text = Page(html(doc, tmp_path)).plain()
    assert "No audit results." in text and "run with --rl-audit" in text


# ============================================================================ in a browser


def test_chromium_renders_the_page_without_a_console_message(
        report: tuple[Path, dict[str, Any]], tmp_path: Path):
    from PIL import Image

    dom, console, shot = chromium(report[0] / "index.html", tmp_path)
    assert console == []
    assert {k: v for k, v in Page(dom).sections().items() if " on " in k} == expected_sections()
    with Image.open(shot) as image:
        pixels = image.convert("RGB")
        assert pixels.getextrema() != ((255, 255), (255, 255), (255, 255))  # not blank
        assert len(pixels.getcolors(maxcolors=1 << 20) or range(1 << 20)) > 50
        # the forest plots' FAIL band is drawn: inline SVG renders
        fail = (0xF4, 0xB6, 0xB6)
        near = sum(n for n, c in pixels.getcolors(maxcolors=1 << 20) or []
                   if max(abs(a - b) for a, b in zip(c, fail, strict=True)) <= 3)
        assert near > 1000


def test_the_console_check_catches_a_script_error_and_a_network_load(
        unrated_page: tuple[Path, str], tmp_path: Path):
    # a report page, the smaller one (its script and markup are the same), and its first
    # screen: what is checked is the console, not what the page draws
    broken = tmp_path / "broken.html"
    broken.write_text(unrated_page[1].replace(
        "</body>", "<script>no_such_function();</script>"
                   '<img src="https://example.invalid/x.png"></body>'), encoding="utf-8")
    _, console, _ = chromium(broken, tmp_path, size=(1280, 640))
    assert any("script" in line.lower() for line in console), console
    assert any("example.invalid" in line for line in console), console



# ============================================================================ the top


def unrated_records() -> list[dict[str, Any]]:
    """An agent rated as usual beside one that does not clearly beat random actions."""
    why = {"pattern": "the agent does not clearly beat random actions (nominal -1150.2 vs "
                      "reference -1206.3 over 6 episodes)",
           "cause": "its lead is within the noise",
           "fix": "audit more episodes (episodes=, --rl-episodes); or train the agent"}
    unclear = [rec(name, ratio, agent="PPO-5k", env="Pendulum-v1", order=i, diagnosis=why,
                   rating="INCONCLUSIVE", reference="random", reference_score=-1206.3,
                   nominal_returns=[-1150.2] * 6)
               for i, (name, ratio) in enumerate([("jitter", 0.97), ("delay", 1.02)])]
    return [*unclear, rec("jitter", 0.97, order=2), rec("speed_5x", 0.3, order=3)]


def glance_rows(page: str) -> list[list[str]]:
    """The cells of the glance table at the top of ``page``, row by row (header first)."""
    import re
    from html import unescape

    table = re.search(r'<table class="glance">(.*?)</table>', page, re.S)
    assert table is not None, "no glance table"
    return [[unescape(re.sub(r"<[^>]+>", "", c)).strip()
             for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)]


@pytest.fixture(scope="module")
def unrated_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """index.html of ``unrated_records()`` and its text, drawn once: one test reads the
    text, the other renders the file in Chromium."""
    folder = tmp_path_factory.mktemp("unrated")
    doc = summary(unrated_records(), version="9.9", extra={"seed": 0})
    page = folder / "index.html"
    text = html(doc, folder)
    page.write_text(text, encoding="utf-8")
    return page, text


def test_the_top_of_the_page_says_what_the_ratios_are_ratios_of(
        unrated_page: tuple[Path, str]):
    page = unrated_page[1]
    assert page.index('<table class="glance">') < page.index('<section class="pair"')
    why = ("the agent does not clearly beat random actions (nominal -1150.2 vs reference "
           "-1206.3 over 6 episodes)")
    assert glance_rows(page) == [
        ["agent", "env", "nominal return", "episodes", "reference", "deployment", "stress",
         "cannot rate because"],
        ["PPO", "CartPole-v1", "483.3", "6", "0.0", "PASS 0.970", "FAIL 0.300", "-"],
        ["PPO-5k", "Pendulum-v1", "-1150.2", "6", "-1206.3 (random actions)",
         "INCONCLUSIVE", "-", why]]
    # each agent's section starts the same way, and its table has the columns
    assert ("Ratios of the nominal mean return -1150.2 over 6 episodes, reference -1206.3 "
            f"(random actions). INCONCLUSIVE: {why}.") in Page(page).plain()


def test_chromium_shows_nominal_reference_and_inconclusive_at_the_top(
        unrated_page: tuple[Path, str], tmp_path: Path):
    """The report's first screen, as a browser draws it: the glance table with the nominal
    return, the reference and the INCONCLUSIVE cell in its colour."""
    from PIL import Image

    dom, console, shot = chromium(unrated_page[0], tmp_path, size=(1280, 640))
    assert console == []
    assert glance_rows(dom)[2][3:6] == ["6", "-1206.3 (random actions)", "INCONCLUSIVE"]
    with Image.open(shot) as image:
        assert image.size == (1280, 640)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20) or []
    # the INCONCLUSIVE cell's background (#b3d7f0) fills a visible area of the first screen
    blue = (0xB3, 0xD7, 0xF0)
    assert sum(n for n, c in colours if max(abs(a - b) for a, b in zip(c, blue, strict=True))
               <= 3) > 1000


def test_the_top_has_no_unrated_column_when_every_agent_is_rated(tmp_path: Path):
    doc = summary([rec("jitter", 0.97), rec("speed_5x", 0.3, order=1)], version="9.9")
    assert glance_rows(html(doc, tmp_path)) == [
        ["agent", "env", "nominal return", "episodes", "reference", "deployment", "stress"],
        ["PPO", "CartPole-v1", "483.3", "6", "0.0", "PASS 0.970", "FAIL 0.300"]]
