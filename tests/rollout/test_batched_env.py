"""A batched simulator behind the BatchedEnv protocol (examples/batched_cartpole.py: torch
tensors, a Dict observation read at "policy", envs that reset themselves inside step):
its audit does not depend on the number of envs or the processes, its episodes are paired
by seed, and the tensors it returns are copied before anything holds them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pytest_rlaudit import NonReproducibleError, Scenario, audit, scenarios  # noqa: E402
from pytest_rlaudit.perturbations import Perturbation  # noqa: E402
from pytest_rlaudit.rollout.replay import PREFIX_STEPS  # noqa: E402
from pytest_rlaudit.rollout.runner import run_episodes  # noqa: E402
from pytest_rlaudit.world.agents import as_policy  # noqa: E402
from pytest_rlaudit.world.batches.kinds import ProtocolRows  # noqa: E402
from pytest_rlaudit.world.envs import env_spec  # noqa: E402


def _example():
    path = Path(__file__).resolve().parents[2] / "examples" / "batched_cartpole.py"
    spec = importlib.util.spec_from_file_location("batched_cartpole_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BatchedCartPole = _example().BatchedCartPole

#: The default suite: nominal is added by the audit.
SUITE = ["speed_5x", "jitter", "delay", "spike", "obs_noise"]
EPISODES = 20


def balance(obs):
    """A numpy CartPole controller: balances nominally, falls under timing faults."""
    return (obs[:, 2] + 0.3 * obs[:, 3] > 0).astype(np.int64)


def push_right(obs):
    """Always action 1: the same actions whatever is seen, so the env's states do not
    depend on the observations (the episode falls in about ten steps)."""
    return np.ones(len(obs), dtype=np.int64)


class InPlace(BatchedCartPole):
    """BatchedCartPole writing every step's and reset's observations into buffers it keeps
    and returns again (as a GPU simulator's preallocated observation tensor)."""

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs)
        self.step_buffer = torch.zeros((num_envs, 4))
        self.reset_buffer = torch.zeros((num_envs, 4))

    def reset(self, env_ids, seeds):
        fresh = super().reset(env_ids, seeds)["policy"]
        rows = self.reset_buffer[:len(fresh)]
        rows.copy_(fresh)
        return {"policy": rows}

    def step(self, actions):
        obs, rewards, terminated, truncated, extras = super().step(actions)
        self.step_buffer.copy_(obs["policy"])
        return {"policy": self.step_buffer}, rewards, terminated, truncated, extras


class InNumpy(BatchedCartPole):
    """BatchedCartPole returning fresh numpy arrays, no tensors and no dict."""

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs)
        self.single_observation_space = self.single_observation_space["policy"]

    def reset(self, env_ids, seeds):
        return super().reset(env_ids, seeds)["policy"].numpy().copy()

    def step(self, actions):
        obs, rewards, terminated, truncated, _ = super().step(actions)
        return obs["policy"].numpy().copy(), rewards.numpy(), terminated.numpy(), truncated.numpy()


class HeldAsGiven(Perturbation, gym.Wrapper):
    """A delay of one's own that keeps each observation as it was given, uncopied: what
    the scalar path's fresh arrays allow, and a batch must allow too."""

    LOCKSTEP = True

    def __init__(self, env: gym.Env) -> None:
        self._init_perturbation()
        gym.Wrapper.__init__(self, env)
        self.last = None

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        self.last = obs
        return obs, info

    def observe(self, obs):
        shown, self.last = self.last, obs
        return shown

    step = Perturbation._step_by_hooks


def _returns(result) -> dict[str, np.ndarray]:
    return {s.name: s.returns for s in [result.nominal, *result]}


def _same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for name in a:
        assert np.array_equal(a[name], b[name]), (name, a[name], b[name])


@pytest.fixture(scope="module")
def sixteen():
    """The audit on 16 envs, and the env it ran on."""
    env = BatchedCartPole(16)
    return audit(balance, env, scenarios=SUITE, episodes=EPISODES, seed=0), env


def test_the_audit_is_a_batched_cartpoles(sixteen):
    result, _ = sixteen
    returns = _returns(result)
    assert list(returns) == ["nominal", *SUITE]
    assert all(len(r) == EPISODES for r in returns.values())
    assert "BatchedCartPole" in result.env
    assert (returns["nominal"] == 500).all()  # the controller balances the nominal cart-pole
    assert returns["speed_5x"].mean() < 500 and returns["spike"].mean() < 500


@pytest.mark.parametrize("num_envs", [64, 1024])
def test_the_number_of_envs_changes_no_return(sixteen, num_envs):
    result = audit(balance, BatchedCartPole(num_envs), scenarios=SUITE, episodes=EPISODES, seed=0)
    _same(_returns(result), _returns(sixteen[0]))


def test_workers_change_no_return(sixteen):
    result = audit(balance, BatchedCartPole(16), scenarios=SUITE, episodes=EPISODES, seed=0,
                   workers=2)
    _same(_returns(result), _returns(sixteen[0]))


def test_a_second_audit_on_the_same_env_repeats_the_first(sixteen):
    first, env = sixteen  # the env's own generator and rows are where the first audit left them
    again = audit(balance, env, scenarios=SUITE, episodes=EPISODES, seed=0)
    _same(_returns(again), _returns(first))
    assert again["obs_noise"].params == first["obs_noise"].params


def test_another_seed_gives_other_returns(sixteen):
    other = audit(balance, BatchedCartPole(16), scenarios=["jitter", "spike"], episodes=EPISODES,
                  seed=1)
    for name in ("jitter", "spike"):
        assert not np.array_equal(other[name].returns, sixteen[0][name].returns), name
    assert other.nominal.seeds.tolist() == list(range(1, EPISODES + 1))


def test_episode_i_of_every_scenario_starts_where_its_seed_resets_the_env():
    seed, episodes = 5, 6
    chosen = scenarios.resolve(["nominal", *SUITE, "dropped_obs", "action_delay"])
    out = run_episodes(as_policy(balance), env_spec(BatchedCartPole(64)), chosen, episodes,
                       seed=seed, record=True)
    probe = BatchedCartPole(8)
    starts = []
    for i in range(episodes):
        # whichever row ran it: here row 6 of another env
        expected = probe.reset(np.array([6]), [seed + i])["policy"][0].numpy()
        for name, batch in out.items():
            assert batch.seeds[i] == seed + i
            assert np.array_equal(batch.observations[i][0], expected), (name, i)
        starts.append(expected)
    assert len({s.tobytes() for s in starts}) == episodes  # each seed its own start


def test_a_delayed_observation_is_the_one_the_env_returned_a_step_earlier():
    # the same actions under nominal and delay, on an env that overwrites its buffers
    out = run_episodes(as_policy(push_right), env_spec(InPlace(4)),
                       scenarios.resolve(["nominal", "delay"]), 5, seed=3, record=True)
    nominal, delay = out["nominal"], out["delay"]
    assert np.array_equal(nominal.lengths, delay.lengths)
    assert (nominal.lengths > 3).all()
    for i in range(5):
        seen, late = nominal.observations[i], delay.observations[i]
        assert np.array_equal(late[0], seen[0])  # the reset observation, at once
        assert np.array_equal(late[1:], seen[:-1])  # then each one step late
        assert np.array_equal(delay.last_observations[i], seen[-1])
        assert not np.array_equal(late[1:], seen[1:])  # not the current one


def test_tensors_the_env_writes_again_are_copied():
    chosen = [*scenarios.resolve(["nominal", "delay", "dropped_obs", "obs_noise", "jitter"]),
              Scenario("held_as_given", "custom", HeldAsGiven)]
    runs = []
    for env in (InPlace(12), InNumpy(12)):  # 24 episodes on 12 rows: rows reset again
        audited = env_spec(env)
        assert type(audited.batch.given) is ProtocolRows
        runs.append(run_episodes(as_policy(balance), audited, chosen, 4, seed=9, record=True))
    in_place, in_numpy = runs
    # a delay of one step, however written
    assert np.array_equal(in_place["held_as_given"].returns, in_place["delay"].returns)
    for name in in_numpy:
        for field in ("returns", "lengths", "env_steps", "terminated"):
            assert np.array_equal(getattr(in_place[name], field), getattr(in_numpy[name], field))
        for field in ("observations", "last_observations", "actions"):
            for i, (a, b) in enumerate(zip(getattr(in_place[name], field),
                                           getattr(in_numpy[name], field), strict=True)):
                assert np.array_equal(a, b), (name, field, i)


class SharedStarts(BatchedCartPole):
    """A simulator that takes the seeds and ignores them: each reset draws its start from
    the one generator all envs share (what a GPU simulator does without the protocol's
    seeds)."""

    def reset(self, env_ids, seeds):
        ids = torch.as_tensor(np.asarray(env_ids))
        self.state[ids] = (torch.rand((len(ids), 4), generator=self.generator) - 0.5) * 0.1
        self.episode_length[ids] = 0
        return {"policy": self.state[ids].clone()}


def test_a_simulator_ignoring_its_seeds_is_refused_before_any_episode():
    env = SharedStarts(8)
    steps = []
    step = env.step
    env.step = lambda actions: (steps.append(1), step(actions))[1]
    with pytest.raises(NonReproducibleError) as info:
        audit(balance, env, scenarios=["delay"], episodes=4, seed=0)
    message = str(info.value)
    assert message.startswith("the batched env SharedStarts does not replay under its seed: "
                              "episode 0 of the batched env SharedStarts (env seed 0)")
    assert "gave different observations after the reset" in message
    # the fix is the protocol's, not a gymnasium env's
    assert "in reset(env_ids, seeds), draw the start of env env_ids[i] from seeds[i]" in message
    assert "super().reset(seed=seed)" not in message
    # told by the seed-replay check's own two runs: no episode of the audit ran
    assert len(steps) == 2 * PREFIX_STEPS  # its two runs of the first steps
