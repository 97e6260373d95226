"""The Ray backend: the numbers, errors and warnings of the in-process runner, bit for bit.

One local Ray instance of 2 CPUs serves the whole module. Agents and envs are lambdas and
classes defined inside the tests: cloudpickle ships those by value, while the helpers of
tests/ (not on the actors' sys.path) would travel by reference and fail to import.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from pytest_rlaudit import scenarios
from pytest_rlaudit.errors import RolloutCapWarning, RolloutError, RolloutTimeoutError
from pytest_rlaudit.rollout import ray_pool
from pytest_rlaudit.rollout.deadline import within
from pytest_rlaudit.rollout.pool import run_pool
from pytest_rlaudit.rollout.ray_pool import run_pool_on_ray
from pytest_rlaudit.rollout.runner import DEFAULT_MAX_STEPS
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.envs import AuditEnv, env_spec

if importlib.util.find_spec("ray") is None:  # a ray that is installed but breaks must fail
    pytest.skip("ray is not installed (pip install 'pytest-rlaudit[ray]')", allow_module_level=True)

PPO = Path(__file__).resolve().parents[2] / "examples" / "ppo_cartpole.zip"
CARTPOLE = env_spec("CartPole-v1")
# The default suite, obs_noise calibrated as run_episodes would (its spread set by hand)
SUITE = tuple(s.calibrated((0.5, 0.3, 0.05, 0.4)) for s in scenarios.resolve(scenarios.DEFAULT))


@pytest.fixture(scope="module", autouse=True)
def cluster():
    import ray  # here, not at collection: an xdist worker that runs none of these never imports it

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)
    yield
    ray_pool.release_actors()
    ray.shutdown()


def balance():
    return as_policy(lambda obs: (obs @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64))


def both(policy, env, scenario_list, indices, *, workers=2, **kwargs):
    """The in-process run and the Ray run of the same arguments."""
    options = {"seed": 3, "batch_size": None, "max_steps": DEFAULT_MAX_STEPS, "record": True,
               **kwargs}
    local = run_pool(policy, env, scenario_list, indices, **options)
    remote = run_pool_on_ray(policy, env, scenario_list, indices, workers=workers, **options)
    return local, remote


def assert_identical(local, remote):
    assert list(remote) == list(local)
    for name, want in local.items():
        got = remote[name]
        assert got.scenario == want.scenario and got.params == want.params
        for field in ("seeds", "returns", "lengths", "env_steps", "capped"):
            assert getattr(got, field).dtype == getattr(want, field).dtype
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field),
                                          err_msg=f"{name}.{field}")
        for field in ("traces", "observations", "actions"):
            assert len(getattr(got, field)) == len(getattr(want, field)), (name, field)
            for i, (g, w) in enumerate(zip(getattr(got, field), getattr(want, field), strict=True)):
                np.testing.assert_array_equal(g, w, err_msg=f"{name}.{field}[{i}]")


def test_the_default_suite_with_a_numpy_policy_gives_the_local_numbers():
    local, remote = both(balance(), CARTPOLE, SUITE, range(5))
    assert_identical(local, remote)
    assert remote["jitter"].observations[4].shape[1] == 4  # recorded, and compared above
    timing = ray_pool.last_timing
    assert (timing.shards, timing.actors, timing.started_ray) == (2, 2, False)
    assert timing.startup >= 0 and timing.run > 0


# The two SB3 tests come before the ones that kill or release actors: the second finds
# the actors into which the first imported torch and SB3 (some seconds of CPU each).
def test_an_sb3_ppo_model_gives_the_local_numbers():
    local, remote = both(as_policy(str(PPO)), CARTPOLE, scenarios.resolve(["nominal", "delay"]),
                         range(3))
    assert_identical(local, remote)


def test_every_executor_reports_the_audit_of_one_process():
    """One process, forked shards (workers=2), env workers (a policy kept in one process)
    and Ray actors: the same record, number for number, for a trained SB3 agent. (How
    shards fall over 3 or more processes is the same for every agent: test_workers.py.)"""
    from pytest_rlaudit import audit

    kwargs = dict(scenarios=["jitter", "obs_noise", "spike"], episodes=5, reference="random")

    def record(pinned=False, **where):
        policy = as_policy(str(PPO))
        policy.shards_freely = not pinned
        out = audit(policy, "CartPole-v1", **kwargs, **where).to_dict()
        out.pop("seconds", None)
        return out

    local = record()
    assert len(set(local["scenarios"]["spike"]["returns"])) > 1  # episodes that differ
    for where in ({"workers": 2}, {"workers": 2, "pinned": True},
                  {"backend": "ray", "workers": 2}):
        assert record(**where) == local, where


def test_a_lambda_env_factory_travels_to_the_actors_and_record_can_name_scenarios():
    env = AuditEnv("cartpole (lambda)", lambda: gym.make("CartPole-v1"))
    local, remote = both(balance(), env, scenarios.resolve(["nominal", "jitter", "spike"]), range(3),
                         record={"jitter"})
    assert_identical(local, remote)
    assert remote["nominal"].observations == ((), (), ())


def test_explicit_non_contiguous_indices_keep_their_order_and_seeds():
    indices = [9, 2, 14, 5]
    local, remote = both(balance(), CARTPOLE, scenarios.resolve(["nominal", "jitter"]), indices,
                         workers=3)
    assert_identical(local, remote)
    assert remote["jitter"].seeds.tolist() == [3 + i for i in indices]
    assert ray_pool.last_timing.shards == 3


def test_more_workers_than_episodes_makes_one_shard_per_episode_and_reuses_the_actors():
    for _ in range(2):  # the second call finds the first one's actors
        local, remote = both(balance(), CARTPOLE, scenarios.resolve(["nominal", "speed_5x"]),
                             [0, 1], workers=5)
        assert_identical(local, remote)
    timing = ray_pool.last_timing
    assert (timing.shards, timing.actors, timing.new_actors) == (2, 2, 0)


def test_more_shards_than_cluster_cpus_queue_on_the_actors():
    local, remote = both(balance(), CARTPOLE, scenarios.resolve(["nominal"]), range(4), workers=4)
    assert_identical(local, remote)
    assert (ray_pool.last_timing.shards, ray_pool.last_timing.actors) == (4, 2)


def test_a_rollout_error_on_an_actor_reaches_the_caller_as_itself():
    class Fragile(gym.Wrapper):
        def reset(self, *, seed=None, options=None):
            if seed == 3 + 4:
                raise ZeroDivisionError("the simulator divided by zero")
            return super().reset(seed=seed, options=options)

    env = AuditEnv("fragile", lambda: Fragile(gym.make("CartPole-v1")))
    names = scenarios.resolve(["nominal", "jitter"])
    options = {"seed": 3, "batch_size": None, "max_steps": 500, "record": False}
    with pytest.raises(RolloutError) as local:
        run_pool(balance(), env, names, range(6), **options)
    with pytest.raises(RolloutError) as remote:
        run_pool_on_ray(balance(), env, names, range(6), workers=2, **options)
    assert type(remote.value) is RolloutError
    assert str(remote.value) == str(local.value)
    assert "scenario 'nominal', episode 4 (env seed 7)" in str(remote.value)
    assert (remote.value.scenario, remote.value.episode, remote.value.step) == ("nominal", 4, 0)
    assert isinstance(remote.value.__cause__, ZeroDivisionError)
    assert "the simulator divided by zero" in str(remote.value.__cause__.__cause__)  # the actor's traceback
    # the actors that were not busy are kept, the rest replaced: the next call runs
    assert_identical(*both(balance(), CARTPOLE, names, range(2)))


def test_an_actor_that_dies_fails_the_call_and_the_next_call_starts_afresh():
    class Crashing(gym.Wrapper):
        def reset(self, *, seed=None, options=None):
            if seed == 1:
                os._exit(1)  # a simulator that segfaults takes its process with it
            return super().reset(seed=seed, options=options)

    env = AuditEnv("crashing", lambda: Crashing(gym.make("CartPole-v1")))
    from ray.exceptions import RayActorError

    with pytest.raises(RayActorError):
        run_pool_on_ray(balance(), env, scenarios.resolve(["nominal"]), range(4), seed=0,
                        batch_size=None, max_steps=500, record=False, workers=2)
    assert_identical(*both(balance(), CARTPOLE, scenarios.resolve(["nominal"]), range(2)))
    assert ray_pool.last_timing.new_actors == 2


def test_a_step_stuck_on_an_actor_ends_the_call_in_time_naming_where_and_the_next_runs():
    class Stuck(gym.Wrapper):
        def reset(self, *, seed=None, options=None):
            self.seed_, self.t = seed, 0
            return super().reset(seed=seed, options=options)

        def step(self, action):
            if self.seed_ == 3 + 2 and self.t == 3:
                time.sleep(10**6)  # the actor's own alarm ends it
            self.t += 1
            return super().step(action)

    env = AuditEnv("stuck", lambda: Stuck(gym.make("CartPole-v1")))
    began = time.monotonic()
    with pytest.raises(RolloutTimeoutError) as info, within(5):
        run_pool_on_ray(balance(), env, scenarios.resolve(["nominal"]), range(4), seed=3,
                        batch_size=None, max_steps=500, record=False, workers=2)
    assert time.monotonic() - began < 15
    assert (info.value.scenario, info.value.episode, info.value.step) == ("nominal", 2, 3)
    assert ("ran past its timeout of 5 s: it was stuck in the env's step at scenario "
            "'nominal', episode 2 (env seed 5), agent step 3") in str(info.value)
    # the actors still running were killed; the next call starts afresh
    assert_identical(*both(balance(), CARTPOLE, scenarios.resolve(["nominal"]), range(2)))


def test_a_deadline_before_any_episode_ran_on_ray_names_the_episodes_waiting(monkeypatch):
    # Issue 42, point 10: a timeout while Ray started named a line of Ray's own code
    # ("stuck in start_api_server() at .../ray/_private/services.py:1422"), no episode.
    take = ray_pool._POOL.take

    def slow(*args):
        time.sleep(30)  # Ray starting on a busy machine, as it were
        return take(*args)

    monkeypatch.setattr(ray_pool._POOL, "take", slow)
    with pytest.raises(RolloutTimeoutError) as info, within(1):
        run_pool_on_ray(balance(), CARTPOLE, scenarios.resolve(["nominal", "delay"]), range(2, 4),
                        seed=0, batch_size=None, max_steps=500, record=False, workers=2)
    assert (info.value.scenario, info.value.episode, info.value.step) == ("nominal", 2, None)
    message = str(info.value)
    assert ("ran past its timeout of 1 s: it was stuck while Ray started (ray.init) and its "
            "actors were made, before any episode ran: episodes 2 to 3 of 'nominal', 'delay' "
            "were waiting (Ray takes seconds to start: start it before the audit") in message
    assert ".py:" not in message  # no line of Ray's code in place of where


def test_idle_actors_are_released_and_started_again_when_needed(monkeypatch):
    monkeypatch.setattr(ray_pool, "IDLE_SECONDS", 0.05)
    run = both(balance(), CARTPOLE, scenarios.resolve(["nominal"]), range(2))
    deadline = time.monotonic() + 10
    while ray_pool._POOL.actors and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not ray_pool._POOL.actors
    assert_identical(*run)
    assert_identical(*both(balance(), CARTPOLE, scenarios.resolve(["nominal"]), range(2)))
    assert ray_pool.last_timing.new_actors == 2


def test_capped_episodes_give_one_warning_with_the_local_count():
    names = scenarios.resolve(["nominal", "jitter"])
    with pytest.warns(RolloutCapWarning) as local_warnings:
        local = run_pool(balance(), CARTPOLE, names, range(5), seed=3, batch_size=None,
                          max_steps=20, record=False)
    with pytest.warns(RolloutCapWarning) as remote_warnings:
        remote = run_pool_on_ray(balance(), CARTPOLE, names, range(5), seed=3, batch_size=None,
                                 max_steps=20, record=False, workers=2)
    assert_identical(local, remote)
    assert [str(w.message) for w in remote_warnings] == [str(w.message) for w in local_warnings]
    assert str(remote_warnings[0].message).startswith("10 episode(s) reached the cap of 20")


def test_bad_arguments_fail_with_the_runners_message_before_ray_runs_anything():
    names = scenarios.resolve(["nominal"])
    for indices, match in (([], "episodes must be"), ([2, -1], "non-negative")):
        with pytest.raises(ValueError, match=match):
            run_pool_on_ray(balance(), CARTPOLE, names, indices, seed=0, batch_size=None,
                            max_steps=10, record=False)
    with pytest.raises(ValueError, match="workers must be an integer >= 1, got 0"):
        run_pool_on_ray(balance(), CARTPOLE, names, [0], seed=0, batch_size=None, max_steps=10,
                        record=False, workers=0)


def test_an_agent_that_cannot_be_pickled_is_named():
    class Locked:
        def __init__(self):
            self.lock = threading.Lock()

        def __call__(self, obs):
            return np.zeros(len(obs), dtype=np.int64)

    with pytest.raises(TypeError, match=r"ships the agent .* cannot be pickled \(TypeError: .*lock"):
        run_pool_on_ray(as_policy(Locked()), CARTPOLE, scenarios.resolve(["nominal"]), [0], seed=0,
                        batch_size=None, max_steps=10, record=False)


def test_without_ray_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"pip install 'pytest-rlaudit\[ray\]'"):
        run_pool_on_ray(balance(), CARTPOLE, scenarios.resolve(["nominal"]), [0], seed=0,
                        batch_size=None, max_steps=10, record=False)


def test_importing_the_backend_does_not_import_ray():
    code = "import sys, pytest_rlaudit.rollout.ray_pool; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_check_robust_on_ray_reports_what_a_local_run_does():
    from pytest_rlaudit import check_robust

    agent = lambda obs: (obs @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype(np.int64)  # noqa: E731
    checks = [check_robust(agent, "CartPole-v1", "spike", min_ratio=0.8, episodes=4,
                           max_episodes=8, cache={}, **where)
              for where in ({}, {"backend": "ray"})]
    assert checks[0].result.returns.tolist() == checks[1].result.returns.tolist()
    assert checks[0].message == checks[1].message
