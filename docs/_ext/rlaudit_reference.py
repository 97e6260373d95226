"""The docs' reference, generated from the code so it cannot drift (DESIGN.md section 18).

Plain functions of the package (no Sphinx needed to call them, so the suite checks them
cheaply: tests/test_docs_reference.py): each returns one Markdown fragment that reads the
same on a code host (GitHub) as on the site: no Sphinx role, docstrings' reST roles turned
into code. The fragments are committed, inside the pages of ``docs/reference/`` between
``<!-- generated: NAME -->`` and ``<!-- end generated -->``, so the README's links lead to
pages with their content; the suite fails when one is stale. The full docstrings of the
API and the errors (autodoc's reST) are written at build time to
``docs/reference/_generated/`` (ignored by git), for the site alone.

    python docs/_ext/rlaudit_reference.py     # refresh the generated parts of the pages
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
GENERATED = _HERE.parent / "reference" / "_generated"
REFERENCE = _HERE.parent / "reference"
#: The command that refreshes the committed fragments (named by the staleness test).
REFRESH = "python docs/_ext/rlaudit_reference.py"
_ROLE = re.compile(r":(?:py:)?[a-z]+:`~?([^`<]*?)(?:\s*<([^>]*)>)?`")


def plain(text: str) -> str:
    """A docstring's reST inline markup as Markdown that GitHub and MyST both read:
    ``:func:`~a.b``` and ``:mod:`a``` become code, reST's double backquotes single ones.

    >>> plain("see :func:`~pytest_rlaudit.audit` and ``x=1``, :mod:`gymnasium`")
    'see `audit` and `x=1`, `gymnasium`'
    """
    def role(match: re.Match[str]) -> str:
        title, target = match.group(1).strip(), match.group(2)
        shown = title or (target or "")
        if match.group(0).split("`", 1)[1].startswith("~"):
            shown = shown.rsplit(".", 1)[-1]
        return f"`{shown}`"

    text = _ROLE.sub(role, text)
    return re.sub(r"``([^`]+?)``", r"`\1`", text)


def _cell(text: Any) -> str:
    """``text`` as one Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: Any) -> str:
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _rst(text: str) -> str:
    """reST in a MyST page: autodoc's output is reST, so its directives go in eval-rst."""
    return f"```{{eval-rst}}\n{text}```\n"


# ----------------------------------------------------------------------------- options


def options() -> str:
    """Every plugin option: its flag, ini key, value, default and help."""
    from pytest_rlaudit.plugin.options import OPTIONS, _flag

    # a list, not a table: long flags would wrap in a narrow column
    items = []
    for o in OPTIONS:
        flag = o.flag if o.parse is _flag else f"{o.flag}={o.metavar or 'VALUE'}"
        default = "off" if o.parse is _flag and o.default is False else (
            "none" if o.default in (None, ()) else _code(o.default))
        facts = f"ini key {_code(o.dest)}; default: {default}" + (
            "; repeatable, the values add up" if o.repeat else "")
        help_ = _cell(o.help.replace("%%", "%")).replace("\\|", "|")  # argparse's escape of %
        # a bullet each, not a definition list: a code host shows those as plain lines
        items.append(f"- {_code(flag)}: {help_}\n\n  {facts}.\n")
    return ("Set on the command line, or in the `[pytest]` ini section under the ini key "
            "(`rl_episodes = 50`; flags take `true` or `false`). Precedence: marker, then "
            "command line, then ini, then the default.\n\n" + "\n".join(items))


# ----------------------------------------------------------------------------- markers


def markers() -> str:
    """The markers the plugin registers, with their arguments."""
    from pytest_rlaudit.plugin.markers import MARKERS

    parts = []
    for line in MARKERS:
        signature, _, doc = line.partition(": ")
        name = signature.split("(", 1)[0]
        # inline, not a python block: docs/conftest.py runs those (a bare decorator is no
        # statement)
        parts.append(f"## `{name}`\n\n`@pytest.mark.{signature}`\n\n{doc.strip()}\n")
    return "\n".join(parts)


# ---------------------------------------------------------------------------- fixtures


def _fixture_scope(node: ast.FunctionDef) -> str | None:
    """``"function"``… if ``node`` is decorated ``@pytest.fixture(...)``, else None."""
    for deco in node.decorator_list:
        call = deco if isinstance(deco, ast.Call) else None
        target = call.func if call else deco
        if isinstance(target, ast.Attribute) and target.attr == "fixture":
            for kw in call.keywords if call else ():
                if kw.arg == "scope" and isinstance(kw.value, ast.Constant):
                    return str(kw.value.value)
            return "function"
    return None


def fixtures() -> str:
    """The plugin's fixtures, their scopes and docstrings (read from the source, so no
    pytest version's fixture wrapper is in the way)."""
    import pytest_rlaudit.plugin.fixtures as module

    tree = ast.parse(Path(inspect.getfile(module)).read_text(encoding="utf-8"))
    parts = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and (scope := _fixture_scope(node)):
            args = [a.arg for a in node.args.args]
            doc = plain(inspect.cleandoc(ast.get_docstring(node) or ""))
            parts.append(f"## `{node.name}`\n\nScope: {scope}; uses: "
                         f"{', '.join(f'`{a}`' for a in args) or 'nothing'}.\n\n{doc}\n")
    return "\n".join(parts)


# --------------------------------------------------------------------------- scenarios


def scenarios() -> str:
    """The scenario registry: name, category, parameters with defaults, description."""
    from pytest_rlaudit import scenarios as registry

    rows = []
    for name in registry.names():
        s = registry.get(name)
        params = ", ".join(f"{k}={v!r}" for k, v in s.params.items())
        wrapper = getattr(s.perturbation, "__name__", None)
        rows.append((_code(name), s.category, _code(params) if params else "none",
                     _code(wrapper) if wrapper else "none", s.description))
    return ("Every registered scenario, by name (`@pytest.mark.rl_scenario(\"jitter\", "
            "base=3)` overrides a parameter; `--rl-scenarios=delay,jitter` picks them for "
            "zero-config audits).\n\n"
            + _table(("Name", "Category", "Parameters (defaults)", "Wrapper", "What it does"),
                     rows))


# ----------------------------------------------------------------------------- records

_JSON = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object",
         list: "array", type(None): "null"}


def _json_types(kinds: tuple[type, ...]) -> str:
    names = [_JSON[k] for k in kinds]
    if "number" in names and "integer" in names:
        names.remove("integer")
    return ", ".join(dict.fromkeys(names))


def records() -> str:
    """The record fields (``summary.json``'s ``results``, baselines): key, types, meaning."""
    from pytest_rlaudit.auditing.records import FIELDS, REQUIRED

    rows = [(_code(key) + (" (required)" if key in REQUIRED else ""), _json_types(kinds), meaning)
            for key, (kinds, meaning) in FIELDS.items()]
    return ("One record per audited test (per scenario): an entry of `summary.json`'s "
            "`results`, what `--rl-save` keeps and `--rl-compare` pairs. Required fields are "
            "in every record; the plugin writes all of them.\n\n"
            + _table(("Key", "JSON types", "Meaning"), rows))


#: summary.json's ``aggregates`` entries, documented here and checked against what
#: ``aggregates()`` returns (so a key added there fails the docs build until it is described).
AGGREGATE_KEYS = {
    "agent": ("string", "the agent's name"),
    "env": ("string", "the env's name"),
    "nominal": ("number", "the mean nominal return (over the record with the most episodes)"),
    "episodes": ("integer", "the episodes of that record"),
    "reference": ("number", "the reference score the ratios are measured from"),
    "reference_kind": ("string", "\"random\" or \"number\""),
    "inconclusive": ("string, null", "why its scenarios could not be rated (a diagnosis "
                     "pattern, or INCONCLUSIVE), or null"),
    "deployment": ("object, null", "the deployment score: {score (the lowest ratio), rating, "
                   "scenario (whose ratio it is)}, or null without deployment scenarios"),
    "stress": ("object, null", "the stress score, as deployment"),
    "mix": ("string, null", "the ScenarioMix line that trains under what broke it, weighted "
            "by episode length (nominal mean env steps over the scenario's), or null"),
    "mix_mark": ("string, null", "whether a benchmark showed that line to raise the ratios "
                 "(\"shown to raise the ratio in benchmarks/bench_fixes.py\") or it is an "
                 "\"untested suggestion\"; null with mix"),
}
#: The top level of summary.json (besides what the plugin adds: its options and machine).
SUMMARY_KEYS = {
    "schema": ("integer", "the layout's version"),
    "tool": ("string", "\"pytest-rlaudit\""),
    "version": ("string", "pytest-rlaudit's version"),
    "results": ("array", "the records, in collection order (see the record fields)"),
    "aggregates": ("array", "one entry per (agent, env): the fields below"),
}


def summary() -> str:
    """summary.json's top level and its ``aggregates`` fields, checked against the code."""
    from pytest_rlaudit.reports.summary import aggregates
    from pytest_rlaudit.reports.summary import summary as make_summary

    rec = {"nodeid": "t::x[jitter]", "agent": "PPO", "env": "E", "scenario": "jitter",
           "category": "deployment", "ratio": 0.5, "rating": "FAIL", "diagnosis": None,
           "thresholds": {"pass": 0.95, "mild": 0.8, "degraded": 0.5}, "order": 0,
           "nominal_returns": [1.0, 1.0], "returns": [0.5, 0.5], "seeds": [0, 1]}
    for what, documented, actual in (
            ("aggregates", AGGREGATE_KEYS, aggregates([rec])[0]),
            ("summary.json", SUMMARY_KEYS, make_summary([rec], version="0"))):
        if set(documented) != set(actual):
            raise RuntimeError(f"docs/_ext/rlaudit_reference.py: {what} has keys "
                               f"{sorted(actual)}, the docs describe {sorted(documented)}")
    return ("The top level of `summary.json` (`--rl-report DIR`):\n\n"
            + _table(("Key", "JSON types", "Meaning"),
                     [(_code(k), t, m) for k, (t, m) in SUMMARY_KEYS.items()])
            + "\nEach entry of `aggregates`, one per (agent, env):\n\n"
            + _table(("Key", "JSON types", "Meaning"),
                     [(_code(k), t, m) for k, (t, m) in AGGREGATE_KEYS.items()]))


# ------------------------------------------------------------------------------ errors


def _summary_line(obj: Any) -> str:
    """The first paragraph of ``obj``'s docstring, as plain Markdown on one line."""
    doc = inspect.getdoc(obj) or ""
    return " ".join(plain(doc.split("\n\n", 1)[0]).split())


def errors() -> str:
    """Every exception and warning of ``pytest_rlaudit.errors``: its bases and what it
    means (the first paragraph of its docstring)."""
    import pytest_rlaudit.errors as module

    rows = []
    for name in module.__all__:
        cls = getattr(module, name)
        bases = ", ".join(_code(b.__name__) for b in cls.__bases__)
        rows.append((_code(name), bases, _summary_line(cls)))
    return _table(("Name", "Subclass of", "What it means"), rows)


def errors_autodoc() -> str:
    """autodoc directives for every error: the full docstrings, on the site."""
    import pytest_rlaudit.errors as module

    return _rst("".join(f".. autoexception:: pytest_rlaudit.errors.{name}\n   :show-inheritance:\n\n"
                        for name in module.__all__))


# --------------------------------------------------------------------------------- api

#: The public API (``pytest_rlaudit.__all__``) by what it is for. Errors have their page.
API_GROUPS: dict[str, tuple[str, ...]] = {
    "Audits": ("audit", "check_robust", "tolerance", "AuditResult", "ScenarioResult",
               "ToleranceCurve", "Diagnosis"),
    "Assertions": ("assert_robust", "assert_no_regression", "assert_deterministic",
                   "assert_no_policy_collapse", "find_breaking_schedule", "RobustnessError"),
    "Scenarios and schedules": ("Scenario", "Schedule"),
    "Agents": ("as_policy", "Policy"),
    "Envs": ("BatchedEnv",),
    "Replay": ("replay", "compare_replay", "record", "assert_replay_close", "ReplayResult",
               "ReplayComparison"),
}


def _api_names() -> list[tuple[str, tuple[str, ...]]]:
    """The API's groups: :data:`API_GROUPS`, and "Other" for a public name in none."""
    import pytest_rlaudit
    import pytest_rlaudit.errors as errors_module

    public = [n for n in pytest_rlaudit.__all__ if not n.startswith("_")]
    grouped = {n for names in API_GROUPS.values() for n in names}
    rest = tuple(n for n in public
                 if n not in grouped and n not in errors_module.__all__ and n != "scenarios")
    return [(title, names) for title, names in [*API_GROUPS.items(), ("Other", rest)] if names]


def _kind(obj: Any) -> str:
    return ("exception" if isinstance(obj, type) and issubclass(obj, BaseException)
            else "class" if isinstance(obj, type) else "function")


def _signature(name: str, obj: Any) -> str:
    """``name(arg, key=default, ...)`` without annotations (the docstrings say the types),
    one parameter group per line past 88 characters, as black would wrap it."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return name
    empty = inspect.Parameter.empty
    sig = sig.replace(parameters=[p.replace(annotation=empty) for p in sig.parameters.values()],
                      return_annotation=empty)
    text = f"{name}{sig}"
    if len(text) <= 88:
        return text
    lines, line = [], f"{name}("
    for part in [*str(sig)[1:-1].split(", ")]:
        if len(line) + len(part) + 2 > 88 and line.strip() not in ("", f"{name}("):
            lines.append(line.rstrip())
            line = "    "
        line += part + ", "
    return "\n".join([*lines, line.rstrip(", ") + ")"])


def api() -> str:
    """``pytest_rlaudit.__all__`` grouped by :data:`API_GROUPS`: each name's signature and
    the first paragraph of its docstring (the site adds the full docstrings)."""
    import pytest_rlaudit

    parts = []
    for title, names in _api_names():
        parts.append(f"## {title}\n")
        for name in names:
            obj = getattr(pytest_rlaudit, name)
            parts.append(f"### `{name}` ({_kind(obj)})\n\n```text\n{_signature(name, obj)}\n```\n\n"
                         f"{_summary_line(obj)}\n")
    return "\n".join(parts)


def api_autodoc() -> str:
    """autodoc directives for ``pytest_rlaudit.__all__``, grouped as :func:`api`: the full
    docstrings, on the site."""
    import pytest_rlaudit

    parts = []
    for title, names in _api_names():
        parts.append(f"### {title}\n")
        for name in names:
            kind = _kind(getattr(pytest_rlaudit, name))
            options = "   :members:\n" if kind == "class" else ""
            parts.append(_rst(f".. auto{kind}:: pytest_rlaudit.{name}\n{options}"))
    parts.append("### The scenario registry\n\n" + _rst(
        ".. automodule:: pytest_rlaudit.world.scenarios\n   :members: register, names, get, preset\n"))
    return "\n".join(parts)


#: The committed fragments: page of docs/reference/ -> the fragments it holds, in order.
PAGES: dict[str, tuple[Callable[[], str], ...]] = {
    "options": (options,), "markers": (markers,), "fixtures": (fixtures,),
    "scenarios": (scenarios,), "records": (records, summary), "errors": (errors,),
    "api": (api,)}
#: Written at build time for the site alone (reST autodoc that a code host cannot show).
AUTODOC: dict[str, Callable[[], str]] = {"api": api_autodoc, "errors": errors_autodoc}


def _marks(name: str) -> tuple[str, str]:
    return (f"<!-- generated: {name} ({REFRESH}); do not edit -->\n",
            f"<!-- end generated: {name} -->\n")


def refreshed(page: str, text: str) -> str:
    """``text`` (the page's) with each of its generated fragments made anew."""
    for make in PAGES[page]:
        start, end = _marks(make.__name__)
        if start not in text or end not in text:
            raise RuntimeError(f"docs/reference/{page}.md has no {start.strip()} ... "
                               f"{end.strip()} section for its generated {make.__name__}")
        head, rest = text.split(start, 1)
        text = head + start + "\n" + make().rstrip("\n") + "\n\n" + end + rest.split(end, 1)[1]
    return text


def stale() -> list[str]:
    """The committed pages whose generated parts differ from the code's."""
    return [page for page in PAGES
            if (path := REFERENCE / f"{page}.md").read_text(encoding="utf-8")
            != refreshed(page, path.read_text(encoding="utf-8"))]


def write(reference: Path = REFERENCE, generated: Path = GENERATED) -> list[Path]:
    """Refresh the committed pages' generated parts, and write the autodoc fragments for
    the site (only files whose text changed, so Sphinx rebuilds only what did)."""
    written = []
    for page in PAGES:
        path = reference / f"{page}.md"
        text = path.read_text(encoding="utf-8")
        new = refreshed(page, text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            written.append(path)
    return written + _write_autodoc(generated)


def _write_autodoc(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in AUTODOC.items():
        path = directory / f"{name}.md"
        text = "<!-- generated by docs/_ext/rlaudit_reference.py: do not edit -->\n\n" + make()
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def setup(app: Any) -> dict[str, Any]:
    """The Sphinx extension: write the autodoc fragments when the builder starts (the
    committed pages are refreshed by hand, and checked by the suite)."""
    app.connect("builder-inited", lambda app: _write_autodoc(GENERATED))
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    for written in write():
        print(written)
