"""Replay's pytest face end to end, with ``pytester``: the ``rl_replay`` marker and
fixture (passed, failed with ReplayError's message), ``--rl-replay``'s zero-config items
(their record in summary.json's ``replays``, their JUnit properties), the usage errors
(a missing dataset, no --rl-agent), and ``--rl-record``'s datasets replayed back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from plugin_cli import USAGE, junit, text

from pytest_rlaudit import replay


def _recording(where: Path) -> Path:
    """An .npz of CartPole-like observations whose actions are agents:robust's."""
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(60, 4)).astype(np.float32)
    actions = (obs @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)
    path = where / "run.npz"
    np.savez(path, observations=obs, actions=actions, episode_starts=np.arange(60) % 20 == 0)
    return path


def test_the_marker_gives_the_fixture_its_defaults_pass_and_fail(tester: pytest.Pytester):
    path = _recording(tester.path)
    tester.makepyfile(test_replays=f"""
        import pytest

        @pytest.mark.rl_replay({str(path)!r}, candidate="agents:robust", max_disagreement=0.05)
        def test_same(rl_replay):
            result = rl_replay()
            assert result.divergence.value == 0

        @pytest.mark.rl_replay({str(path)!r}, candidate="agents:fragile", max_disagreement=0.0)
        def test_other(rl_replay):
            rl_replay()

        def test_plain_call(rl_replay):
            assert rl_replay("agents:fragile", {str(path)!r}).episodes == 3
    """)
    result = tester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    out = text(result)
    assert "acts unlike the recording" in out and "max_disagreement" in out
    assert "replay  robust vs run.npz: divergence 0 [0, 0]" in out
    assert "replay  fragile vs run.npz" in out


def test_a_marker_without_the_fixture_is_a_collection_error(tester: pytest.Pytester):
    tester.makepyfile(test_replays="""
        import pytest

        @pytest.mark.rl_replay("x.npz", mode="sideways")
        def test_x(rl_replay):
            pass
    """)
    result = tester.runpytest("-p", "no:cacheprovider")
    assert "mode must be one of point, confident, not_worse" in text(result)


def test_zero_config_replay_item_records_in_the_report_and_junit(tester: pytest.Pytester):
    path = _recording(tester.path)
    result = tester.runpytest("-p", "no:cacheprovider", "--rl-agent", "agents:robust",
                              f"--rl-replay={path}", "--rl-replay-max-disagreement=0.1",
                              "--rl-report", "out", "--junitxml", "j.xml", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*rl-audit::replay?run.npz? PASSED*"])
    doc = json.loads((tester.path / "out" / "summary.json").read_text())
    assert doc["results"] == [] and [r["recording"] for r in doc["replays"]] == [str(path)]
    assert doc["replays"][0]["passed"] is True
    assert doc["replays"][0]["limits"] == {"max_disagreement": 0.1, "max_divergence": None,
                                           "mode": "point"}
    _, cases = junit(tester.path / "j.xml")
    (props, _), = cases.values()
    assert props["rl.kind"] == "replay" and float(props["rl.divergence"]) == 0
    for key in ("rl.divergence_ci_low", "rl.divergence_ci_high", "rl.disagreement",
                "rl.disagreement_ci_low", "rl.ood_actions", "rl.failed", "rl.diagnosis"):
        assert key in props
    assert props["rl.failed"] == "0"


def test_a_failing_zero_config_replay_fails_the_test(tester: pytest.Pytester):
    path = _recording(tester.path)
    result = tester.runpytest("-p", "no:cacheprovider", "--rl-agent", "agents:fragile",
                              f"--rl-replay={path}", "--rl-replay-max-divergence=0.01")
    result.assert_outcomes(failed=1)
    assert "is above max_divergence" in text(result)


def test_without_limits_a_replay_reports_only_but_an_agent_exception_fails_it(
        tester: pytest.Pytester):
    path = _recording(tester.path)
    tester.makepyfile(touchy="""
        import numpy as np

        def act(obs):
            if (obs[:, 0] < -2.0).any():  # one step of the recording has such a reading
                raise RuntimeError("joint limit")
            return np.zeros(len(obs), dtype=np.int64)
    """)
    low = np.load(path)["observations"][:, 0] < -2.0
    touched = len(set(np.flatnonzero(low) // 20))  # episodes of 20 steps
    assert 1 <= touched < 3
    result = tester.runpytest("-p", "no:cacheprovider", "--rl-agent", "agents:fragile",
                              f"--rl-replay={path}", "--rl-report", "out")
    result.assert_outcomes(passed=1)
    doc = json.loads((tester.path / "out" / "summary.json").read_text())
    assert doc["replays"][0]["passed"] is None and doc["replays"][0]["limits"] is None
    assert "report only" in (tester.path / "out" / "summary.md").read_text()
    result = tester.runpytest("-p", "no:cacheprovider", "--rl-agent", "touchy:act",
                              f"--rl-replay={path}")
    result.assert_outcomes(failed=1)
    assert f"raised on {touched} episode(s)" in text(result) and "joint limit" in text(result)


def test_a_missing_dataset_is_a_usage_error_naming_it(tester: pytest.Pytester):
    result = tester.runpytest("-p", "no:cacheprovider", "--rl-agent", "agents:robust",
                              "--rl-replay=nowhere/rec.npz")
    assert result.ret == USAGE
    assert "--rl-replay nowhere/rec.npz: no such file or folder" in text(result)


def test_an_unreadable_dataset_in_a_test_is_an_error_not_a_failure(tester: pytest.Pytester):
    bad = tester.path / "empty"
    bad.mkdir()
    tester.makepyfile(test_replays=f"""
        def test_x(rl_replay):
            rl_replay("agents:robust", {str(bad)!r})
    """)
    result = tester.runpytest("-p", "no:cacheprovider")
    assert result.ret == USAGE
    result.assert_outcomes(errors=1)
    assert "not a Minari dataset" in text(result)


def test_replay_without_an_agent_is_a_usage_error(tester: pytest.Pytester):
    path = _recording(tester.path)
    result = tester.runpytest("-p", "no:cacheprovider", "--rl-audit", f"--rl-replay={path}")
    assert result.ret == USAGE
    assert "no --rl-agent is given: add --rl-agent" in text(result)


def test_rl_record_writes_datasets_that_replay_back_exactly(tester: pytest.Pytester):
    result = tester.runpytest("-p", "no:cacheprovider", "--rl-agent", "agents:robust",
                              "--rl-env", "CartPole-v1", "--rl-episodes", "2",
                              "--rl-scenarios", "jitter", "--rl-record", "recs")
    result.assert_outcomes(passed=1)
    folders = sorted(p.name for p in (tester.path / "recs").iterdir())
    assert folders == ["jitter", "nominal"]
    assert "rl audit: recorded the audited episodes as Minari datasets" in text(result)
    import sys

    sys.path.insert(0, str(tester.path))
    try:
        back = replay("agents:robust", tester.path / "recs" / "nominal")
    finally:
        sys.path.remove(str(tester.path))
    assert back.episodes == 2 and back.divergence.value == 0


def test_rl_record_into_a_file_is_a_usage_error(tester: pytest.Pytester):
    (tester.path / "afile").write_text("x")
    result = tester.runpytest("-p", "no:cacheprovider", "--rl-agent", "agents:robust",
                              "--rl-env", "CartPole-v1", "--rl-record", "afile")
    assert result.ret == USAGE
    assert "--rl-record afile: is a file" in text(result)
