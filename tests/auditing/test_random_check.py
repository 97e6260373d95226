"""The random policy's episodes: as many as the check needs, unless they are the reference;
and the nominal episodes recorded only where something reads them."""

from __future__ import annotations

import numpy as np
import pytest
from cartpole_agents import robust

from pytest_rlaudit import audit
from pytest_rlaudit.auditing import reference
from pytest_rlaudit.auditing.engine import Engine
from pytest_rlaudit.auditing.settings import AuditSettings
from pytest_rlaudit.errors import MisloadedAgentError
from pytest_rlaudit.world import scenarios
from pytest_rlaudit.world.agents import as_policy


@pytest.mark.parametrize("ref, runs", [(0, 3), ("random", 5)])
def test_the_random_policy_runs_the_checks_episodes_unless_it_is_the_reference(
        monkeypatch, ref, runs):
    monkeypatch.setattr(reference, "CHECK_EPISODES", 3)
    engine = Engine(as_policy(robust), "CartPole-v1", AuditSettings(episodes=5, reference=ref))
    got = engine.random(5)
    assert len(got) == runs
    # the same episodes as a run of all five: the first ones, on the same seeds
    monkeypatch.setattr(reference, "CHECK_EPISODES", 5)
    every = Engine(as_policy(robust), "CartPole-v1", AuditSettings(episodes=5)).random(5)
    assert np.array_equal(got, every[:runs])


def test_a_capped_random_check_still_refuses_an_agent_no_better_than_random(monkeypatch):
    monkeypatch.setattr(reference, "CHECK_EPISODES", 4)
    def left(obs):  # always pushes left: about 9 steps, against random actions' 20 or so
        return np.zeros(len(obs), dtype=np.int64)

    with pytest.raises(MisloadedAgentError, match="on the same 4 episode seeds"):
        audit(left, "CartPole-v1", ["delay"], episodes=6)


def test_a_plain_audit_records_nominal_episode_0_alone_unless_a_scenario_calibrates():
    engine = Engine(as_policy(robust), "CartPole-v1", AuditSettings(episodes=3))
    engine.check([])
    plain = engine.paired([], range(3), separate=False)["nominal"]
    assert len(plain.observations[0]) == 500  # held to the seed replay, step by step
    assert [len(o) for o in plain.observations[1:]] == [0, 0]
    noisy = engine.paired(scenarios.resolve(["obs_noise"]), range(3), separate=False)
    assert [len(o) for o in noisy["nominal"].observations] == [500, 500, 500]  # its spread
