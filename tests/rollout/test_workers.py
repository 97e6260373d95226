"""Worker processes (``workers=``): the same numbers for any worker count, whichever way
the work is spread (shards of episodes, each process with its own copy of the agent; or,
for a policy that must stay in one process, env slots stepped in worker processes),
errors that say where, and bad counts refused."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from toy_envs import CounterEnv, FaultyEnv

from pytest_rlaudit import audit, scenarios
from pytest_rlaudit.errors import RolloutCapWarning, RolloutError
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.rollout.workers import resolve_workers, usable_cores
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.envs import env_spec

PPO_ZIP = Path(__file__).resolve().parents[2] / "examples" / "ppo_cartpole.zip"
NAMES = ["nominal", "jitter", "delay", "spike", "obs_noise", "speed_5x"]
FIELDS = ("seeds", "returns", "lengths", "env_steps", "capped")


#: How workers spread the work: shards (the default), or env slots in worker processes
#: while this one makes every policy call (a policy with shards_freely=False).
EXECUTORS = ["shards", "env workers"]


def _run(agent, names=NAMES, episodes=5, env="CartPole-v1", executor="shards", **kwargs):
    policy = as_policy(agent)
    policy.shards_freely = executor == "shards"
    return run_episodes(policy, env_spec(env), scenarios.resolve(names), episodes, **kwargs)


def _same(a, b, recorded=False):
    assert a.keys() == b.keys()
    for name in a:
        for field in FIELDS:
            np.testing.assert_array_equal(getattr(a[name], field), getattr(b[name], field),
                                          err_msg=f"{name}.{field}")
        for x, y in zip(a[name].traces, b[name].traces, strict=True):
            np.testing.assert_array_equal(x, y)
        assert a[name].params == b[name].params
        if recorded:
            for x, y in zip(a[name].observations + a[name].actions,
                            b[name].observations + b[name].actions, strict=True):
                np.testing.assert_array_equal(x, y)


def _capped_run(agent, **kwargs):
    """``_run`` of the first 100 steps of each episode, and its RolloutCapWarnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RolloutCapWarning)
        out = _run(agent, seed=3, record=True, max_steps=100, **kwargs)
    return out, [str(w.message) for w in caught if issubclass(w.category, RolloutCapWarning)]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("agent", ["controller", "random"])  # stateless, stateful
def test_numbers_are_identical_for_1_2_3_and_4_workers(agent, executor, controller):
    # The controller's episodes cut at 100 steps (whole 500-step ones run with workers in
    # the two-phase and whole-episode tests below): the same cut episodes, and the same
    # count of them in the warning, for any worker count.
    agent = controller if agent == "controller" else "random"
    local, capped = _capped_run(agent)
    assert local["obs_noise"].params["spread"]  # calibrated on the nominal episodes
    assert bool(capped) == (agent is controller)
    for workers in (2, 3, 4):
        spread, warned = _capped_run(agent, workers=workers, executor=executor)
        _same(local, spread, recorded=True)
        assert warned == capped


def test_shards_split_episodes_or_scenarios_and_give_the_numbers_of_one_process(controller):
    """Fewer episodes than processes: the shards hold groups of scenarios instead."""
    local = _run(controller, episodes=1, seed=4, record=True)
    for workers in (2, 4, 7):
        _same(local, _run(controller, episodes=1, seed=4, record=True, workers=workers),
              recorded=True)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_worker_numbers_do_not_depend_on_batch_size(executor, controller):
    # the first 100 steps (one row at a time through env workers is a message a step)
    runs = [_capped_run(controller, names=["jitter", "obs_noise"], episodes=3, workers=2,
                        batch_size=b, executor=executor)
            for b in (1, 4, 64)]
    assert runs[0][1]  # the episodes were cut, in every run alike
    for out, warned in runs[1:]:
        _same(runs[0][0], out, recorded=True)
        assert warned == runs[0][1]


def test_a_mujoco_env_gives_the_same_returns_in_worker_processes():
    pytest.importorskip("mujoco", reason="MuJoCo is in the dev extra")
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(4, 1)).astype(np.float32)

    def linear(obs):
        return np.clip(obs @ weights, -3, 3)

    names = ["nominal", "jitter", "dynamics"]
    local = _run(linear, names, episodes=3, env="InvertedPendulum-v5")
    _same(local, _run(linear, names, episodes=3, env="InvertedPendulum-v5", workers=2))


def test_audit_with_workers_reports_what_a_local_audit_does(controller):
    kwargs = dict(scenarios=["jitter", "obs_noise"], episodes=4, reference="random")
    local = audit(controller, "CartPole-v1", **kwargs).to_dict()
    spread = audit(controller, "CartPole-v1", workers=2, **kwargs).to_dict()
    local.pop("seconds", None)
    spread.pop("seconds", None)
    assert local == spread


@pytest.mark.parametrize(
    ("fault", "match"),
    [
        ("raise", r"env step failed \(RuntimeError: simulator exploded\) at scenario 'delay', "
                  r"episode [01] \(env seed [01]\), agent step 2"),
        ("nan_obs", r"non-finite observation .* scenario 'delay', episode [01]"),
        ("nan_reward", r"non-finite reward nan at scenario 'delay', episode [01]"),
    ],
)
@pytest.mark.parametrize("executor", EXECUTORS)
def test_env_faults_with_workers_name_where_they_happened(fault, match, executor):
    # Both episodes fail at the same step, one in each process: either may be reported.
    with pytest.raises(RolloutError, match=match) as info:
        _run(lambda o: np.zeros(len(o), dtype=np.int64), ["delay"], episodes=2,
             env=lambda: FaultyEnv(fault, at=3), batch_size=1, workers=2, executor=executor)
    assert info.value.scenario == "delay" and info.value.episode in (0, 1)


_RUNNER = os.getpid()


class _Dies(CounterEnv):
    def step(self, action):
        if self.t == 2 and os.getpid() != _RUNNER:
            os._exit(3)  # a segfaulting simulator, as far as the runner can tell
        return super().step(action)


class _FaultsInAWorker(FaultyEnv):
    def step(self, action):
        if os.getpid() == _RUNNER:
            return CounterEnv.step(self, action)
        return super().step(action)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_an_env_fault_in_a_worker_process_reaches_the_runner_as_the_same_error(executor):
    with pytest.raises(RolloutError, match=r"env step failed \(RuntimeError: simulator "
                                           r"exploded\) at scenario 'delay', episode 1 "
                                           r"\(env seed 1\), agent step 2") as info:
        _run(lambda o: np.zeros(len(o), dtype=np.int64), ["delay"], episodes=2,
             env=lambda: _FaultsInAWorker("raise", at=3), batch_size=2, workers=2,
             executor=executor)
    assert (info.value.scenario, info.value.episode, info.value.step) == ("delay", 1, 2)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_worker_that_dies_is_a_clear_error_not_a_hang(executor):
    with pytest.raises(RolloutError, match=r"a worker process died \(exit code 3\); run "
                                           r"with workers=None"):
        _run(lambda o: np.zeros(len(o), dtype=np.int64), ["nominal"], episodes=2,
             env=lambda: _Dies(horizon=10), workers=2, executor=executor)


def test_an_unexact_reset_gets_a_new_env_per_episode():
    """An env that carries state across resets (its horizon shrinks each episode) would
    make a result depend on which slot ran an episode: the runner makes a new one for
    each episode instead, so batch size and workers change nothing."""

    class Tiring(CounterEnv):
        def reset(self, **kwargs):
            self.horizon = max(1, self.horizon - 1)
            return super().reset(**kwargs)

    def run(**kwargs):
        return _run(lambda o: np.zeros(len(o), dtype=np.int64), ["nominal", "jitter"],
                    episodes=6, env=lambda: Tiring(horizon=20), **kwargs)

    one = run(batch_size=1)
    assert one["nominal"].returns.tolist() == [19 * 20 / 2] * 6  # a fresh env each time
    _same(one, run(batch_size=64))
    for executor in EXECUTORS:
        _same(one, run(batch_size=2, workers=2, executor=executor))


@pytest.mark.parametrize("bad", [-1, 1.5, "many", True])
def test_bad_worker_counts_are_refused_with_what_to_pass(bad):
    with pytest.raises(ValueError, match=r'workers must be an integer >= 0 or "auto"'):
        _run("random", ["nominal"], episodes=2, workers=bad)
    with pytest.raises(ValueError, match=r'workers must be an integer >= 0 or "auto"'):
        audit("random", "CartPole-v1", scenarios="delay", episodes=2, workers=bad)


def test_the_options_know_the_runners_backends():
    from pytest_rlaudit.plugin.options import BACKENDS as OPTION_BACKENDS
    from pytest_rlaudit.rollout.runner import BACKENDS

    assert OPTION_BACKENDS == BACKENDS == ("local", "ray")


def test_an_unknown_backend_is_refused_naming_the_backends():
    with pytest.raises(ValueError, match=r"backend must be one of 'local', 'ray', got 'dask'"):
        audit("random", "CartPole-v1", scenarios="delay", episodes=2, backend="dask")


def test_auto_is_one_env_stepping_process_per_usable_core():
    assert resolve_workers("auto") == usable_cores()
    assert resolve_workers(None) == resolve_workers(0) == resolve_workers(1) == 1


# ---------------------------------------------------------------- two phases, and shards
@pytest.fixture
def phased(monkeypatch):
    """Two phases for groups of any size (by default they start at PHASE_ROWS rows), so
    that small test pools run the pipelined schedule of a large audit."""
    from pytest_rlaudit.rollout import pool

    monkeypatch.setattr(pool, "PHASE_ROWS", 1)
    return pool


def test_the_layout_has_two_phases_only_where_groups_are_large_enough(phased):
    phased.PHASE_ROWS = 16
    assert phased._layout(128, 2, 150) == [[30, 29], [35, 34]]  # this process takes less
    assert phased._layout(128, 2, 30) == [[64], [64]]  # one phase: even shares
    assert phased._layout(128, 1, 150) == [[128]]
    phased.PHASE_ROWS = 1
    assert phased._layout(8, 3, 30) == [[1, 1], [2, 1], [2, 1]]
    assert phased._layout(4, 2, 3) == [[2], [2]]  # fewer jobs than groups: one phase


@pytest.mark.parametrize("agent", ["controller", "stateful"])
def test_two_phases_give_the_numbers_of_one_process(agent, controller, phased):
    """The pipelined schedule (a worker steps one phase while this process acts for the
    other) changes which rows share a policy call and when, never a number."""
    if agent == "stateful":  # a recurrent-like policy: per-episode state, seeded
        from pytest_rlaudit.world.agents.base import BasePolicy

        class Counting(BasePolicy):
            stateful = True

            def initial_state(self, seed):
                return int(seed.generate_state(1)[0]) % 2

            def act(self, obs, states):
                actions = np.array([(s + int(o[2] > 0)) % 2 for o, s in zip(obs, states, strict=True)])
                return actions, [s ^ 1 for s in states]

        agent = Counting()
    else:
        agent = controller
    local = _run(agent, seed=1, record=True)
    # One worker process and two, each stepping both phases, with slots refilled (30 jobs,
    # 24 slots): the stateful agent's short episodes; the controller's whole 500-step
    # episodes (every message a step) with two worker processes, the case that has both.
    for workers in (2, 3) if agent is not controller else (3,):
        _same(local, _run(agent, seed=1, record=True, workers=workers, batch_size=24,
                          executor="env workers"), recorded=True)


def test_an_env_fault_with_two_phases_is_the_envs_error(phased):
    # The worker fails on one phase while this process has already sent it the other.
    with pytest.raises(RolloutError, match=r"env step failed \(RuntimeError: simulator "
                                           r"exploded\) at scenario 'delay', episode \d+ "
                                           r"\(env seed \d+\), agent step 2"):
        _run(lambda o: np.zeros(len(o), dtype=np.int64), ["delay"], episodes=8,
             env=lambda: _FaultsInAWorker("raise", at=3), batch_size=8, workers=2,
             executor="env workers")


def test_a_worker_that_dies_with_two_phases_is_a_clear_error(phased):
    with pytest.raises(RolloutError, match=r"a worker process died \(exit code 3\)"):
        _run(lambda o: np.zeros(len(o), dtype=np.int64), ["nominal"], episodes=8,
             env=lambda: _Dies(horizon=10), batch_size=8, workers=2, executor="env workers")


@pytest.mark.parametrize("agent", ["random", "controller", "sb3"])
def test_an_agent_on_the_cpu_runs_whole_episodes_in_each_process(agent, monkeypatch, controller):
    """Every policy as_policy makes on the CPU shards: each process runs its own episodes
    with its own copy of the agent, no per-step messages (so no WorkerProcess), and the
    numbers are those of one process."""
    from pytest_rlaudit.rollout import workers

    agent = {"random": "random", "controller": controller, "sb3": str(PPO_ZIP)}[agent]
    assert as_policy(agent).shards_freely

    def refuse(*args, **kwargs):
        raise AssertionError("the policy's steps went through a WorkerProcess")

    names = ["nominal", "jitter", "obs_noise"] if agent == str(PPO_ZIP) else NAMES  # torch costs
    local = _run(agent, names, episodes=5, seed=2, record=True)
    monkeypatch.setattr(workers.WorkerProcess, "__init__", refuse)
    # Each agent's own copy in each process needs one split of the work; how shards fall
    # (each an independent run in its process) is the same for every agent: 2 and 3
    # processes for random's, 2, 4 and 7 for the controller's in test_shards_split_...
    for n in (2, 3) if agent == "random" else (2,):
        _same(local, _run(agent, names, episodes=5, seed=2, record=True, workers=n),
              recorded=True)


def test_capped_episodes_of_every_shard_are_counted_in_one_warning():
    with pytest.warns(RolloutCapWarning, match=r"^5 episode\(s\) reached the cap of 3") as got:
        _run("random", ["nominal"], episodes=5, env=lambda: CounterEnv(horizon=10),
             workers=2, max_steps=3)
    assert len([w for w in got if issubclass(w.category, RolloutCapWarning)]) == 1


def test_an_env_fault_in_a_shard_is_the_envs_error():
    with pytest.raises(RolloutError, match=r"env step failed \(RuntimeError: simulator "
                                           r"exploded\) at scenario 'delay', episode 1 "
                                           r"\(env seed 1\), agent step 2"):
        _run("random", ["delay"], episodes=2, env=lambda: _FaultsInAWorker("raise", at=3),
             workers=2)


def test_a_shard_process_that_dies_is_a_clear_error_not_a_hang():
    with pytest.raises(RolloutError, match=r"worker process died \(exit code 3\); run "
                                           r"with workers=None"):
        _run("random", ["nominal"], episodes=2, env=lambda: _Dies(horizon=10), workers=2)


def test_a_worker_runs_torch_after_this_process_used_its_thread_pool():
    """GNU OpenMP does not survive a fork: once this process has run a parallel region,
    a forked worker's first one would wait forever (a model loaded here, then any large
    tensor op there). Workers put torch on one thread, so the audit runs, and ends well
    inside its timeout."""
    torch = pytest.importorskip("torch")
    from pytest_rlaudit.world.agents.base import BasePolicy

    class Heavy(BasePolicy):  # no torch_threads guard: a policy of one's own
        def act(self, obs, states):
            torch.ones(1 << 18).add_(1)  # large enough for a parallel region
            return (obs[:, 2] > 0).astype(np.int64), None

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.ones(1024, 1024).add_(1)  # this process's thread pool now exists
        result = audit(Heavy(), "CartPole-v1", scenarios=["delay"], episodes=4, workers=2,
                       timeout=20)
    finally:
        torch.set_num_threads(threads)
    assert len(result["delay"].returns) == 4
    assert torch.get_num_threads() == threads  # this process's own setting is left alone
