"""The plugin's first face: --rl-audit, its ini key and the markers."""

from __future__ import annotations

import pytest

TEST_FILE = """
import pytest

@pytest.mark.rl_audit
def test_audited():
    pass

@pytest.mark.rl_scenario("jitter")
def test_scenario():
    pass

def test_plain():
    pass
"""


def test_rl_tests_are_skipped_without_the_flag_with_a_reason_naming_it(pytester: pytest.Pytester):
    pytester.makepyfile(TEST_FILE)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*run it with --rl-audit*"])


def test_the_flag_runs_them(pytester: pytest.Pytester):
    pytester.makepyfile(TEST_FILE)
    pytester.runpytest("--rl-audit").assert_outcomes(passed=3)


def test_the_ini_key_runs_them(pytester: pytest.Pytester):
    pytester.makepyfile(TEST_FILE)
    pytester.makeini("[pytest]\nrl_audit = true\n")
    pytester.runpytest().assert_outcomes(passed=3)


def test_markers_and_option_are_documented(pytester: pytest.Pytester):
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines([
        "*@pytest.mark.rl_audit:*",
        "*@pytest.mark.rl_scenario(*names, **params):*",
        "*@pytest.mark.rl_threshold(min_ratio=None, min_rating=None, mode='point'):*",
        "*@pytest.mark.rl_episodes(n, max_n=None, target_ci_width=None):*",
    ])
    pytester.runpytest("--help").stdout.fnmatch_lines(["*rlaudit*", "*--rl-audit*"])


def test_markers_are_registered_under_strict_markers(pytester: pytest.Pytester):
    pytester.makepyfile(TEST_FILE)
    pytester.runpytest("--strict-markers", "--rl-audit").assert_outcomes(passed=3)
