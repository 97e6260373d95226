"""The plugin's options and ini keys end to end, with ``pytester``: the help group, a
zero-config run configured by ini keys alone, the precedence of marker, command line and
ini, the usage errors of bad values, one Settings field per option, and the option a
failure names when the default reference cannot be beaten."""

from __future__ import annotations

import re

import pytest
from audit_records import records
from plugin_cli import USAGE, junit, text

from pytest_rlaudit.plugin.options import OPTIONS


def test_every_option_is_in_help_under_the_rlaudit_group_with_its_ini_key(
        pytester: pytest.Pytester):
    lines = pytester.runpytest("--help").outlines
    start = lines.index("RL robustness audits (pytest-rlaudit):")
    end = next(i for i in range(start + 1, len(lines))
               if lines[i] and not lines[i].startswith(" "))
    group = "\n".join(lines[start:end])
    for option in OPTIONS:
        assert re.search(rf"^  {option.flag}[ =]", group, re.M), option.flag
    # and only there: no rl option leaks into another group
    others = "\n".join(lines[:start] + lines[end:])
    assert not re.search(r"^\s+--rl-", others, re.M)
    for option in OPTIONS:
        kind = "bool" if option.flag in ("--rl-audit", "--rl-fail-stress", "--rl-stochastic",
                                         "--rl-deterministic", "--rl-trusted", "--rl-videos",
                                         "--rl-history-show", "--rl-attribute") else "string"
        assert re.search(rf"^  {option.dest} \({kind}\):", "\n".join(lines), re.M), option.dest


def test_ini_keys_configure_a_zero_config_run(tester: pytest.Pytester):
    tester.makeini("""
        [pytest]
        rl_audit = true
        rl_agent = agents:robust
        rl_env = CartPole-v1
        rl_episodes = 3
        rl_seed = 7
        rl_scenarios = jitter, speed_5x
        rl_min_rating = PASS
        rl_fail_stress = true
    """)
    result = tester.runpytest("-v")
    result.stdout.fnmatch_lines(["*collected 2 items"])
    recs = records(result)
    assert list(recs) == ["rl-audit::jitter", "rl-audit::speed_5x"]
    for rec in recs.values():
        assert rec["agent"] == "robust" and rec["env"] == "CartPole-v1"
        assert rec["episodes"] == 3 and rec["seed"] == 7
        # rl_fail_stress = true gates the stress scenario with rl_min_rating too
        assert rec["gate"] == {"min_ratio": None, "min_rating": "PASS", "mode": "point"}
        assert rec["passed"] == (rec["rating"] == "PASS")
    # the seed reaches the rollouts: the failure message names env seeds 7-9
    if not all(r["passed"] for r in recs.values()):
        result.stdout.fnmatch_lines(["*env seeds 7-9*"])


PRECEDENCE_TESTS = """
import pytest

@pytest.mark.rl_episodes(5)
@pytest.mark.rl_threshold(min_rating="DEGRADED")
@pytest.mark.rl_scenario("delay")
def test_marked(rl_audit):
    rl_audit()

@pytest.mark.rl_threshold(mode="not_worse")
@pytest.mark.rl_scenario("delay")
def test_mode_only(rl_audit):
    rl_audit()

@pytest.mark.rl_scenario("delay")
def test_unmarked(rl_audit):
    rl_audit()
"""


def test_precedence_is_marker_then_command_line_then_ini(tester: pytest.Pytester):
    tester.makepyfile(test_prec=PRECEDENCE_TESTS)
    tester.makeini("""
        [pytest]
        rl_agent = agents:robust
        rl_env = CartPole-v1
        rl_episodes = 6
        rl_min_rating = FAIL
    """)
    with_cli = tester.runpytest("--rl-audit", "--rl-episodes", "4", "--rl-min-rating", "PASS",
                                "--junitxml=cli.xml")
    _, cases = junit(tester.path / "cli.xml")
    episodes = {name: props["rl.episodes"] for name, (props, _) in cases.items()}
    assert episodes == {"test_prec::test_marked[delay]": "5",
                        "test_prec::test_mode_only[delay]": "4",
                        "test_prec::test_unmarked[delay]": "4"}
    gates = {nodeid.split("::")[1]: rec["gate"] for nodeid, rec in records(with_cli).items()}
    assert gates == {
        "test_marked[delay]": {"min_ratio": None, "min_rating": "DEGRADED", "mode": "point"},
        # a marker overrides only the arguments it gives
        "test_mode_only[delay]": {"min_ratio": None, "min_rating": "PASS", "mode": "not_worse"},
        "test_unmarked[delay]": {"min_ratio": None, "min_rating": "PASS", "mode": "point"},
    }

    ini_only = tester.runpytest("--rl-audit", "--junitxml=ini.xml")
    _, cases = junit(tester.path / "ini.xml")
    episodes = {name: props["rl.episodes"] for name, (props, _) in cases.items()}
    assert episodes == {"test_prec::test_marked[delay]": "5",
                        "test_prec::test_mode_only[delay]": "6",
                        "test_prec::test_unmarked[delay]": "6"}
    gates = {nodeid.split("::")[1]: rec["gate"]["min_rating"]
             for nodeid, rec in records(ini_only).items()}
    assert gates == {"test_marked[delay]": "DEGRADED", "test_mode_only[delay]": "FAIL",
                     "test_unmarked[delay]": "FAIL"}


@pytest.mark.parametrize(("args", "message"), [
    (("--rl-episodes", "1"), "argument --rl-episodes: must be an integer >= 2*got 1"),
    (("--rl-episodes", "abc"), "argument --rl-episodes: must be an integer >= 2 (paired episodes), got 'abc'"),
    (("--rl-seed", "-1"), "argument --rl-seed: must be an integer >= 0, got -1"),
    (("--rl-seed", str(2**70)),
     "argument --rl-seed: must be an integer in [[]0, 9223372036854775807] (episode i resets "
     "with env seed seed + i, a 64-bit integer), got 1180591620717411303424"),
    (("--rl-reference", "best"), "argument --rl-reference: must be a number or 'random', got 'best'"),
    (("--rl-reference", "nan"), "argument --rl-reference: must be a finite number or 'random'*"),
    (("--rl-min-ratio", "3"), "argument --rl-min-ratio: must be a finite number in (0, 2], got 3.0"),
    (("--rl-min-ratio", "0"), "argument --rl-min-ratio: must be a finite number in (0, 2], got 0.0"),
    (("--rl-min-rating", "GOOD"),
     "argument --rl-min-rating: must be one of PASS, MILD, DEGRADED, FAIL, got 'GOOD'"),
    (("--rl-mode", "strict"),
     "argument --rl-mode: must be one of point, confident, not_worse, got 'strict'"),
    (("--rl-batch-size", "0"), "argument --rl-batch-size: must be an integer >= 1, got 0"),
    (("--rl-scenarios", ","), "argument --rl-scenarios: must name at least one scenario*"),
    (("--rl-workers", "-2"), 'argument --rl-workers: must be an integer >= 0 or "auto"*got -2'),
    (("--rl-workers", "many"),
     'argument --rl-workers: must be an integer >= 0 or "auto"*got \'many\''),
    (("--rl-backend", "dask"), "argument --rl-backend: must be one of local, ray, got 'dask'"),
])
def test_a_bad_option_value_is_a_usage_error_naming_the_option_and_the_rule(
        pytester: pytest.Pytester, args: tuple[str, ...], message: str):
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert "INTERNALERROR" not in text(result)


@pytest.mark.parametrize(("line", "message"), [
    ("rl_episodes = 1", "ini option rl_episodes = '1': must be an integer >= 2*"),
    ("rl_seed = -3", "ini option rl_seed = '-3': must be an integer >= 0, got -3"),
    ("rl_min_rating = good", "ini option rl_min_rating = 'good': must be one of PASS, MILD*"),
    ("rl_mode = strict", "ini option rl_mode = 'strict': must be one of point, confident*"),
    ("rl_reference = best", "ini option rl_reference = 'best': must be a number or 'random'*"),
])
def test_a_bad_ini_value_is_a_usage_error_naming_the_key(
        pytester: pytest.Pytester, line: str, message: str):
    pytester.makepyfile("def test_plain():\n    pass\n")
    pytester.makeini(f"[pytest]\n{line}\n")
    result = pytester.runpytest()
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert "INTERNALERROR" not in text(result)


@pytest.mark.parametrize("key", ["rl_fail_stress", "rl_audit"])
def test_a_bad_boolean_ini_value_is_a_usage_error_not_an_internal_error(
        pytester: pytest.Pytester, key: str):
    pytester.makepyfile("def test_plain():\n    pass\n")
    pytester.makeini(f"[pytest]\n{key} = maybe\n")
    result = pytester.runpytest()
    assert "INTERNALERROR" not in text(result)
    assert result.ret == USAGE
    assert key in text(result) and "maybe" in text(result)


def test_settings_have_one_field_per_option():
    from dataclasses import fields

    from pytest_rlaudit.plugin.options import Settings

    assert [f"rl_{f.name}" for f in fields(Settings)] == [o.dest for o in OPTIONS]


def test_a_negative_return_env_without_a_reference_says_which_option_to_set(pytester):
    pytester.makepyfile(pend_agent="""
import numpy as np

def controller(obs):
    cos, sin, vel = obs[:, 0], obs[:, 1], obs[:, 2]
    return np.clip(-(6.0 * np.arctan2(sin, cos) + 1.0 * vel), -2, 2)[:, None]
""")
    args = ["--rl-audit", "--rl-agent", "pend_agent:controller", "--rl-env", "Pendulum-v1",
            "--rl-scenarios", "obs_noise", "-p", "no:benchmark"]
    # any nominal return of Pendulum is negative: 4 episodes show it
    result = pytester.runpytest(*args, "--rl-episodes", "4")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*does not exceed the reference (0)*--rl-reference random*"])
    assert "Traceback" not in result.stdout.str() and "stats.py" not in result.stdout.str()
    # clearly beating random actions takes more (at 10 episodes the audit is INCONCLUSIVE)
    pytester.runpytest(*args, "--rl-episodes", "30", "--rl-reference", "random"
                       ).assert_outcomes(passed=1)
