"""``--rl-agent`` as a glob of training runs: one zero-config item per scenario, rated on
the runs' IQM; a glob of one agent is that agent, of none a usage error; a test of the
repo's own says to call ``audit_runs``.

Under pytest-xdist each worker audits the runs itself, on the same seeds, so its records
are one process's; a -n 2 run here costs ~50 s (two workers importing torch), so it is
left to the runs audit's own determinism tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import hypothesis  # noqa: F401
import pytest
from audit_records import records

import pytest_rlaudit.reports.summary
import pytest_rlaudit.verdicts.assertions  # noqa: F401
from pytest_rlaudit.stats.runs import iqm
from pytest_rlaudit.world.agents import as_policy

EXAMPLES = Path(__file__).parents[2] / "examples"
# ppo_cartpole breaks under spike, robust_ppo_cartpole does not: the IQM of three runs
RUNS = {"CartPole-v1_1.zip": "ppo_cartpole.zip", "CartPole-v1_2.zip": "robust_ppo_cartpole.zip",
        "CartPole-v1_3.zip": "ppo_cartpole.zip"}
ARGS = ("--rl-audit", "--rl-env", "CartPole-v1", "--rl-episodes", "4", "--rl-scenarios",
        "delay,spike", "-p", "no:cacheprovider")


@pytest.fixture(scope="module", autouse=True)
def _loaded_outside_pytester():
    """Load an SB3 agent once before any in-process run (torch does not survive being
    imported twice in one process; see test_plugin_agents)."""
    as_policy(EXAMPLES / "ppo_cartpole.zip")


@pytest.fixture
def runs(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "runs").mkdir()
    for name, source in RUNS.items():
        shutil.copy(EXAMPLES / source, pytester.path / "runs" / name)
    return pytester


def _results(pytester: pytest.Pytester) -> list[dict]:
    return json.loads((pytester.path / "out" / "summary.json").read_text())["results"]


def test_a_glob_of_runs_is_one_item_per_scenario_rated_on_their_iqm(runs: pytest.Pytester):
    result = runs.runpytest("--rl-agent", "runs/*.zip", *ARGS, "--rl-report", "out",
                            "--rl-videos")
    result.assert_outcomes(passed=1, failed=1)  # delay holds; spike breaks 2 runs of 3
    result.stdout.fnmatch_lines([
        "*FAIL under spike across 3 runs: IQM ratio *; required MILD or better; runs *",
        "*runs/[*].zip*delay*3 runs x 4*500.0*IQM 1.000*PASS*",
        "*runs/[*].zip*spike*3 runs x 4*500.0*IQM 0.*FAIL*",
        "*nominal IQM return 500.0 across 3 runs of 4 episodes*"])
    delay, spike = _results(runs)
    assert spike["labels"] == [f"runs/{name}" for name in RUNS]  # sorted, by path
    assert spike["per_run"][0] == spike["per_run"][2] < 0.5 < spike["per_run"][1]
    assert spike["ratio"] == pytest.approx(iqm(spike["per_run"]))  # the core's IQM
    assert delay["passed"] and not spike["passed"]
    assert "not filmed" in spike["video"]["skipped"] and delay["video"] is None
    folder = runs.path / "out"
    assert "### Training runs" in (folder / "summary.md").read_text()
    assert (folder / "index.html").read_text().count('<figure class="runs">') == 2


def test_rl_min_ratio_gates_the_iqm_as_it_gates_one_agents_ratio(runs: pytest.Pytester):
    result = runs.runpytest("--rl-agent", "runs/*.zip", *ARGS, "--rl-min-ratio", "0.3",
                            "--junitxml", "junit.xml")
    result.assert_outcomes(passed=2)  # spike's IQM is above 0.3
    junit = (runs.path / "junit.xml").read_text()
    assert '<property name="rl.runs" value="3"' in junit and "rl.per_run" in junit


def test_a_glob_matching_one_agent_is_that_agent(runs: pytest.Pytester):
    result = runs.runpytest("--rl-agent", "runs/*_2.zip", *ARGS)
    result.assert_outcomes(passed=2)
    # a single agent's records (as the reports carry them: what summary.json would list)
    recs = list(records(result).values())
    assert len(recs) == 2 and all("runs" not in rec for rec in recs)
    result.stdout.fnmatch_lines(["rl audit: --rl-agent 'runs/[*]_2.zip' is no file: read as a "
                                 "glob, it matches 'runs/CartPole-v1_2.zip' only*"])


def test_a_path_that_exists_is_taken_literally_before_any_glob(pytester: pytest.Pytester):
    # 'agent[1].zip' as a glob matches agent1.zip: the agent that breaks under spike
    shutil.copy(EXAMPLES / "robust_ppo_cartpole.zip", pytester.path / "agent[1].zip")
    shutil.copy(EXAMPLES / "ppo_cartpole.zip", pytester.path / "agent1.zip")
    result = pytester.runpytest("--rl-agent", "agent[1].zip", *ARGS)
    result.assert_outcomes(passed=2)  # the robust agent: the file named, not the glob's
    assert all("agent[1].zip" in rec["agent"] for rec in records(result).values())
    result.stdout.fnmatch_lines([
        "rl audit: --rl-agent 'agent[[]1].zip' is an existing path, audited as it is; read "
        "as a glob it would match 'agent1.zip' instead (to audit those, name them)"])


def test_a_glob_matching_nothing_is_a_usage_error_naming_it(runs: pytest.Pytester):
    result = runs.runpytest("--rl-agent", "logs/*.zip", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rl-agent 'logs/[*].zip': no file or folder matches*"])


def test_a_test_of_its_own_with_a_glob_says_to_call_audit_runs(runs: pytest.Pytester):
    runs.makepyfile("""
        import pytest

        @pytest.mark.rl_scenario("delay")
        def test_delay(rl_audit):
            rl_audit()
    """)
    result = runs.runpytest("--rl-agent", "runs/*.zip", *ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*matches 3 training runs*call pytest_rlaudit.audit_runs*"])
