"""Real agents from the command line: a zoo folder as --rl-agent, with --rl-vec-normalize,
--rl-stochastic and --rl-agent-name; a mis-loaded agent stops with the usual causes."""

from __future__ import annotations

import json
from pathlib import Path

import hypothesis  # noqa: F401
import pytest
from audit_records import records
from inner_runs import without_figures

import pytest_rlaudit.reports.summary
import pytest_rlaudit.verdicts.assertions  # noqa: F401
from pytest_rlaudit.world.agents import as_policy

PENDULUM_RUN = Path(__file__).parents[1] / "data" / "zoo" / "a2c" / "Pendulum-v1_1"
# Paths as --option=value: pytest 7 takes a separate value that looks like a path for a
# path to test, and derives the rootdir from it.
ZERO_CONFIG = ("--rl-audit", f"--rl-agent={PENDULUM_RUN}", "--rl-env", "Pendulum-v1",
               "--rl-episodes", "3", "--rl-scenarios", "obs_noise", "--rl-reference", "random",
               "-p", "no:cacheprovider")


@pytest.fixture(scope="module", autouse=True)
def _loaded_outside_pytester():
    """Load the agent (and the audit's modules, above) once before any in-process run:
    pytester drops the modules a run imports when it ends, torch (whose model loading
    imports more of it) does not survive being imported twice in one process, and a
    Scenario class imported afresh is not the one the plugin already holds. Loaded in full
    too (SB3's own load builds an optimizer, importing torch._dynamo and torch._inductor),
    as --rl-trusted's inner run does: imported there first, they would be dropped half
    registered, and every later SB3 load in this process would fail."""
    as_policy(PENDULUM_RUN)
    as_policy(PENDULUM_RUN, trusted=True)


def _results(pytester: pytest.Pytester) -> list[dict]:
    return json.loads((pytester.path / "out" / "summary.json").read_text())["results"]


def test_a_zoo_folder_is_audited_from_the_command_line_and_rl_stochastic_samples_actions_reproducibly(
        pytester: pytest.Pytester):
    # one run of each: the plain audit's nominal returns are the deterministic ones that
    # --rl-stochastic's sampled actions must change, the same way twice (2 episodes: each
    # sampled action is a policy call of its own, a row at a time)
    # (its report without matplotlib: summary.json is what is read, the figures are not)
    with without_figures():
        result = pytester.runpytest(*ZERO_CONFIG, "--rl-episodes", "2", "--rl-report", "out")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*A2C(Pendulum-v1_1)*Pendulum-v1*obs_noise*"])
    (record,) = _results(pytester)
    deterministic = record["nominal_returns"]
    assert len(deterministic) == 2 and max(deterministic) > -400  # with its stats: it swings the pendulum up

    def sampled() -> list[float]:
        result = pytester.runpytest(*ZERO_CONFIG, "--rl-episodes", "2", "--rl-stochastic")
        result.assert_outcomes(passed=1)
        (record,) = records(result).values()
        return record["nominal_returns"]

    first = sampled()
    assert first != deterministic
    assert sampled() == first


def test_without_its_stats_the_run_says_the_agent_does_no_better_than_random(
        pytester: pytest.Pytester):
    result = pytester.runpytest(*ZERO_CONFIG, "--rl-vec-normalize", "none")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "random actions" in out and "VecNormalize statistics missing" in out
    assert "--rl-reference random (or" not in out  # no hint to set what is already set


def test_rl_vec_normalize_takes_the_file_and_rl_agent_name_labels_it(pytester: pytest.Pytester):
    stats = PENDULUM_RUN / "Pendulum-v1" / "vecnormalize.pkl"
    result = pytester.runpytest(*ZERO_CONFIG, f"--rl-vec-normalize={stats}",
                                "--rl-agent-name", "swing-up")
    result.assert_outcomes(passed=1)
    (record,) = records(result).values()
    assert record["agent"] == "swing-up"


def test_without_an_env_the_message_names_the_one_the_agent_was_trained_on(
        pytester: pytest.Pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.rl_scenario("delay")
        def test_delay(rl_audit):
            rl_audit()
    """)
    result = pytester.runpytest("--rl-audit", f"--rl-agent={PENDULUM_RUN}", "-p",
                                "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no env to audit on: pass --rl-env ID*"
                                 "the agent was trained on Pendulum-v1*"])


def test_rl_severity_sizes_the_zero_config_suite(pytester: pytest.Pytester):
    result = pytester.runpytest("--rl-audit", f"--rl-agent={PENDULUM_RUN}", "--rl-env",
                                "Pendulum-v1", "--rl-episodes", "3", "--rl-scenarios",
                                "delay,speed_5x", "--rl-severity", "severe", "--rl-reference",
                                "random", "-p", "no:cacheprovider")
    params = {r["scenario"]: r["params"] for r in records(result).values()}
    assert params == {"delay": {"steps": 6}, "speed_5x": {"k": 5}}
    bad = pytester.runpytest("--rl-severity", "hard")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--rl-severity*must be one of mild, moderate, severe*"])


def test_rl_trusted_is_what_lets_a_zip_run_its_pickles(pytester: pytest.Pytester, tmp_path):
    import base64
    import pickle
    import zipfile

    target = tmp_path / "written.txt"

    class Writes:
        def __reduce__(self):
            return Path.write_text, (target, "written by a pickle")

    zoo_zip = PENDULUM_RUN / "Pendulum-v1.zip"
    with zipfile.ZipFile(zoo_zip) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(files["data"])
    data["_last_obs"][":serialized:"] = base64.b64encode(pickle.dumps(Writes())).decode()
    files["data"] = json.dumps(data).encode()
    run = tmp_path / "run"
    run.mkdir()
    with zipfile.ZipFile(run / "agent.zip", "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    (run / "vecnormalize.pkl").write_bytes((PENDULUM_RUN / "Pendulum-v1" / "vecnormalize.pkl")
                                           .read_bytes())
    options = ("--rl-audit", f"--rl-agent={run / 'agent.zip'}", "--rl-env", "Pendulum-v1",
               "--rl-episodes", "2", "--rl-scenarios", "obs_noise", "--rl-reference", "random",
               "-p", "no:cacheprovider")
    pytester.runpytest(*options).assert_outcomes(passed=1)
    assert not target.exists()
    pytester.runpytest(*options, "--rl-trusted").assert_outcomes(passed=1)
    assert target.read_text() == "written by a pickle"
