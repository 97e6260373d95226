"""The stable-baselines3 and torch adapters of ``pytest_rlaudit.world.agents``.

Every model here is tiny and untrained (``net_arch=[16]``, no ``.learn()``): the tests are
about the adapters (which algorithm, which spaces, which rows, which random streams), not
about what an agent has learned. Models are built once per module.

The central guarantee is batch invariance: an action depends only on its observation
(and, for recurrent and stochastic agents, on its own episode's state), never on how many
other episodes share the policy call, so ``run_episodes`` returns identical numbers for
every ``batch_size``. Continuous actions (SAC, TD3, torch Box modules) are where that
breaks first: there, a change in the last bit of a float action changes the trajectory.
"""

from __future__ import annotations

import pickle
import sys
import textwrap
import zipfile

import gymnasium as gym
import numpy as np
import pytest
import torch
from sb3_contrib import RecurrentPPO
from stable_baselines3 import A2C, DQN, PPO, SAC, TD3
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
from torch import nn

from pytest_rlaudit import audit, scenarios
from pytest_rlaudit.errors import PolicyError
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import MIN_TORCH_ROWS, SB3Policy, TorchPolicy, as_policy
from pytest_rlaudit.world.envs import env_spec

CARTPOLE = "CartPole-v1"
PENDULUM = "Pendulum-v1"
BATCH_SIZES = (1, 7, 64)
EPISODES = 3
# With 3 episodes x 2 scenarios every call of every batch size is padded to exactly
# MIN_TORCH_ROWS rows. 9 episodes x 2 scenarios = 18 slots: with batch_size=64 the first
# calls carry 18 rows, more than MIN_TORCH_ROWS and not a multiple of 4, which must give
# the same numbers as batch_size=7 (always padded). batch_size=1 is left out of that
# comparison only for time: it computes exactly what batch_size=7 does (one padded call
# of MIN_TORCH_ROWS rows), at 18 x the number of calls.
WIDE_EPISODES = 9
WIDE_BATCH_SIZES = (7, 64)
# Row counts of one policy call to compare with row-by-row calls: below, at and above
# MIN_TORCH_ROWS, including counts that are not multiples of 4.
ROW_COUNTS = (3, MIN_TORCH_ROWS, MIN_TORCH_ROWS + 1, MIN_TORCH_ROWS + 2, 19, 23, 33, 50)

# (env id, factory). TD3 gets another seed than SAC: with the same seed and net_arch
# their deterministic actors come out identical, and two copies would test nothing more.
_ALGOS = {
    "PPO": (CARTPOLE, lambda: PPO("MlpPolicy", CARTPOLE, policy_kwargs=dict(net_arch=[16]),
                                  seed=0, device="cpu")),
    "A2C": (CARTPOLE, lambda: A2C("MlpPolicy", CARTPOLE, policy_kwargs=dict(net_arch=[16]),
                                  seed=0, device="cpu")),
    "DQN": (CARTPOLE, lambda: DQN("MlpPolicy", CARTPOLE, policy_kwargs=dict(net_arch=[16]),
                                  buffer_size=1_000, seed=0, device="cpu")),
    "SAC": (PENDULUM, lambda: SAC("MlpPolicy", PENDULUM, policy_kwargs=dict(net_arch=[16]),
                                  buffer_size=1_000, seed=0, device="cpu")),
    "TD3": (PENDULUM, lambda: TD3("MlpPolicy", PENDULUM, policy_kwargs=dict(net_arch=[16]),
                                  buffer_size=1_000, seed=1, device="cpu")),
    "RecurrentPPO": (CARTPOLE, lambda: RecurrentPPO(
        "MlpLstmPolicy", CARTPOLE, policy_kwargs=dict(net_arch=[16], lstm_hidden_size=16),
        seed=0, device="cpu")),
}
ALGOS = tuple(_ALGOS)
CONTINUOUS = ("SAC", "TD3")


@pytest.fixture(scope="module")
def zoo() -> dict:
    """One tiny untrained model per algorithm, shared by the whole module."""
    return {name: factory() for name, (_, factory) in _ALGOS.items()}


def _obs(env_id: str, n: int, seed: int = 0) -> np.ndarray:
    """``n`` float32 observations spread over the region an episode visits."""
    rng = np.random.default_rng(seed)
    if env_id == PENDULUM:  # (cos theta, sin theta, theta dot), theta dot in [-8, 8]
        theta = rng.uniform(-np.pi, np.pi, n)
        return np.stack([np.cos(theta), np.sin(theta), rng.uniform(-8, 8, n)], 1).astype(
            np.float32)
    return (rng.normal(size=(n, 4)) * [1.0, 2.0, 0.2, 2.0]).astype(np.float32)


def _bound(policy, env_id: str):
    env = gym.make(env_id)
    policy.bind(env.observation_space, env.action_space)
    env.close()
    return policy


def _run(policy, env_id: str, batch_size: int, *, episodes: int = EPISODES,
         seed: int = 0, names=("nominal", "jitter")):
    return run_episodes(policy, env_spec(env_id), scenarios.resolve(list(names)),
                        episodes=episodes, seed=seed, batch_size=batch_size)


def _assert_same_results(runs: dict, names=("nominal", "jitter")) -> None:
    """Returns, lengths and env steps of every scenario are exactly equal across runs."""
    first_key = next(iter(runs))
    first = runs[first_key]
    for key, out in runs.items():
        for name in names:
            for field in ("returns", "lengths", "env_steps", "capped"):
                a, b = getattr(first[name], field), getattr(out[name], field)
                assert np.array_equal(a, b), (
                    f"{name} {field} differ between {first_key} and {key}:\n{a}\n{b}\n"
                    f"(differences: {np.asarray(b) - np.asarray(a)})"
                )


def _act_in_calls(policy, obs: np.ndarray, rows: int, *, recurrent: bool = False):
    """Actions (and, for recurrent policies, first-step LSTM states) in calls of ``rows``."""
    actions, states = [], []
    for i in range(0, len(obs), rows):
        chunk = obs[i : i + rows]
        a, new = policy.act(chunk, [None] * len(chunk) if recurrent else None)
        assert len(a) == len(chunk)
        actions.append(np.asarray(a))
        if recurrent:
            states.extend(np.concatenate([h.ravel(), c.ravel()]) for h, c in new)
    return np.concatenate(actions), (np.stack(states) if recurrent else None)


# --------------------------------------------------------------------------------------
# 1. Every SB3 algorithm is adapted, and its audit results do not depend on batch_size.


@pytest.mark.parametrize("algo", ALGOS)
def test_as_policy_adapts_each_sb3_algorithm(zoo, algo):
    model = zoo[algo]
    policy = as_policy(model)
    assert isinstance(policy, SB3Policy)
    assert policy.model is model
    assert policy.name == algo
    assert policy.recurrent is (algo == "RecurrentPPO")
    # deterministic, stateless unless recurrent (the LSTM state is per episode)
    assert policy.stateful is (algo == "RecurrentPPO")


@pytest.mark.parametrize("algo", ALGOS)
def test_sb3_audit_results_do_not_depend_on_batch_size(zoo, algo):
    env_id = _ALGOS[algo][0]
    policy = as_policy(zoo[algo])
    runs = {f"batch_size={b}": _run(policy, env_id, b) for b in BATCH_SIZES}
    _assert_same_results(runs)
    wide = {f"batch_size={b}": _run(policy, env_id, b, episodes=WIDE_EPISODES)
            for b in WIDE_BATCH_SIZES}
    _assert_same_results(wide)
    out = wide["batch_size=7"]
    for name in ("nominal", "jitter"):  # the first episodes do not depend on the count
        for field in ("returns", "lengths", "env_steps"):
            assert np.array_equal(getattr(out[name], field)[:EPISODES],
                                  getattr(runs["batch_size=1"][name], field))
    assert out["nominal"].returns.shape == (WIDE_EPISODES,)
    assert (out["nominal"].lengths >= 1).all()
    assert not out["nominal"].capped.any()
    if env_id == PENDULUM:  # TimeLimit(200); jitter holds each action for 1-3 env steps
        assert (out["nominal"].env_steps == 200).all()
        assert (out["jitter"].env_steps == 200).all()
        assert (out["jitter"].lengths < 200).all()


@pytest.mark.parametrize("algo", CONTINUOUS)
def test_sb3_actions_do_not_depend_on_rows_per_call(zoo, algo):
    """The row-level form of batch invariance, on many observations.

    Each observation's action must be bit-for-bit the one it gets alone, whatever the
    number of rows in the call (the runner's calls have any size from 1 to batch_size).
    """
    env_id = _ALGOS[algo][0]
    policy = _bound(as_policy(zoo[algo]), env_id)
    obs = _obs(env_id, 1_500)
    alone, _ = _act_in_calls(policy, obs, 1)
    bad = {}
    for rows in ROW_COUNTS:
        actions, _ = _act_in_calls(policy, obs, rows)
        if not np.array_equal(actions, alone):
            differ = np.flatnonzero((actions != alone).reshape(len(obs), -1).any(1))
            bad[rows] = (len(differ), sorted({int(i % rows) for i in differ})[:6],
                         float(np.abs(actions - alone).max()))
    assert not bad, (
        "actions depend on the number of rows per policy call "
        "{rows: (observations that differ, their positions in the call, max |diff|)}: "
        f"{bad}"
    )


@pytest.mark.parametrize("algo", ["PPO", "DQN", "RecurrentPPO"])
def test_sb3_discrete_and_recurrent_rows_do_not_depend_on_rows_per_call(zoo, algo):
    """Same check for discrete agents; for RecurrentPPO also the new LSTM states."""
    recurrent = algo == "RecurrentPPO"
    policy = _bound(as_policy(zoo[algo]), CARTPOLE)
    obs = _obs(CARTPOLE, 50)
    alone = _act_in_calls(policy, obs, 1, recurrent=recurrent)
    for rows in (MIN_TORCH_ROWS + 2, 50):
        actions, states = _act_in_calls(policy, obs, rows, recurrent=recurrent)
        assert np.array_equal(actions, alone[0]), rows
        if recurrent:
            assert np.array_equal(states, alone[1]), rows


# --------------------------------------------------------------------------------------
# 2. deterministic=True is the model's own deterministic prediction.


@pytest.mark.parametrize("algo", ["PPO", "SAC"])
def test_deterministic_actions_match_model_predict(zoo, algo):
    model = zoo[algo]
    env_id = _ALGOS[algo][0]
    policy = _bound(as_policy(model), env_id)
    obs = _obs(env_id, MIN_TORCH_ROWS, seed=1)

    # A call of exactly MIN_TORCH_ROWS rows is not padded: the same computation as
    # model.predict on the same batch, so the actions are bit-for-bit equal.
    batch_actions, _ = policy.act(obs, None)
    expected, _ = model.predict(obs, deterministic=True)
    assert batch_actions.dtype == expected.dtype
    np.testing.assert_array_equal(batch_actions, expected)

    for o in obs[:5]:
        single, _ = model.predict(o, deterministic=True)  # one unbatched observation
        action, _ = policy.act(o[None], None)
        assert action.shape == (1, *np.shape(single))
        if algo == "SAC":
            # model.predict runs a 1-row matrix product while the adapter pads the call to
            # MIN_TORCH_ROWS rows; torch's 1-row kernel may round the last bit differently
            # (measured: 1 ulp, 1.2e-7, for TD3 here), so Box actions agree to float32
            # precision, not bitwise.
            np.testing.assert_allclose(action[0], single, rtol=0, atol=1e-6)
            assert zoo[algo].action_space.contains(action[0])
        else:
            assert action[0] == single


# --------------------------------------------------------------------------------------
# 3. SB3 zips: the algorithm is read from the file; errors name the file.


@pytest.mark.parametrize("algo", ALGOS)
def test_zip_is_loaded_with_the_algorithm_it_was_saved_with(zoo, tmp_path, algo):
    model = zoo[algo]
    env_id = _ALGOS[algo][0]
    path = tmp_path / f"agent_{algo.lower()}.zip"
    model.save(path)
    policy = as_policy(str(path))
    assert isinstance(policy, SB3Policy)
    assert type(policy.model).__name__ == algo
    assert path.name in policy.name
    # the loaded weights act exactly like the saved model
    obs = _obs(env_id, MIN_TORCH_ROWS, seed=2)
    _bound(policy, env_id)
    original = _bound(as_policy(model), env_id)
    states = [None] * len(obs) if policy.stateful else None
    np.testing.assert_array_equal(policy.act(obs, states)[0], original.act(obs, states)[0])


def test_zip_path_may_be_a_pathlike(zoo, tmp_path):
    path = tmp_path / "agent.zip"
    zoo["DQN"].save(path)
    assert type(as_policy(path).model).__name__ == "DQN"


@pytest.mark.parametrize(("saved", "algo", "expected"), [
    ("PPO", "A2C", "A2C"),
    ("PPO", "a2c", "A2C"),  # case-insensitive
    ("A2C", "PPO", "PPO"),
])
def test_algo_argument_overrides_the_file(zoo, tmp_path, saved, algo, expected):
    path = tmp_path / "agent.zip"
    zoo[saved].save(path)
    assert type(as_policy(str(path), algo=algo).model).__name__ == expected


def test_unknown_algo_is_a_policy_error(zoo, tmp_path):
    path = tmp_path / "agent.zip"
    zoo["PPO"].save(path)
    with pytest.raises(PolicyError, match="unknown SB3 algorithm 'PPOO'") as info:
        as_policy(str(path), algo="PPOO")
    assert "RecurrentPPO" in str(info.value)  # lists the known ones


def test_algo_argument_naming_the_wrong_algorithm_is_a_policy_error(zoo, tmp_path):
    path = tmp_path / "agent.zip"
    zoo["PPO"].save(path)
    with pytest.raises(PolicyError) as info:
        as_policy(str(path), algo="SAC")
    assert str(path) in str(info.value)


@pytest.mark.parametrize("algo", [None, "PPO"])
@pytest.mark.parametrize("name", ["agent.zip", "agent.txt"])
def test_non_zip_file_is_a_policy_error_naming_it(tmp_path, name, algo):
    path = tmp_path / name
    path.write_text("not a model\n")
    with pytest.raises(PolicyError) as info:
        as_policy(str(path), algo=algo)
    assert str(path) in str(info.value)


def test_zip_without_sb3_data_is_a_policy_error_naming_it(tmp_path):
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "not an SB3 model")
    with pytest.raises(PolicyError, match="not a stable-baselines3 model zip") as info:
        as_policy(str(path))
    assert str(path) in str(info.value)


@pytest.mark.parametrize("name", ["missing.zip", "missing"])
def test_missing_agent_file_is_a_policy_error_naming_it(tmp_path, name):
    path = tmp_path / name
    with pytest.raises(PolicyError, match="does not exist") as info:
        as_policy(str(path))
    assert str(path) in str(info.value)


# --------------------------------------------------------------------------------------
# 4. VecNormalize statistics are applied before the policy.


@pytest.fixture(scope="module")
def vec_normalize(tmp_path_factory):
    """A VecNormalize with non-trivial statistics from 300 random CartPole steps."""
    venv = VecNormalize(DummyVecEnv([lambda: gym.make(CARTPOLE)]), training=True)
    venv.seed(0)
    venv.action_space.seed(0)
    venv.reset()
    for _ in range(300):
        venv.step(np.array([venv.action_space.sample()]))
    assert venv.obs_rms.count > 300
    assert not np.allclose(venv.obs_rms.var, 1.0)
    path = tmp_path_factory.mktemp("vecnorm") / "vecnormalize.pkl"
    venv.save(str(path))
    yield venv, path
    venv.close()


@pytest.mark.parametrize("source", ["object", "path", "str"])
def test_vec_normalize_is_applied_before_the_policy(zoo, vec_normalize, source):
    venv, path = vec_normalize
    model = zoo["PPO"]
    given = {"object": venv, "path": path, "str": str(path)}[source]
    policy = _bound(as_policy(model, vec_normalize=given), CARTPOLE)
    obs = _obs(CARTPOLE, MIN_TORCH_ROWS, seed=3)
    expected, _ = model.predict(venv.normalize_obs(obs), deterministic=True)
    unnormalized, _ = model.predict(obs, deterministic=True)
    assert not np.array_equal(expected, unnormalized)  # else this test proves nothing
    np.testing.assert_array_equal(policy.act(obs, None)[0], expected)
    for i in range(3):  # one observation per call (padded) too
        assert policy.act(obs[i : i + 1], None)[0][0] == expected[i]


def test_a_given_vec_normalize_is_copied_not_switched_off(zoo, vec_normalize):
    # Usually the training env: after an audit it must go on updating its statistics and
    # normalising rewards, and the audit must keep the statistics it started with.
    venv, _ = vec_normalize
    flags = (venv.training, venv.norm_reward)
    policy = _bound(as_policy(zoo["PPO"], vec_normalize=venv), CARTPOLE)
    assert (venv.training, venv.norm_reward) == flags == (True, True)
    obs = _obs(CARTPOLE, MIN_TORCH_ROWS, seed=5)
    before = policy.act(obs, None)[0]
    mean = venv.obs_rms.mean.copy()
    saved = (venv.obs_rms.mean.copy(), venv.obs_rms.var.copy(), venv.obs_rms.count)
    try:
        venv.obs_rms.update(obs * 50.0)  # training goes on: the statistics move
        assert not np.allclose(venv.obs_rms.mean, mean)
        np.testing.assert_array_equal(policy.act(obs, None)[0], before)
    finally:
        venv.obs_rms.mean, venv.obs_rms.var, venv.obs_rms.count = saved


def test_vec_normalize_runs_in_an_audit_and_stays_batch_invariant(zoo, vec_normalize):
    _, path = vec_normalize
    policy = as_policy(zoo["PPO"], vec_normalize=path)
    runs = {b: _run(policy, CARTPOLE, b, episodes=3) for b in (1, 8)}
    _assert_same_results(runs)


def test_vec_normalize_missing_file_is_a_policy_error_naming_it(zoo, tmp_path):
    path = tmp_path / "missing_vecnormalize.pkl"
    with pytest.raises(PolicyError, match="does not exist") as info:
        as_policy(zoo["PPO"], vec_normalize=path)
    assert str(path) in str(info.value)


def test_vec_normalize_file_of_something_else_is_a_policy_error(zoo, tmp_path):
    path = tmp_path / "not_vecnormalize.pkl"
    path.write_bytes(pickle.dumps({"obs_rms": None}))
    with pytest.raises(PolicyError, match="does not hold a VecNormalize") as info:
        as_policy(zoo["PPO"], vec_normalize=str(path))
    assert str(path) in str(info.value)


# --------------------------------------------------------------------------------------
# 5. deterministic=False: each episode samples from its own seeded stream.


def test_stochastic_policy_is_reproducible_and_batch_invariant(zoo):
    policy = as_policy(zoo["PPO"], deterministic=False)
    assert policy.stateful and not policy.deterministic
    torch_state = torch.random.get_rng_state()
    first = _run(policy, CARTPOLE, 1, episodes=4)
    again = _run(policy, CARTPOLE, 1, episodes=4)
    batched = _run(policy, CARTPOLE, 8, episodes=4)
    _assert_same_results({"run 1": first, "run 2": again, "batch_size=8": batched})
    # the adapter samples from forked torch streams: the global torch RNG is untouched
    assert torch.equal(torch.random.get_rng_state(), torch_state)

    other_seed = _run(policy, CARTPOLE, 8, episodes=4, seed=1)
    assert not np.array_equal(other_seed["nominal"].returns, first["nominal"].returns)
    # and sampling really happens: the stochastic runs differ from the deterministic one
    deterministic = _run(as_policy(zoo["PPO"]), CARTPOLE, 8, episodes=4)
    assert not np.array_equal(deterministic["nominal"].returns, first["nominal"].returns)


def test_stochastic_recurrent_policy_is_refused(zoo):
    with pytest.raises(PolicyError, match="deterministic=False"):
        as_policy(zoo["RecurrentPPO"], deterministic=False)


# --------------------------------------------------------------------------------------
# 6. An agent audited on an env with other spaces fails early, naming both.


def test_observation_space_mismatch_in_run_episodes(zoo):
    policy = as_policy(zoo["PPO"])
    with pytest.raises(PolicyError) as info:
        _run(policy, PENDULUM, 4, episodes=2)
    message = str(info.value)
    assert "Box(4,)" in message and "Box(3,)" in message


def test_observation_space_mismatch_in_audit(zoo):
    with pytest.raises(PolicyError) as info:
        audit(zoo["PPO"], PENDULUM, scenarios=["jitter"], episodes=2)
    message = str(info.value)
    assert "Box(4,)" in message and "Box(3,)" in message


def test_action_space_mismatch_in_audit(zoo):
    class ThreeActions(gym.ActionWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.action_space = gym.spaces.Discrete(3)

        def action(self, action):
            return min(int(action), 1)

    with pytest.raises(PolicyError) as info:
        audit(zoo["PPO"], lambda: ThreeActions(gym.make(CARTPOLE)), scenarios=["jitter"],
              episodes=2)
    message = str(info.value)
    assert "Discrete(2)" in message and "Discrete(3)" in message


def test_box_action_bounds_mismatch_is_refused(zoo):
    rescaled = lambda: gym.wrappers.RescaleAction(gym.make(PENDULUM), np.float32(-1), np.float32(1))  # noqa: E731
    with pytest.raises(PolicyError, match="action space"):
        audit(zoo["SAC"], rescaled, scenarios=["jitter"], episodes=2)


def test_continuous_agent_on_discrete_actions_is_refused_naming_both(zoo):
    # The observations fit (3 floats), the actions do not: a Box agent's bounds were once
    # compared with the env's before its type, and a Discrete space has no bounds
    # (AttributeError: 'Discrete' object has no attribute 'low').
    pendulum = gym.make(PENDULUM)
    with pytest.raises(PolicyError) as info:
        as_policy(zoo["SAC"]).bind(pendulum.observation_space, gym.spaces.Discrete(2))
    pendulum.close()
    message = str(info.value)
    assert "acts in Box" in message and "Discrete(2)" in message


def test_continuous_agent_on_a_discrete_env_is_refused(zoo):
    with pytest.raises(PolicyError) as info:
        _run(as_policy(zoo["SAC"]), CARTPOLE, 4, episodes=2)
    message = str(info.value)
    assert "Box(3,)" in message and "Box(4,)" in message


# --------------------------------------------------------------------------------------
# 7. torch nn.Module agents.


class PendulumActor(nn.Module):
    """An MLP with a tanh head scaled to Pendulum's torque range [-2, 2]."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
        self.modes: list[bool] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.modes.append(self.training)
        return 2.0 * torch.tanh(self.net(x))


@pytest.fixture()
def cartpole_module():
    with torch.random.fork_rng(devices=[]):  # seeded weights, global RNG left alone
        torch.manual_seed(0)
        return nn.Linear(4, 2)  # logits; the adapter takes the argmax


@pytest.fixture()
def pendulum_module():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return PendulumActor()


def test_torch_module_is_adapted_as_torch_policy(cartpole_module):
    policy = as_policy(cartpole_module)
    assert isinstance(policy, TorchPolicy)
    assert policy.module is cartpole_module
    assert policy.name == "Linear"


def test_torch_logits_module_acts_by_argmax(cartpole_module):
    policy = _bound(as_policy(cartpole_module), CARTPOLE)
    obs = _obs(CARTPOLE, 20)
    with torch.no_grad():
        logits = cartpole_module(torch.as_tensor(obs)).numpy()
    actions, states = policy.act(obs, None)
    assert states is None
    np.testing.assert_array_equal(actions, logits.argmax(axis=1))


@pytest.mark.parametrize("env_id", [CARTPOLE, PENDULUM])
def test_torch_audit_results_do_not_depend_on_batch_size(cartpole_module, pendulum_module,
                                                          env_id):
    module = cartpole_module if env_id == CARTPOLE else pendulum_module
    policy = as_policy(module)
    runs = {f"batch_size={b}": _run(policy, env_id, b) for b in BATCH_SIZES}
    _assert_same_results(runs)
    wide = {f"batch_size={b}": _run(policy, env_id, b, episodes=WIDE_EPISODES)
            for b in WIDE_BATCH_SIZES}
    _assert_same_results(wide)


def test_torch_box_actions_do_not_depend_on_rows_per_call(pendulum_module):
    policy = _bound(as_policy(pendulum_module), PENDULUM)
    obs = _obs(PENDULUM, 1_000)
    alone, _ = _act_in_calls(policy, obs, 1)
    assert alone.shape == (len(obs), 1)
    assert (np.abs(alone) <= 2.0).all()
    for rows in ROW_COUNTS:
        actions, _ = _act_in_calls(policy, obs, rows)
        differ = int((actions != alone).sum())
        assert differ == 0, (
            f"{differ} of {len(obs)} actions change when computed {rows} rows per call "
            f"(max |diff| {np.abs(actions - alone).max():.3g})"
        )


def test_torch_module_runs_in_eval_mode_and_training_mode_is_restored(pendulum_module):
    pendulum_module.train()
    returns = _run(as_policy(pendulum_module), PENDULUM, 4, episodes=2, names=("nominal", "jitter"))
    assert returns["jitter"].returns.shape == (2,)
    assert pendulum_module.modes and not any(pendulum_module.modes)  # eval during calls
    assert pendulum_module.training
    assert all(m.training for m in pendulum_module.modules())


def test_torch_module_in_eval_mode_stays_in_eval_mode(pendulum_module):
    pendulum_module.eval()
    _run(as_policy(pendulum_module), PENDULUM, 4, episodes=2, names=("nominal",))
    assert not pendulum_module.training
    assert not any(m.training for m in pendulum_module.modules())


# --------------------------------------------------------------------------------------
# 8. "module:attribute" strings.

_AGENT_MODULE = '''
import numpy as np

CALLS = []


def make_agent():
    """A zero-argument factory: called, and its result is the agent."""
    CALLS.append("make_agent")
    return lambda obs: (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def controller(obs):
    """A plain obs_batch -> action_batch function: used as is."""
    CALLS.append("controller")
    return (obs[:, 2] > 0).astype(np.int64)


def make_torch_agent():
    import torch
    return torch.nn.Linear(4, 2)


class Holder:
    agent = staticmethod(controller)
'''


@pytest.fixture()
def agent_module(tmp_path, monkeypatch, request):
    """A module written to tmp_path and importable under a name unique to the test."""
    name = f"pytest_rlaudit_testmod_{abs(hash(request.node.nodeid)):x}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(_AGENT_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_import_string_calls_a_zero_argument_factory(agent_module):
    policy = as_policy(f"{agent_module}:make_agent")
    module = sys.modules[agent_module]
    assert module.CALLS == ["make_agent"]
    actions, _ = policy.act(np.array([[0, 0, 0.1, 0], [0, 0, -0.1, 0]]), None)
    assert actions.tolist() == [1, 0]
    out = _run(policy, CARTPOLE, 4, episodes=2, names=("nominal",))
    assert (out["nominal"].returns > 0).all()


def test_import_string_uses_a_plain_function_as_is(agent_module):
    policy = as_policy(f"{agent_module}:controller")
    module = sys.modules[agent_module]
    assert module.CALLS == []  # not called on import: it takes an observation batch
    assert policy.fn is module.controller
    actions, _ = policy.act(np.array([[0, 0, 0.1, 0], [0, 0, -0.1, 0]]), None)
    assert actions.tolist() == [1, 0]
    assert module.CALLS == ["controller"]


def test_import_string_with_dotted_attribute(agent_module):
    policy = as_policy(f"{agent_module}:Holder.agent")
    assert policy.fn is sys.modules[agent_module].controller


def test_import_string_factory_of_a_torch_module(agent_module):
    policy = as_policy(f"{agent_module}:make_torch_agent")
    assert isinstance(policy, TorchPolicy)
    assert isinstance(policy.module, nn.Linear)


def test_import_string_missing_module_is_a_policy_error(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PolicyError, match="pytest_rlaudit_no_such_module"):
        as_policy("pytest_rlaudit_no_such_module:agent")


def test_import_string_missing_attribute_is_a_policy_error(agent_module):
    with pytest.raises(PolicyError) as info:
        as_policy(f"{agent_module}:no_such_agent")
    message = str(info.value)
    assert agent_module in message and "no_such_agent" in message
