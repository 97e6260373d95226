"""The summary is never lost: --rl-report and --rl-save destinations are checked before any
audit runs, and an error while reporting (a full disk, a renderer's bug) leaves pytest's
failures section, its short summary and the rl audit section in place, and fails the run."""

from __future__ import annotations

import json
import sys
import types

# In-process pytester runs reuse these instead of importing them afresh on every run.
import gymnasium  # noqa: F401
import pytest

import pytest_rlaudit.reports.summary
import pytest_rlaudit.reports.terminal
import pytest_rlaudit.verdicts.assertions  # the engine, and scipy with it
from pytest_rlaudit.plugin import reporting

AUDIT = "--rl-audit --rl-agent agents:robust --rl-env CartPole-v1 --rl-episodes 3".split()
TESTS = '''
import pytest

def test_plain_failure():
    assert 1 == 2, "an ordinary failure"

@pytest.mark.rl_scenario("delay")
def test_audit(rl_audit):
    rl_audit()
'''


def test_a_report_path_that_is_a_file_is_a_usage_error_before_any_audit(tester):
    tester.makepyfile(test_x=TESTS)
    taken = tester.path / "notes.txt"
    taken.write_text("mine")
    result = tester.runpytest(*AUDIT, f"--rl-report={taken}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --rl-report {taken}: is a file; --rl-report takes a "
                                 "folder (created if need be) *, e.g. --rl-report *rl-report"])
    assert "collected" not in result.stdout.str() and taken.read_text() == "mine"


class _Unwritable:
    """tempfile as a read-only place shows it (root writes through permission bits, so a
    chmod would not do)."""

    @staticmethod
    def TemporaryFile(dir=None):  # tempfile's name
        raise PermissionError(13, "Permission denied")


@pytest.mark.parametrize(("option", "path", "match"), [
    ("--rl-report", "out/report", "--rl-report {path}: cannot write the report there: {base} is "
                                  "not writable (Permission denied); give a folder this user "
                                  "can write"),
    ("--rl-save", "out/base.json", "--rl-save {path}: cannot save the baseline there: {base} is "
                                   "not writable (Permission denied); give a path this user can "
                                   "write"),
])
def test_an_unwritable_destination_is_a_usage_error_naming_it(tester, monkeypatch, option, path,
                                                              match):
    tester.makepyfile(test_x=TESTS)
    monkeypatch.setattr(reporting, "tempfile", _Unwritable)
    result = tester.runpytest(*AUDIT, f"{option}={tester.path / path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: " + match.format(path=tester.path / path,
                                                          base=tester.path)])


def _no_space(path, data):
    raise OSError(28, "No space left on device", str(path))


def test_a_disk_full_while_writing_keeps_the_summary_and_fails_the_run(tester, monkeypatch,
                                                                       tmp_path):
    tester.makepyfile(test_x=TESTS)
    monkeypatch.setattr(pytest_rlaudit.reports.summary, "atomic_write", _no_space)
    result = tester.runpytest(*AUDIT, f"--rl-report={tmp_path / 'report'}")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*= FAILURES =*", "*AssertionError: an ordinary failure*",
        "*= rl audit =*", "robust  CartPole-v1  delay *",
        f"error: writing the report to {tmp_path / 'report'} failed: OSError: [[]Errno 28] No "
        "space left on device: *summary.json' (at test_reporting.py:*); check the "
        "path and the free space; the run fails",
        "*= short test summary info =*", "FAILED test_x.py::test_plain_failure - *",
        "*= 1 failed, 1 passed in *"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def _bug(*args, **kwargs):
    raise KeyError("rating")


@pytest.mark.parametrize(("module", "name", "what"), [
    (pytest_rlaudit.reports.summary, "markdown", "writing the report to *report"),
    (pytest_rlaudit.reports.terminal, "audit_section", "the rl audit section"),
    # while the test's report is made (under xdist, on a worker): it rides on the report
    (pytest_rlaudit.reports.terminal, "scenario_line", "the rl audit lines of "
                                                       "test_x.py::test_audit?delay?"),
])
def test_a_renderer_bug_is_one_line_and_fails_an_otherwise_green_run(tester, monkeypatch,
                                                                     tmp_path, module, name,
                                                                     what):
    tester.makepyfile(test_x=TESTS.split("def test_plain_failure")[0]
                      + TESTS.split("an ordinary failure\"\n")[1])
    monkeypatch.setattr(module, name, _bug)
    # the report without matplotlib: the figures are no renderer these cases break
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as inner_runs.without_figures
    result = tester.runpytest(*AUDIT, f"--rl-report={tmp_path / 'report'}")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*= rl audit =*",
        f"error: {what} failed: KeyError: 'rating' (at test_reporting.py:*); a bug "
        "in pytest-rlaudit: please report it with this line; the run fails",
        "*= 1 passed in *"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    if name == "markdown":  # what was rendered before the bug is on disk
        assert json.loads((tmp_path / "report" / "summary.json").read_text())["results"]


def test_describe_names_the_innermost_frame_in_the_package():
    try:
        types.SimpleNamespace().missing  # noqa: B018
    except AttributeError as exc:
        line = reporting.describe("the rl audit section", exc)
    assert line.startswith("the rl audit section failed: AttributeError: 'types.SimpleNamespace' "
                           "object has no attribute 'missing' (at test_reporting.py:")


HOSTILE = '''
import pytest

@pytest.mark.parametrize("tag", ["<img src=x onerror=alert(1)>|`x`"])
@pytest.mark.rl_scenario("delay")
def test_hostile(rl_audit, tag):
    rl_audit()

@pytest.mark.rl_scenario("spike")
def test_broken(rl_audit):
    raise RuntimeError("<script>alert(1)</script> | cell")
'''


def test_hostile_names_stay_text_in_markdown_html_and_junit(tester, tmp_path):
    import re
    import xml.etree.ElementTree as ET

    tester.makepyfile(test_hostile=HOSTILE)
    report, junit = tmp_path / "report", tmp_path / "junit.xml"
    name = "<b>PPO</b> | x\n## injected"
    result = tester.runpytest(*AUDIT, "--rl-agent-name", name, f"--rl-report={report}",
                              f"--junitxml={junit}")
    result.assert_outcomes(passed=1, failed=1)
    md = (report / "summary.md").read_text()
    prose = re.sub(r"(`+).+?\1", "", md.replace("\\`", ""))  # code spans hold text as is
    assert not re.search(r"<(b|img|script)\b", prose)
    assert not [line for line in md.splitlines() if line.startswith("## injected")]
    assert "| &lt;b>PPO&lt;/b> \\| x ## injected | CartPole-v1 | delay |" in md
    assert "RuntimeError: &lt;script>alert(1)&lt;/script> \\| cell" in md
    page = (report / "index.html").read_text()
    assert "<img src=x" not in page and "<script>alert" not in page and "<b>PPO" not in page
    assert "&lt;b&gt;PPO&lt;/b&gt; | x\n## injected" in page
    root = ET.parse(junit).getroot()  # well-formed, and the values come back as they were
    values = {p.get("value") for p in root.iter("property")}
    assert "delay" in values
    assert next(c.get("name") for c in root.iter("testcase")) == (
        "test_hostile[delay-<img src=x onerror=alert(1)>|`x`]")
