"""The Policy protocol states its whole contract, and ``as_policy`` always returns an object
that has all of it: a policy of one's own that implements only the narrow members
(``stateful``, ``act``, ``initial_state``, ``reset``) is completed, so the runner, the
reports and the verdicts read ``name``, ``shards_freely``, ``env_needs`` and ``bind``
directly."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cartpole_agents import robust

from pytest_rlaudit import audit
from pytest_rlaudit.world.agents import (
    BasePolicy,
    EnvNeeds,
    FrameStackPolicy,
    Policy,
    PolicyWrapper,
    as_policy,
    env_for,
)
from pytest_rlaudit.world.agents.base import CorePolicy

ROOT = Path(__file__).resolve().parents[2]
ENV = "CartPole-v1"
#: Every member of the protocol, as the runner and the reports use them.
MEMBERS = ("name", "stateful", "shards_freely", "env_needs", "bind", "act", "initial_state",
           "reset")


class Narrow:
    """A policy of one's own with the narrow protocol only: no name, bind, shards_freely
    or env_needs."""

    stateful = False

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, None]:
        return robust(obs), None

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        return None

    def reset(self) -> None:
        pass


class NarrowSampler:
    """Narrow too, and stateful: it samples from the stream the audit seeds per episode."""

    stateful = True

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any]]:
        assert states is not None
        flips = np.array([rng.random() < 0.1 for rng in states])
        greedy = robust(obs)
        return np.where(flips, 1 - greedy, greedy), states

    def initial_state(self, seed: np.random.SeedSequence) -> np.random.Generator:
        return np.random.default_rng(seed)

    def reset(self) -> None:
        pass


class Full(BasePolicy):
    shards_freely = True
    env_needs = EnvNeeds(wrappers=(("gymnasium.wrappers.TimeAwareObservation", {}),))

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, None]:
        return np.zeros(len(obs), dtype=np.int64), None


def _declared(protocol: type) -> set[str]:
    """The members ``protocol`` and its protocol bases declare."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (Policy, CorePolicy):
            names |= set(inspect.get_annotations(cls))
            names |= {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}
    return names


def test_the_protocol_declares_every_member_the_code_reads():
    assert _declared(Policy) == set(MEMBERS)
    assert _declared(CorePolicy) == {"stateful", "act", "initial_state", "reset"}
    for member in ("name", "shards_freely", "env_needs", "bind", "act", "initial_state",
                   "reset", "stateful"):
        assert hasattr(BasePolicy, member), member  # the defaults that complete a policy


def _sb3_zip() -> str:
    pytest.importorskip("stable_baselines3")
    return str(ROOT / "examples" / "ppo_cartpole.zip")


def _sb3_model() -> Any:
    sb3 = pytest.importorskip("stable_baselines3")
    return sb3.PPO.load(ROOT / "examples" / "ppo_cartpole.zip", device="cpu")


def _zoo_folder() -> str:
    pytest.importorskip("stable_baselines3")
    return str(ROOT / "tests" / "data" / "zoo" / "a2c" / "Pendulum-v1_1")


def _torch_module() -> Any:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    return torch.nn.Linear(4, 2)


KINDS = {  # the agents the tests already build cheaply, as as_policy's arguments
    "callable": lambda: (robust, {}),
    "callable, frame-stacked": lambda: (robust, {"frame_stack": 2}),
    "random": lambda: ("random", {}),
    "random, named": lambda: ("random", {"name": "uniform"}),
    "import string": lambda: ("cartpole_agents:robust", {}),
    "torch module": lambda: (_torch_module(), {}),
    "sb3 zip": lambda: (_sb3_zip(), {}),
    "sb3 model": lambda: (_sb3_model(), {}),
    "zoo folder with VecNormalize": lambda: (_zoo_folder(), {}),
    "BasePolicy subclass": lambda: (Full(), {}),
    "narrow policy": lambda: (Narrow(), {}),
    "narrow policy, named": lambda: (Narrow(), {"name": "mine"}),
    "narrow stateful policy, frame-stacked": lambda: (NarrowSampler(), {"frame_stack": 3}),
}


@pytest.mark.parametrize("kind", KINDS)
def test_as_policy_returns_every_member_of_the_protocol(kind):
    agent, options = KINDS[kind]()
    policy = as_policy(agent, **options)
    assert isinstance(policy, Policy)
    for member in MEMBERS:
        assert hasattr(policy, member), member
    assert isinstance(policy.name, str) and policy.name
    assert isinstance(policy.stateful, bool)
    assert isinstance(policy.shards_freely, bool)
    assert policy.env_needs is None or isinstance(policy.env_needs, EnvNeeds)
    assert callable(policy.bind)


def test_a_narrow_policy_is_completed_with_the_defaults_and_left_as_it_was():
    mine = Narrow()
    assert isinstance(mine, CorePolicy) and not isinstance(mine, Policy)
    policy = as_policy(mine)
    assert isinstance(policy, PolicyWrapper) and policy.policy is mine
    assert (policy.name, policy.stateful, policy.shards_freely, policy.env_needs) == (
        "Narrow", False, True, None)
    policy.bind(*_spaces())  # nothing to bind in the wrapped object: it is left alone
    assert not hasattr(mine, "name") and not hasattr(mine, "observation_space")
    assert as_policy(mine, name="mine").name == "mine" and not hasattr(mine, "name")
    assert env_for(policy, ENV).name == ENV


def test_a_policy_with_the_whole_protocol_is_used_as_it_is():
    full = Full()
    assert as_policy(full) is full


def test_a_named_policy_keeps_what_its_agent_needs_of_the_env():
    # The wrapper that renames a policy once read BasePolicy's defaults (env_needs None,
    # shards_freely False) instead of the wrapped policy's: the zoo's env_kwargs and
    # wrappers were then left out of the env it was audited on.
    full = Full()
    named = as_policy(full, name="renamed")
    assert named is not full and named.name == "renamed" and full.name == "policy"
    assert named.env_needs is full.env_needs and named.shards_freely
    assert env_for(named, ENV).make().observation_space.shape == (5,)
    assert as_policy("random", name="uniform").shards_freely


def test_wrappers_of_a_narrow_policy_bind_through_to_a_policy_that_binds():
    bound: list[Any] = []

    class Binds(Narrow):  # narrow, but with a bind of its own (and still no name)
        def bind(self, observation_space: Any, action_space: Any) -> None:
            bound.append((observation_space, action_space))

    stacked = FrameStackPolicy(Binds(), 2)
    stacked.bind(*_spaces())
    assert len(bound) == 1 and bound[0][0].shape == (8,)  # the stacked space
    assert stacked.name == "Binds"


def _spaces() -> tuple[Any, Any]:
    import gymnasium as gym

    env = gym.make(ENV)
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def test_a_narrow_policy_still_audits():
    result = audit(Narrow(), ENV, ["delay"], episodes=4, seed=0, reference=0)
    assert result.agent == "Narrow"
    expected = audit(robust, ENV, ["delay"], episodes=4, seed=0, reference=0)
    assert np.array_equal(result.nominal.returns, expected.nominal.returns)
    assert result["delay"].ratio == expected["delay"].ratio


def test_a_narrow_stateful_policy_still_audits_and_replays():
    a = audit(NarrowSampler(), ENV, ["jitter"], episodes=4, seed=0, reference=0)
    b = audit(NarrowSampler(), ENV, ["jitter"], episodes=4, seed=0, reference=0,
              batch_size=1, workers=2)
    assert a.agent == "NarrowSampler"
    assert np.array_equal(a.nominal.returns, b.nominal.returns)
    assert a["jitter"].ratio == b["jitter"].ratio
