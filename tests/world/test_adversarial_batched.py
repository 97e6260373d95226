"""adversarial_obs at scale: the runner attacks all the rows of a decision step in one
batched PGD, and each row's attacked observation is the one the wrapper computes for it
alone.

The ``PINNED_*`` values are a regression pin, not a property: they were recorded from the
per-observation attack as it was before the batched one (one PGD per row, one
forward/backward of one observation per PGD step), with the seeds written here, and must
not change with the batching. A torch or SB3 upgrade that changes the networks' initial
weights may move them, which is then to be checked and re-recorded.

The Pendulum ones were recorded again with the batched attack on the float stack
``RECORDED_ON`` (an AVX2 machine; the first recording, on another machine, differs by at
most 4e-9 of a return and one float32 ulp of an observation). numpy's ``sin``/``cos`` and
torch's kernels round by the CPU's SIMD level, so on another stack the pins hold within
float rounding (``tests/pins.py``), and the observation digests (a SHA-256 of every
observation the agent saw, ``record=True``, which pins every attacked observation bit for
bit) only on the recording one. That a batched row is its attack alone, bit for bit, is
checked in the same run on every machine (the ``alone`` runs and
``test_each_row_of_a_batched_pgd_is_its_pgd_alone``).
"""

from __future__ import annotations

import functools
import hashlib
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from pins import assert_pinned, float_stack
from stable_baselines3 import SAC
from torch import nn

from pytest_rlaudit import audit, scenarios
from pytest_rlaudit.errors import RolloutCapWarning
from pytest_rlaudit.perturbations import AdversarialObservation
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import TorchPolicy, as_policy
from pytest_rlaudit.world.envs import env_spec
from pytest_rlaudit.world.scenarios import Scenario

CARTPOLE, PENDULUM = "CartPole-v1", "Pendulum-v1"
FRAGILE_PPO = Path(__file__).resolve().parents[2] / "examples" / "ppo_cartpole.zip"


class Gaussian(nn.Module):
    """A continuous actor in CleanRL's ``actor_mean`` shape, weights fixed by seed 0."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.actor_mean = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))


def _agent(name: str):
    if name == "ppo":  # the bundled fragile PPO: Discrete actions
        return _ppo()
    if name == "sac":  # an untrained SB3 SAC, weights fixed by seed 0: Box actions
        return as_policy(SAC("MlpPolicy", PENDULUM, policy_kwargs=dict(net_arch=[16]),
                             buffer_size=1_000, seed=0, device="cpu"))
    return TorchPolicy(Gaussian())  # a torch module: Box actions


@functools.cache
def _ppo():
    """The bundled PPO, loaded once: every test only reads it (acts with it)."""
    return as_policy(str(FRAGILE_PPO))


def _digest(batch) -> str:
    h = hashlib.sha256()
    for seen in batch.observations:
        h.update(np.ascontiguousarray(seen).tobytes())
    return h.hexdigest()[:16]


def _attack(epsilon: float, name: str = "adversarial_obs", **params) -> Scenario:
    base = scenarios.get("adversarial_obs")
    return Scenario(name, "stress", base.perturbation,
                    {**base.params, "epsilon": epsilon, "scale": "absolute", **params})


def _run(policy, env_id: str, chosen, episodes, *, batch_size=None, workers=None,
         max_steps=10_000):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every env the runner makes is attached: none warns
        warnings.filterwarnings("ignore", category=RolloutCapWarning)  # max_steps= cuts
        return run_episodes(policy, env_spec(env_id), chosen, episodes, seed=3,
                            batch_size=batch_size, record=True, workers=workers,
                            max_steps=max_steps)


# --------------------------------------------------------------------------------------
# Regression pins (recorded from the per-observation attack: see the module docstring)

#: The float stack the pins were recorded on (tests/pins.py's float_stack()).
RECORDED_ON = {"numpy": "2.4.6", "numpy_simd": "X86_V3", "torch": "2.13.0+cpu", "torch_cpu": "AVX2",
               "gymnasium": "1.4.0"}

PINNED_STEPS = {  # (agent, env, reset seed, epsilon): the first attacked step observations
    ("ppo", CARTPOLE, 5, 0.05): [
        [0.08111617714166641, 0.24407362937927246, 0.006982056424021721, -0.29080718755722046],
        [0.08218573778867722, 0.47100022435188293, 0.026770003139972687, -0.555953323841095],
        [0.09405405819416046, 0.6661940813064575, 0.03271271288394928, -0.8502596616744995],
        [0.10637793689966202, 0.4713105857372284, 0.014707519672811031, -0.5630602836608887]],
    ("gaussian", PENDULUM, 2, 0.3): [
        [0.3122672140598297, -1.0, -0.9138737320899963],
        [-0.3885499835014343, -0.6960717439651489, -2.3186721801757812],
        [-0.5245347023010254, -0.674466073513031, -3.0559885501861572]],
    ("sac", PENDULUM, 1, 0.2): [
        [1.0, 0.3188677132129669, 1.097439169883728],
        [0.7862545847892761, -0.034767087548971176, 0.7368949055671692],
        [0.7768107056617737, 0.014104816131293774, 0.7956228852272034]],
}


@pytest.mark.parametrize("key", list(PINNED_STEPS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_the_wrappers_own_attack_is_pinned(key):
    name, env_id, seed, epsilon = key
    policy = _agent(name)
    env = AdversarialObservation(gym.make(env_id), epsilon=epsilon)
    policy.bind(env.observation_space, env.action_space)
    env.attach_policy(policy)
    obs, _ = env.reset(seed=seed)
    seen = []
    for _ in PINNED_STEPS[key]:
        obs, *_ = env.step(policy.act(obs[None], None)[0][0])
        seen.append(obs)
    want = np.array(PINNED_STEPS[key], dtype=np.float32).astype(float).tolist()
    assert_pinned(np.array(seen).astype(float).tolist(), want, RECORDED_ON, "observations")


PINNED_RUNS = {  # (agent, env, epsilon): returns of episodes 0..n-1 at seed 3, digest
    ("ppo", CARTPOLE, 0.05): ([500.0] * 6, "bed173d6b47c30d5"),
    ("ppo", CARTPOLE, 0.15): ([12.0, 13.0, 11.0, 10.0, 11.0, 10.0], "de0cc354ebecfd23"),
    ("sac", PENDULUM, 0.2): ([-1816.9718668284877, -1847.4047729986173, -1729.8135568105365,
                              -1437.2950299457498], "ce1f15814203c5a5"),
    ("gaussian", PENDULUM, 0.3): ([-1812.0711651263475, -1876.9160392544202,
                                   -1719.936384246036, -1356.125360421443], "b8c655931e82aba6"),
}


# Every pin at the default batch size; then, where episodes are short, the first and last
# episodes one row at a time (one slot, the last episode after the first): bit for bit the
# pinned rows. (The 500-step CartPole episodes of ppo-0.05 one row at a time would be the
# slowest check of the file; test_a_discrete_row_that_flipped_... runs the first steps of
# two at batch size 1.)
@functools.cache
def _pinned_run(key):
    """The run of a PINNED_RUNS key at the default batch size (every episode in one batch),
    made once: test_a_discrete_row_that_flipped_... reads ppo-0.05's too."""
    name, env_id, epsilon = key
    return _run(_agent(name), env_id, [_attack(epsilon)], len(PINNED_RUNS[key][0]))


@pytest.mark.parametrize("key", list(PINNED_RUNS), ids=lambda k: f"{k[0]}-{k[2]}")
def test_episode_returns_and_observations_are_pinned_for_any_batch_size(key):
    name, env_id, epsilon = key
    returns, digest = PINNED_RUNS[key]
    policy = _agent(name)
    got = _pinned_run(key)["adversarial_obs"]
    assert_pinned(got.returns.tolist(), returns, RECORDED_ON, "returns")
    if float_stack() == RECORDED_ON:  # elsewhere the observations round apart (docstring)
        assert _digest(got) == digest
    if epsilon == 0.05:
        return
    rows = [0, len(returns) - 1]
    alone = _run(policy, env_id, [_attack(epsilon)], rows, batch_size=1)["adversarial_obs"]
    assert alone.returns.tolist() == [returns[i] for i in rows]
    for seen, i in zip(alone.observations, rows, strict=True):
        assert np.array_equal(seen, got.observations[i]), i


@pytest.mark.parametrize("kwargs", [{}, {"batch_size": 1}, {"batch_size": 3, "workers": 2}])
def test_audit_numbers_are_pinned_for_any_batch_size_and_workers(kwargs):
    result = audit(_agent("ppo"), CARTPOLE, scenarios=[_attack(0.15)], episodes=5, seed=1,
                   **kwargs)
    assert result["adversarial_obs"].returns.tolist() == [12.0, 9.0, 12.0, 13.0, 11.0]


# --------------------------------------------------------------------------------------
# Rows of different attacks share a batch and stay their own


@functools.cache
def _sac_first_60_steps():
    """sac's first 60 steps of 3 Pendulum episodes under _attack(0.2), the 3 rows in one
    batch: the attack alone in its pool, read by the two tests below."""
    return _run(_agent("sac"), PENDULUM, [_attack(0.2)], 3, batch_size=3,
                max_steps=60)["adversarial_obs"]


def test_attacks_of_several_sizes_in_one_pool_are_each_the_attack_alone():
    policy = _agent("sac")
    chosen = [_attack(0.2), _attack(0.05, "narrow", steps=3),
              _attack(0.2, "noise", steps=0)]
    # 60 of Pendulum's 200 steps: every row attacked at every step all the same
    together = _run(policy, PENDULUM, chosen, 3, batch_size=9, max_steps=60)
    # Each attack alone in a pool of its own 3 rows (that a row batched with rows of the
    # same attack is the row alone is pinned above, at batch size 1): here, rows of
    # other attacks in the batch change nothing.
    for scenario in chosen:
        alone = (_sac_first_60_steps() if scenario is chosen[0] else
                 _run(policy, PENDULUM, [scenario], 3, batch_size=3,
                      max_steps=60)[scenario.name])
        assert together[scenario.name].returns.tolist() == alone.returns.tolist(), scenario.name
        assert _digest(together[scenario.name]) == _digest(alone), scenario.name


def test_a_discrete_row_that_flipped_stops_while_the_others_go_on():
    # At epsilon 0.05 most rows flip within a step or two and some never do: the
    # batched loop runs both kinds side by side. Every row equals its own attack.
    policy = _agent("ppo")
    chosen = [_attack(0.05)]
    # the pinned run of the six whole episodes, all in one batch
    many = _pinned_run(("ppo", CARTPOLE, 0.05))["adversarial_obs"]
    for episode in (0, 3):  # rows that shared their batch with five others
        # the first 100 of its 500 steps alone: rows flip, or not, at every step
        one = _run(policy, CARTPOLE, chosen, [episode], batch_size=1,
                   max_steps=100)["adversarial_obs"]
        assert len(one.observations[0]) == 100
        assert np.array_equal(one.observations[0], many.observations[episode][:100])


def test_an_attack_below_another_wrapper_attacks_in_its_own_step_with_the_same_result():
    # The runner batches only an outermost attack (an outer wrapper may use the
    # observation); below one, each step attacks its own row, to the same numbers.
    def below(env, **params):
        return gym.Wrapper(AdversarialObservation(env, **params))

    policy = _agent("sac")
    outer = _attack(0.2)
    inner = Scenario("adversarial_obs", "stress", below, dict(outer.params))
    batched = _sac_first_60_steps()
    alone = _run(policy, PENDULUM, [inner], 3, batch_size=3, max_steps=60)["adversarial_obs"]
    assert batched.returns.tolist() == alone.returns.tolist()
    assert _digest(batched) == _digest(alone)


@pytest.mark.parametrize("name", ["ppo", "sac"])
def test_each_row_of_a_batched_pgd_is_its_pgd_alone(name):
    from pytest_rlaudit.world.agents.gradients import action_scores
    from pytest_rlaudit.world.perturbations.pgd import pgd_rows

    policy, env = _agent(name), gym.make(CARTPOLE if name == "ppo" else PENDULUM)
    policy.bind(env.observation_space, env.action_space)
    scores = action_scores(policy, env.observation_space, env.action_space)
    rng = np.random.default_rng(0)
    clean = np.array([env.reset(seed=s)[0] for s in range(21)], dtype=np.float64)
    radius = np.full_like(clean, 0.1)
    start = clean + rng.uniform(-1, 1, clean.shape) * radius
    step = np.full_like(clean, 0.03)
    steps = rng.integers(0, 12, len(clean))  # rows of 0 to 11 steps side by side
    args = (clean, start, clean - radius, clean + radius, step)
    together = pgd_rows(scores, *args, steps=steps)
    for i in range(len(clean)):
        alone = pgd_rows(scores, *(a[i : i + 1] for a in args), steps=steps[i : i + 1])
        assert np.array_equal(together[i], alone[0]), i
    assert not np.array_equal(together[steps > 0], start[steps > 0])
