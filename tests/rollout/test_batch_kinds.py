"""The lock-step batch path (pytest_rlaudit.world.batches, rollout.lockstep and batch_pool):
gymnasium's CartPole vector env, a user's VectorEnv and a BatchedEnv give the scalar path's
numbers bit for bit, whatever the batch size or the processes; what a batch cannot run
falls back to one env per slot where the audit made the batch, and is an error naming the
scenario, the batch and the remedy where the user gave it."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from goal_envs import HORIZON, ReachEnv, TupleEnv
from gymnasium import spaces

from pytest_rlaudit import Scenario, Schedule, audit, scenarios
from pytest_rlaudit.errors import (
    EnvContractError,
    InvalidArgumentError,
    PerturbationError,
    PolicyError,
    RolloutCapWarning,
    RolloutError,
    RolloutTimeoutError,
)
from pytest_rlaudit.perturbations import Jitter, ObservationNoise, Perturbation
from pytest_rlaudit.rollout import calls
from pytest_rlaudit.rollout.batch_pool import batch_for, split_off
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import BasePolicy, EnvNeeds, as_policy
from pytest_rlaudit.world.batches.chains import Chain
from pytest_rlaudit.world.batches.kinds import CartPoleRows, VectorRows
from pytest_rlaudit.world.envs import env_spec

ROOT = Path(__file__).resolve().parents[2]

#: The registry's scenarios a lock-step batch runs (every one but dynamics, push and
#: adversarial_obs).
BATCHABLE = ["nominal", "speed_5x", "jitter", "delay", "spike", "obs_noise", "action_noise",
             "sticky_actions", "action_delay", "dropped_obs"]
#: A schedule on five channels, repeating every 40 agent steps.
MIXED = Schedule(speed=[1] * 10 + [3] * 5, delay=[0] * 5 + [2] * 10,
                 obs_noise=[0.0] * 3 + [0.05] * 20, dropped=[False] * 8 + [True] * 3,
                 action_noise=[0.0] * 2 + [0.1] * 20, period=40).as_scenario("mixed")

#: What each episode's outcome holds, and what it records with record=True.
FIELDS = ("seeds", "returns", "lengths", "env_steps", "capped", "terminated")
RECORDED = ("traces", "observations", "actions", "last_observations")


def balance(obs):
    """A numpy CartPole controller: balances nominally, falls under timing faults."""
    return (obs[:, 2] + 0.3 * obs[:, 3] > 0).astype(np.int64)


def lean(obs):
    """A numpy CartPole controller that reads the pole's angle alone: it falls in tens of
    steps, sooner or later under pushes and other physics."""
    return (obs[:, 2] > 0).astype(np.int64)


def swing_up(obs):
    """A numpy Pendulum controller: pumps energy, then balances near the top."""
    cos, sin, speed = obs[:, 0], obs[:, 1], obs[:, 2]
    energy = 0.5 * speed**2 + 15 * cos
    pump = np.where(energy < 15, 2.0, -2.0) * np.sign(speed + 1e-9)
    torque = np.where(cos > 0.9, -10 * np.arctan2(sin, cos) - 2 * speed, pump)
    return np.clip(torque, -2, 2)[:, None].astype(np.float32)


def _scalar(env):
    """``env`` without its batch: one env per slot."""
    return dataclasses.replace(env, batch=None)


def _same(a: dict, b: dict, recorded=RECORDED[:1]) -> None:
    """``a`` and ``b`` (run_episodes' results) identical, number for number."""
    assert list(a) == list(b)
    for name in a:
        assert dict(a[name].params) == dict(b[name].params), name
        for field in FIELDS:
            x, y = getattr(a[name], field), getattr(b[name], field)
            assert x is not None and y is not None, (name, field)
            assert x.dtype == y.dtype and np.array_equal(x, y), (name, field, x, y)
        for field in recorded:
            x, y = getattr(a[name], field), getattr(b[name], field)
            assert len(x) == len(y) == len(a[name].returns), (name, field)
            for i, (p, q) in enumerate(zip(x, y, strict=True)):
                p, q = np.asarray(p), np.asarray(q)
                assert p.dtype == q.dtype and np.array_equal(p, q), (name, field, i)


def _same_audits(a, b) -> None:
    """Two AuditResults with the same episodes, number for number."""
    assert [s.name for s in a] == [s.name for s in b]
    for mine in [a.nominal, *a]:
        theirs = b[mine.name]
        for field in ("seeds", "returns", "lengths", "env_steps", "capped"):
            assert np.array_equal(getattr(mine, field), getattr(theirs, field)), (mine.name, field)
        assert mine.params == theirs.params, mine.name
        assert (mine.ratio, mine.rating) == (theirs.ratio, theirs.rating), mine.name
    assert a.reference == b.reference


@pytest.fixture
def vector_steps(monkeypatch) -> list[int]:
    """The rows of every step of gymnasium's CartPole vector env (CartPoleRows), in this
    process: empty after a run that took the scalar path."""
    rows: list[int] = []
    real = CartPoleRows.step

    def counted(self, actions):
        rows.append(len(actions))
        return real(self, actions)

    monkeypatch.setattr(CartPoleRows, "step", counted)
    return rows


def _batched_cartpole() -> type:
    """examples/batched_cartpole.py's BatchedCartPole (torch), loaded from its file."""
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location(
        "batched_cartpole_example", ROOT / "examples" / "batched_cartpole.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BatchedCartPole


def _cartpoles(n: int) -> gym.vector.SyncVectorEnv:
    return gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * n)


# ---------------------------------------------------------------- CartPole's vector env


@pytest.mark.parametrize("agent", [balance, "random"], ids=["controller", "random"])
def test_the_cartpole_vector_env_gives_the_scalar_envs_episodes_bit_for_bit(agent, vector_steps):
    env = env_spec("CartPole-v1")
    assert env.batch is not None and env.batch.make is not None
    chosen = scenarios.resolve([*BATCHABLE, MIXED])
    scalar = run_episodes(as_policy(agent), _scalar(env), chosen, episodes=6, seed=3, record=True)
    assert vector_steps == []  # batch=None: one env per slot
    vector = run_episodes(as_policy(agent), env, chosen, episodes=6, seed=3, record=True)
    assert vector_steps  # the vector env ran them
    _same(vector, scalar, recorded=RECORDED)
    # the scenarios perturbed something: not every run is the nominal one
    differ = [n for n in vector if not np.array_equal(vector[n].returns, vector["nominal"].returns)]
    assert len(differ) >= 3, differ


@pytest.mark.parametrize("batch_size", [1, 7, None])
def test_the_batch_size_sets_the_rows_and_changes_no_number(batch_size, vector_steps):
    env = env_spec("CartPole-v1")
    chosen = scenarios.resolve(["nominal", "jitter", "spike", "sticky_actions"])
    scalar = run_episodes(as_policy(balance), _scalar(env), chosen, episodes=3, seed=8)
    vector = run_episodes(as_policy(balance), env, chosen, episodes=3, seed=8,
                          batch_size=batch_size)
    # None: every one of the 12 jobs at once
    assert set(vector_steps) == {12 if batch_size is None else batch_size}
    _same(vector, scalar)


def test_forked_shards_run_the_vector_env_each_and_give_the_same_numbers(
        monkeypatch, tmp_path):
    log = tmp_path / "pids"
    seen: set[int] = set()
    real = CartPoleRows.step

    def logged(self, actions):  # each process writes its pid once (the set is forked too)
        if os.getpid() not in seen:
            seen.add(os.getpid())
            with log.open("a") as f:
                f.write(f"{os.getpid()}\n")
        return real(self, actions)

    monkeypatch.setattr(CartPoleRows, "step", logged)
    env = env_spec("CartPole-v1")
    chosen = scenarios.resolve(["nominal", "speed_5x", "jitter", "delay", "action_noise"])
    scalar = run_episodes(as_policy(balance), _scalar(env), chosen, episodes=6, seed=4)
    assert not log.exists()
    forked = run_episodes(as_policy(balance), env, chosen, episodes=6, seed=4, workers=2)
    pids = set(log.read_text().split())
    assert str(os.getpid()) in pids and len(pids) == 2  # this process's shard and the other's
    _same(forked, scalar)


def test_a_step_cap_cuts_the_same_episodes_on_the_vector_env(vector_steps):
    env = env_spec("CartPole-v1")
    chosen = scenarios.resolve(["nominal", "speed_5x", "spike", "jitter"])
    runs, messages = [], []
    for made in (_scalar(env), env):
        with pytest.warns(RolloutCapWarning, match="cap of 50 agent steps") as caught:
            runs.append(run_episodes(as_policy(balance), made, chosen, episodes=5, seed=2,
                                     max_steps=50))
        messages.append([str(w.message) for w in caught])
    assert vector_steps
    _same(runs[1], runs[0])
    assert messages[0] == messages[1]
    capped = np.concatenate([b.capped for b in runs[1].values()])
    assert capped.any() and not capped.all()  # the flags tell some episodes apart
    assert (runs[1]["nominal"].lengths == 50).all() and runs[1]["nominal"].capped.all()


class Shove(Perturbation, gym.Wrapper):
    """A perturbation of one's own that acts inside the env's step (not LOCKSTEP)."""

    def __init__(self, env: gym.Env) -> None:
        self._init_perturbation()
        gym.Wrapper.__init__(self, env)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, float(reward) + float(self.rng.random()), terminated, truncated, info


class Bias(Perturbation, gym.Wrapper):
    """A perturbation of one's own split into hooks (LOCKSTEP): noise on what is seen."""

    LOCKSTEP = True

    def __init__(self, env: gym.Env) -> None:
        self._init_perturbation()
        gym.Wrapper.__init__(self, env)

    def observe(self, obs: Any) -> Any:
        return (obs + self.rng.normal(0.0, 0.05, obs.shape)).astype(obs.dtype)

    step = Perturbation._step_by_hooks


def _jitter_over_noise(env: gym.Env) -> gym.Env:
    """A timing wrapper (Jitter) around another perturbation: no batch can run it."""
    return Jitter(ObservationNoise(env, sigma=0.05, scale="absolute"))


def _noise_over_jitter(env: gym.Env) -> gym.Env:
    """Noise around the timing wrapper, which is innermost: a batch runs it."""
    return ObservationNoise(Jitter(env), sigma=0.05, scale="absolute")


SHOVE = Scenario("shove", "custom", Shove)
STACKED = Scenario("stacked", "custom", _jitter_over_noise)


@pytest.mark.parametrize("names, batched", [
    (["nominal", "push"], 4), (["jitter", "dynamics", "delay"], 8), ([SHOVE, "delay"], 4),
    ([STACKED], 0)], ids=["push", "dynamics", "custom", "stacked"])
def test_what_the_vector_env_cannot_run_takes_one_env_per_slot_silently(
        names, batched, vector_steps):
    env = env_spec("CartPole-v1")
    chosen = scenarios.resolve(names)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run_episodes(as_policy(balance), env, chosen, episodes=4, seed=6)
    assert [str(w.message) for w in caught] == []
    # the others ran on the vector env, with rows for their jobs alone
    assert set(vector_steps) == ({batched} if batched else set())
    _same(out, run_episodes(as_policy(balance), _scalar(env), chosen, episodes=4, seed=6))


@pytest.mark.parametrize("name", ["push", "dynamics", "adversarial_obs"])
def test_the_audit_splits_off_what_its_batch_cannot_take(name):
    env = env_spec("CartPole-v1")
    assert [s.name for s in split_off(env, scenarios.resolve(["jitter", name]))] == [name]
    assert split_off(env, scenarios.resolve(["jitter", "delay"])) == []
    assert split_off(_scalar(env), scenarios.resolve([name])) == []  # no batch: nothing apart
    assert batch_for(env, scenarios.resolve(["jitter"]), rows=8) is not None


def test_perturbations_of_ones_own_split_into_hooks_run_on_the_vector_env(vector_steps):
    env = env_spec("CartPole-v1")
    chosen = [Scenario("bias", "custom", Bias),
              Scenario("noise_over_jitter", "custom", _noise_over_jitter)]
    vector = run_episodes(as_policy(balance), env, chosen, episodes=4, seed=1, record=True)
    assert vector_steps
    _same(vector, run_episodes(as_policy(balance), _scalar(env), chosen, episodes=4, seed=1,
                               record=True), recorded=RECORDED)


# -------------------------------------------------------------- a user's vector env


def test_a_sync_vector_env_audits_as_its_env_id_does(monkeypatch):
    steps: list[int] = []
    real = VectorRows.step
    monkeypatch.setattr(VectorRows, "step", lambda self, a: (steps.append(1), real(self, a))[1])
    names = ["jitter", "delay", "spike", "obs_noise", "sticky_actions"]
    venv = _cartpoles(8)
    try:
        given = audit(balance, venv, scenarios=names, episodes=10, seed=2)
    finally:
        venv.close()
    assert steps  # the vector env given ran the episodes
    alone = audit(balance, "CartPole-v1", scenarios=names, episodes=10, seed=2)
    _same_audits(given, alone)
    assert given["obs_noise"].params["spread"] == alone["obs_noise"].params["spread"]


def test_a_sync_vector_env_of_box_actions_audits_as_its_env_id_does():
    names = ["action_noise", "speed_5x"]
    venv = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1")] * 4)
    try:
        given = audit(swing_up, venv, scenarios=names, episodes=4, seed=4, reference="random")
    finally:
        venv.close()
    alone = audit(swing_up, "Pendulum-v1", scenarios=names, episodes=4, seed=4,
                  reference="random")
    _same_audits(given, alone)
    assert not np.array_equal(given["action_noise"].returns, given.nominal.returns)


def _reach() -> gym.Env:
    return gym.wrappers.TimeLimit(ReachEnv(drift=0.05), max_episode_steps=HORIZON)


def _to_goal(obs: dict) -> np.ndarray:
    """Steers toward the goal a goal-conditioned agent is given (a batch of Dict rows)."""
    return np.clip(5.0 * (obs["desired_goal"] - obs["achieved_goal"]), -1.0, 1.0)


def test_a_vector_env_of_dict_observations_audits_as_its_factory_does(monkeypatch):
    # a goal-conditioned env (gymnasium-robotics' observation / achieved_goal /
    # desired_goal Dict): every observation, action and timing scenario on the batch,
    # the observation ones key by key (desired_goal exact by default)
    steps: list[int] = []
    real = VectorRows.step
    monkeypatch.setattr(VectorRows, "step", lambda self, a: (steps.append(1), real(self, a))[1])
    names = ["obs_noise", "delay", "dropped_obs", "jitter", "speed_5x", "action_noise"]
    venv = gym.vector.SyncVectorEnv([_reach] * 4)
    try:
        given = audit(_to_goal, venv, scenarios=names, episodes=6, seed=3)
    finally:
        venv.close()
    assert steps  # the vector env given ran the episodes
    alone = audit(_to_goal, _reach, scenarios=names, episodes=6, seed=3)
    _same_audits(given, alone)
    assert all(not np.array_equal(given[n].returns, given.nominal.returns) for n in names)


def test_a_vector_env_of_other_observations_than_arrays_is_refused_with_the_remedy():
    venv = gym.vector.SyncVectorEnv([TupleEnv] * 2)
    try:
        with pytest.raises(EnvContractError, match=r"array observations \(a Box, or a Dict of "
                                                   r"Boxes\), and its observations are Tuple.*"
                                                   r"pass a factory of one env instead"):
            audit(_zeros, venv, scenarios=["delay"], episodes=2)
    finally:
        venv.close()


def test_an_async_vector_env_audits_as_its_env_id_does():
    venv = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    try:
        given = audit(balance, venv, scenarios=["jitter"], episodes=3, seed=2)
    finally:
        venv.close()
    _same_audits(given, audit(balance, "CartPole-v1", scenarios=["jitter"], episodes=3, seed=2))


def _one_factory(how: str) -> gym.vector.VectorEnv:
    """Four CartPoles in a vector env built from one factory, as people build them."""
    if how == "make_vec":
        return gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
    if how == "comprehension":  # four functions, one code and closure
        return gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(4)])
    if how == "partial":  # four equal partials
        return gym.vector.SyncVectorEnv([functools.partial(gym.make, "CartPole-v1")
                                         for _ in range(4)])
    if how == "generator":  # factories given as a generator (gymnasium 1.1's make_vec): spent
        return gym.vector.SyncVectorEnv(lambda: gym.make("CartPole-v1") for _ in range(4))
    return gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4)


@pytest.mark.parametrize("how", ["make_vec", "comprehension", "partial", "generator", "async"])
def test_a_vector_env_of_one_factory_runs_physics_on_that_factorys_envs(how, monkeypatch):
    made: list[int] = []
    real = VectorRows.step
    monkeypatch.setattr(VectorRows, "step", lambda self, a: (made.append(1), real(self, a))[1])
    # pushes every 10 steps: the lean controller's episodes end before push's 50th
    names = ["jitter", scenarios.get("push").with_params(interval=10), "dynamics", SHOVE]
    venv = _one_factory(how)
    try:
        assert VectorRows(venv).per_env is not None
        given = audit(lean, venv, scenarios=names, episodes=4, seed=5)
    finally:
        venv.close()
    assert made  # nominal and jitter ran on the vector env given
    alone = audit(lean, "CartPole-v1", scenarios=names, episodes=4, seed=5)
    _same_audits(given, alone)
    for name in ("push", "dynamics", "shove"):  # each perturbed something
        assert not np.array_equal(given[name].returns, given.nominal.returns), name


def test_a_vector_env_of_envs_from_different_factories_finds_no_factory():
    closures = [(lambda i=i: gym.make("CartPole-v1", max_episode_steps=100 + i))
                for i in range(2)]
    for fns in ([lambda: gym.make("CartPole-v1"), lambda: gym.make("CartPole-v1", max_episode_steps=9)],
                closures,
                [functools.partial(gym.make, "CartPole-v1"),
                 functools.partial(gym.make, "CartPole-v1", max_episode_steps=9)]):
        venv = gym.vector.SyncVectorEnv(fns)
        try:
            assert VectorRows(venv).per_env is None
        finally:
            venv.close()
    # spent factories whose envs' spec does not make the same env (a wrapper of a lambda)
    doubled = gym.vector.SyncVectorEnv(
        (lambda: gym.wrappers.TransformReward(gym.make("CartPole-v1"), lambda r: 2 * r))
        for _ in range(2))
    try:
        assert VectorRows(doubled).per_env is None
    finally:
        doubled.close()


# ------------------------------------------------- what a batch given cannot run


GIVEN_LABELS = {"sync": "SyncVectorEnv", "batched": "BatchedCartPole"}


def _given(kind: str) -> Any:
    if kind == "sync":  # two factories: no factory of one env makes its envs
        return gym.vector.SyncVectorEnv(
            [lambda: gym.make("CartPole-v1"), lambda: gym.make("CartPole-v1", max_episode_steps=400)]
            * 2)
    return _batched_cartpole()(8)


def _refused(kind: str, chosen: list, entry: str) -> str:
    """The PerturbationError's message of running ``chosen`` on a batch of ``kind``."""
    env = _given(kind)
    try:
        with pytest.raises(PerturbationError) as caught:
            if entry == "audit":
                audit(balance, env, scenarios=chosen, episodes=2)
            else:
                run_episodes(as_policy(balance), env_spec(env), scenarios.resolve(chosen), 2)
    finally:
        if kind == "sync":
            env.close()
    return str(caught.value)


@pytest.mark.parametrize("entry", ["audit", "run_episodes"])
@pytest.mark.parametrize("name", ["dynamics", "push"])
@pytest.mark.parametrize("kind", ["sync", "batched"])
def test_physics_on_a_batch_given_is_an_error_naming_scenario_batch_and_remedy(kind, name, entry):
    message = _refused(kind, [name], entry)
    assert f"scenario {name!r}" in message
    assert GIVEN_LABELS[kind] in message  # the batch the user gave, by its class
    assert "one env per slot" in message and "env's id or a factory" in message  # the remedy
    if kind == "sync":  # and what would make the vector env itself run it
        assert message.endswith("A SyncVectorEnv built from one factory (as gym.make_vec "
                                 "builds it, or [make] * n) runs them on that factory's envs; "
                                 "this one's envs come from different factories")
    # the audit's own stand-ins are no part of the user's setup
    assert "Mailbox" not in message and "RowView" not in message


@pytest.mark.parametrize("kind", ["sync", "batched"])
def test_a_perturbation_that_is_not_lockstep_is_refused_by_a_batch_given(kind):
    message = _refused(kind, [SHOVE], "audit")
    assert "scenario 'shove'" in message and "(Shove)" in message
    assert GIVEN_LABELS[kind] in message and "one env per slot" in message
    assert "LOCKSTEP" in message


def test_a_timing_wrapper_around_another_perturbation_is_refused():
    box = (spaces.Box(-1, 1, (4,)), spaces.Discrete(2))
    with pytest.raises(PerturbationError, match=r"scenario 'stacked' cannot run on a batch: a "
                                                r"timing perturbation \(Jitter\) wraps another"):
        Chain(STACKED, box, "a batch")
    Chain(Scenario("inside", "custom", _noise_over_jitter), box, "a batch")  # innermost: fine
    message = _refused("sync", [STACKED], "run_episodes")
    assert "(Jitter)" in message and "SyncVectorEnv" in message and "one env per slot" in message


# ------------------------------------------------------ the BatchedEnv protocol


class Falling:
    """A BatchedEnv in numpy: every episode ends at its fifth step, reward 1 a step."""

    single_observation_space: Any = spaces.Box(-1, 1, (1,))
    single_action_space = spaces.Discrete(2)

    def __init__(self, num_envs: int = 4) -> None:
        self.num_envs = num_envs
        self.t = np.zeros(num_envs, dtype=np.int64)
        self.seeds = np.zeros(num_envs, dtype=np.int64)

    def reset(self, env_ids, seeds):
        self.t[env_ids] = 0
        self.seeds[env_ids] = seeds
        return np.zeros((len(env_ids), 1), np.float32)

    def step(self, actions):
        n = self.num_envs
        self.t += 1
        return np.zeros((n, 1), np.float32), np.ones(n), self.t >= 5, np.zeros(n, bool)


class NoPolicyKey(Falling):
    single_observation_space = spaces.Dict({"critic": spaces.Box(-1, 1, (1,))})


class ThreeItems(Falling):
    def step(self, actions):
        return super().step(actions)[:3]


class NaNReward(Falling):
    """A NaN reward at the third step of the episode reset with seed 11."""

    def step(self, actions):
        obs, rewards, terminated, truncated = super().step(actions)
        rewards[(self.seeds == 11) & (self.t == 3)] = np.nan
        return obs, rewards, terminated, truncated


class Stalls(Falling):
    """A step that never returns (here: for 30 s) at the 7th tick, in episode 1's life."""

    ticks = 0

    def step(self, actions):
        self.ticks += 1
        if self.ticks == 7:
            time.sleep(30)
        return super().step(actions)


def _zeros(obs):
    return np.zeros(len(obs), dtype=np.int64)


def test_a_batch_step_that_never_returns_is_named_by_the_call_bound():
    start = time.monotonic()
    with pytest.raises(RolloutTimeoutError, match=r"env.step did not return within 0.3 s .*"
                                                  r"in the step of the batched env Stalls "
                                                  r"\(2 of its rows running\), the first at "
                                                  r"scenario 'nominal', episode 2"), \
            calls.bounded(0.3):
        run_episodes(as_policy(_zeros), env_spec(Stalls(num_envs=2)), scenarios.resolve(["nominal"]),
                     4, seed=0)
    assert time.monotonic() - start < 10  # stopped, not waited out


def test_a_dict_observation_space_without_a_policy_key_is_a_contract_error():
    with pytest.raises(EnvContractError, match=r"NoPolicyKey: its Dict observation space has no "
                                               r"'policy' key \(keys: critic\)"):
        audit(_zeros, NoPolicyKey(), scenarios=["delay"], episodes=2)


def test_a_step_that_returns_three_items_is_a_contract_error():
    with pytest.raises(EnvContractError, match=r"ThreeItems: step\(\) must return \(obs, "
                                               r"rewards, terminated, truncated\)"):
        run_episodes(as_policy(_zeros), env_spec(ThreeItems()), scenarios.resolve(["delay"]), 2)


def test_the_contract_error_of_a_short_step_says_what_it_returned():
    with pytest.raises(EnvContractError) as caught:
        run_episodes(as_policy(_zeros), env_spec(ThreeItems()), scenarios.resolve(["delay"]), 2)
    assert "3" in str(caught.value)  # a tuple of 3 items, not "got tuple"


def test_a_non_finite_reward_names_scenario_episode_and_step():
    with pytest.raises(RolloutError, match=r"NaNReward returned a non-finite reward nan at "
                                           r"scenario 'delay', episode 1 \(env seed 11\), "
                                           r"agent step 2") as caught:
        run_episodes(as_policy(_zeros), env_spec(NaNReward()), scenarios.resolve(["delay"]), 3,
                     seed=10)
    assert (caught.value.scenario, caught.value.episode, caught.value.step) == ("delay", 1, 2)


def test_a_well_behaved_protocol_env_runs_every_episode_whole():
    out = run_episodes(as_policy(_zeros), env_spec(Falling(3)),
                       scenarios.resolve(["nominal", "delay", "speed_5x"]), 4, seed=0)
    assert out["nominal"].returns.tolist() == [5.0] * 4
    assert out["speed_5x"].lengths.tolist() == [1] * 4  # 5 env steps held once
    assert out["speed_5x"].env_steps.tolist() == [5] * 4
    assert out["delay"].terminated.all()


# ------------------------------------------------- the agent's needs of its env


class TimeAware(BasePolicy):
    """An agent trained with gymnasium's TimeAwareObservation around its env."""

    shards_freely = True
    env_needs = EnvNeeds(wrappers=(("gymnasium.wrappers.TimeAwareObservation", {}),))

    def act(self, obs, states):
        return np.zeros(len(obs), dtype=np.int64), None


@pytest.mark.parametrize("make, label", [(lambda: _cartpoles(2), "the vector env SyncVectorEnv"),
                                         (Falling, "the batched env Falling")],
                         ids=["sync", "protocol"])
def test_an_agents_wrapper_cannot_go_round_a_batch_given(make, label):
    env = make()
    try:
        with pytest.raises(PolicyError, match=r"the wrapper gymnasium\.wrappers\."
                                              rf"TimeAwareObservation, which cannot be applied "
                                              rf"to {label}"):
            audit(TimeAware(), env, scenarios=["delay"], episodes=2)
    finally:
        if hasattr(env, "close"):
            env.close()
    # on an id, the wrapper goes round each env and the audit makes no batch
    assert TimeAware.env_needs.apply("CartPole-v1").batch is None


def test_a_vector_env_of_other_than_array_observations_is_refused_with_the_remedy():
    venv = gym.vector.SyncVectorEnv([lambda: gym.make("FrozenLake-v1")] * 2)
    with pytest.raises(EnvContractError, match=r"SyncVectorEnv: .* Discrete\(16\); pass a "
                                               r"factory of one env instead"):
        audit(_zeros, venv, scenarios=["delay"], episodes=2)


def test_a_batch_given_cannot_go_to_ray_and_says_what_to_do_instead():
    venv = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    with pytest.raises(InvalidArgumentError, match=r"SyncVectorEnv is a batch made in this "
                                                   r"process.*backend='local'"):
        run_episodes(as_policy(_zeros), env_spec(venv), scenarios.resolve(["delay"]), 2,
                     backend="ray")
