"""Audit tests without ``--rl-audit``, with ``pytester``: skipped with a reason naming the
option, and nothing heavy imported."""

from __future__ import annotations

import re

import pytest
from plugin_cli import outcomes

SKIPPED_TESTS = """
import pytest

@pytest.mark.rl_audit
def test_marked():
    pass

@pytest.mark.rl_scenario("jitter", "delay")
def test_scenarios(rl_audit):
    rl_audit()

def test_fixture_only(rl_audit):
    rl_audit()

@pytest.mark.rl_threshold(min_ratio=0.9)
def test_threshold_only():
    pass

def test_plain():
    pass
"""


def test_audit_tests_are_skipped_without_rl_audit_with_a_reason_naming_it(
        pytester: pytest.Pytester):
    pytester.makepyfile(test_skip=SKIPPED_TESTS)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=5)
    assert outcomes(result) == {"test_skip.py::test_plain": "passed"}  # only it ran
    skips = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert sum(int(re.match(r"SKIPPED \[(\d+)\]", line)[1]) for line in skips) == 5
    assert all("run it with --rl-audit" in line for line in skips), skips


def test_without_rl_audit_nothing_heavy_is_imported(pytester: pytest.Pytester):
    pytester.makepyfile(test_skip=SKIPPED_TESTS)
    pytester.makeconftest("""
        import sys

        HEAVY = ("gymnasium", "torch", "scipy", "stable_baselines3", "matplotlib",
                 "pytest_rlaudit.scenarios", "pytest_rlaudit.verdicts.assertions")

        def _heavy():
            return ",".join(m for m in HEAVY if m in sys.modules) or "none"

        def pytest_collection_finish(session):
            print("\\nHEAVY-AT-COLLECTION=" + _heavy())

        def pytest_sessionfinish(session):
            print("\\nHEAVY-AT-END=" + _heavy())
    """)
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=5)
    result.stdout.fnmatch_lines(["HEAVY-AT-COLLECTION=none", "HEAVY-AT-END=none"])
