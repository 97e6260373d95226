"""The policy fast path: SB3 agents called through their forward pass instead of
``policy.predict``, TorchPolicy's cheap mode switch, VecNormalize applied without its
per-call copy.

The guarantee is bit-identity: every action equals what ``policy.predict`` (on the
same padded batch) returns, the same float bits, for every algorithm, action space and
observation layout, however the model's training mode was left. Models are tiny and
untrained (``net_arch=[16]``); observations come from real episodes of each env, plus
far-out rows that drive Box actions onto their bounds (so the clip and the unscaling are
exercised too).
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from pixel_envs import CentreDot, TinyCNN
from sb3_contrib import ARS, QRDQN, TQC, CrossQ, MaskablePPO
from stable_baselines3 import A2C, DQN, PPO, SAC, TD3
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from pytest_rlaudit.errors import NonFiniteOutputError
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world import scenarios
from pytest_rlaudit.world.agents import (
    MIN_TORCH_ROWS,
    NormalizedPolicy,
    SB3Policy,
    TorchPolicy,
    as_policy,
    env_for,
)
from pytest_rlaudit.world.agents.base import BasePolicy
from pytest_rlaudit.world.agents.preprocess import load_vec_normalize
from pytest_rlaudit.world.agents.torch import _pad_rows, _torch_threads

CARTPOLE, PENDULUM = "CartPole-v1", "Pendulum-v1"
ZOO = Path(__file__).parents[1] / "data" / "zoo"
CARTPOLE_RUN = ZOO / "ppo" / "CartPole-v1_1"
PENDULUM_RUN = ZOO / "a2c" / "Pendulum-v1_1"
PENDULUM_STATS = PENDULUM_RUN / "Pendulum-v1" / "vecnormalize.pkl"
ROW_COUNTS = (1, MIN_TORCH_ROWS, MIN_TORCH_ROWS + 1, 64, 128)
def small() -> dict:
    """Fresh policy_kwargs each time: SB3 writes into the dict it is given."""
    return dict(net_arch=[16])


CLIPPED = ("PPO-box", "A2C-box")  # Gaussian means, clipped to the Box (the others unscale)
# the actor-critics whose mode SB3Policy takes without the distribution (sb3_fast.mode_action)
MODES = {"PPO-discrete": "categorical", "A2C-discrete": "categorical", "PPO-box": "gaussian",
         "A2C-box": "gaussian"}

_MODELS = {  # name: (env id, factory)
    "PPO-discrete": (CARTPOLE, lambda: PPO("MlpPolicy", CARTPOLE, policy_kwargs=small(), seed=0,
                                           device="cpu")),
    "PPO-box": (PENDULUM, lambda: PPO("MlpPolicy", PENDULUM, policy_kwargs=small(), seed=0,
                                      device="cpu")),
    # gSDE with squash_output: a PPO whose Box actions are unscaled, not clipped
    "PPO-squashed": (PENDULUM, lambda: PPO("MlpPolicy", PENDULUM, use_sde=True, seed=0,
                                           device="cpu", policy_kwargs=dict(net_arch=[16],
                                                                            squash_output=True))),
    "A2C-discrete": (CARTPOLE, lambda: A2C("MlpPolicy", CARTPOLE, policy_kwargs=small(), seed=0,
                                           device="cpu")),
    "A2C-box": (PENDULUM, lambda: A2C("MlpPolicy", PENDULUM, policy_kwargs=small(), seed=0,
                                      device="cpu")),
    "DQN": (CARTPOLE, lambda: DQN("MlpPolicy", CARTPOLE, policy_kwargs=small(), buffer_size=100,
                                  seed=0, device="cpu")),
    "SAC": (PENDULUM, lambda: SAC("MlpPolicy", PENDULUM, policy_kwargs=small(), buffer_size=100,
                                  seed=0, device="cpu")),
    "TD3": (PENDULUM, lambda: TD3("MlpPolicy", PENDULUM, policy_kwargs=small(), buffer_size=100,
                                  seed=1, device="cpu")),
    # sb3-contrib: MaskablePPO has its own predict (the same without masks); CrossQ's
    # batch renormalisation makes its actions depend on the mode
    "MaskablePPO": (CARTPOLE, lambda: MaskablePPO("MlpPolicy", CARTPOLE, policy_kwargs=small(),
                                                  seed=0, device="cpu")),
    "QRDQN": (CARTPOLE, lambda: QRDQN("MlpPolicy", CARTPOLE, policy_kwargs=small(),
                                      buffer_size=100, seed=0, device="cpu")),
    "TQC": (PENDULUM, lambda: TQC("MlpPolicy", PENDULUM, policy_kwargs=small(), buffer_size=100,
                                  seed=0, device="cpu")),
    "CrossQ": (PENDULUM, lambda: CrossQ("MlpPolicy", PENDULUM, policy_kwargs=small(),
                                        buffer_size=100, seed=0, device="cpu")),
    "ARS": (PENDULUM, lambda: ARS("LinearPolicy", PENDULUM, seed=0, device="cpu")),
}


@pytest.fixture(scope="module")
def models() -> dict:
    made = {name: make() for name, (_, make) in _MODELS.items()}
    for name in CLIPPED:  # PPO's action head starts at gain 0.01: widen it to reach the bounds
        with torch.no_grad():
            made[name].policy.action_net.weight.mul_(1000.0)
    return made


def _episode_obs(env: gym.Env, n: int, seed: int = 0) -> np.ndarray:
    """``n`` observations of real episodes under seeded random actions."""
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    rows = []
    while len(rows) < n:
        rows.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    return np.stack(rows)


def _observations(env_id: str, n: int) -> np.ndarray:
    """Episode rows, the last quarter scaled far out (to put Box actions on the bounds)."""
    obs = _episode_obs(gym.make(env_id), n).astype(np.float32)
    obs[-max(1, n // 4):] *= 100.0
    return obs


def _predicted(model, obs: np.ndarray) -> np.ndarray:
    """Today's reference: ``policy.predict`` on the padded batch, as SB3Policy used to call it."""
    with _torch_threads(1):
        actions = model.policy.predict(_pad_rows(obs, MIN_TORCH_ROWS), deterministic=True)[0]
    return actions[:len(next(iter(obs.values())) if isinstance(obs, dict) else obs)]


def _same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


# ------------------------------------------------------------------ SB3: same actions


@pytest.mark.parametrize("name", list(_MODELS))
def test_actions_are_those_of_predict_bit_for_bit(models, name):
    model, env_id = models[name], _MODELS[name][0]
    policy = SB3Policy(model)
    policy.bind(model.observation_space, model.action_space)
    assert policy._fast  # the path under test
    assert policy._sac == (name == "SAC")  # SAC's mean, straight
    assert policy._mode == MODES.get(name)  # an actor-critic's mode, straight
    for n in ROW_COUNTS:
        for dtype in (np.float32, np.float64):  # MuJoCo envs give float64 observations
            obs = _observations(env_id, n).astype(dtype)
            actions, _ = policy.act(obs, None)
            _same_bits(actions, _predicted(model, obs))
    if name in CLIPPED:  # the far-out rows put some actions on the bounds: the clip ran
        assert (np.abs(actions) == 2.0).any() and (np.abs(actions) < 2.0).any()


@pytest.mark.parametrize(("name", "param"), [("PPO-discrete", "action_net.bias"),
                                             ("PPO-box", "action_net.bias"),
                                             ("SAC", "actor.mu.bias"),
                                             ("DQN", "q_net.q_net.0.bias")])
def test_non_finite_scores_or_means_are_an_error_naming_the_row(models, name, param):
    """A NaN logit, mean or Q-value is no action: the mode would be a silent argmax of
    NaNs (an infinite mean a clip to the bound), so the fast path stops, naming the row,
    where predict raises torch's error (or returns an action)."""
    model, env_id = models[name], _MODELS[name][0]
    policy = SB3Policy(model)
    policy.bind(model.observation_space, model.action_space)
    obs = _observations(env_id, MIN_TORCH_ROWS)
    tensor = model.policy.get_parameter(param)
    kept = tensor.detach().clone()
    try:
        with torch.no_grad():
            tensor.view(-1)[0] = float("nan")
        with pytest.raises(NonFiniteOutputError) as ours:
            policy.act(obs, None)
    finally:
        with torch.no_grad():
            tensor.copy_(kept)
    assert ours.value.row == 0 and "nan" in str(ours.value)


def test_a_scale_the_distribution_rejects_raises_its_error_as_predict_does(models):
    model, env_id = models["PPO-box"], _MODELS["PPO-box"][0]
    policy = SB3Policy(model)
    policy.bind(model.observation_space, model.action_space)
    obs = _observations(env_id, MIN_TORCH_ROWS)
    tensor = model.policy.get_parameter("log_std")
    kept = tensor.detach().clone()
    try:
        with torch.no_grad():
            tensor.view(-1)[0] = float("nan")
        with pytest.raises(ValueError) as predicted:
            model.policy.predict(obs, deterministic=True)
        with pytest.raises(ValueError) as ours:
            policy.act(obs, None)
    finally:
        with torch.no_grad():
            tensor.copy_(kept)
    assert "invalid values" in str(ours.value) and str(ours.value) == str(predicted.value)


@pytest.mark.parametrize("name", ["PPO-box", "SAC", "DQN"])
def test_sampled_actions_are_those_of_predict_with_the_same_seeds(models, name):
    model, env_id = models[name], _MODELS[name][0]
    obs = _observations(env_id, 5)
    policy = SB3Policy(model, deterministic=False)
    policy.bind(model.observation_space, model.action_space)
    states = [policy.initial_state(np.random.SeedSequence(i)) for i in range(5)]
    expected = []
    for i, rng in enumerate([policy.initial_state(np.random.SeedSequence(i)) for i in range(5)]):
        with torch.random.fork_rng(devices=[]), _torch_threads(1):
            torch.manual_seed(int(rng.integers(2**63 - 1)))
            expected.append(model.policy.predict(obs[i : i + 1], deterministic=False)[0][0])
    _same_bits(policy.act(obs, states)[0], np.stack(expected))


def test_image_observations_are_transposed_as_predict_does():
    env = CentreDot()
    model = PPO("CnnPolicy", env, seed=0, device="cpu",
                policy_kwargs=dict(features_extractor_class=TinyCNN, net_arch=[16]))
    assert model.observation_space.shape == (1, 16, 16)  # SB3 trains on channel-first
    policy = SB3Policy(model)
    policy.bind(env.observation_space, env.action_space)
    for n in (3, 40):
        obs = _episode_obs(CentreDot(), n)  # channel-last, as the env gives them
        _same_bits(policy.act(obs, None)[0], _predicted(model, obs))


class _TwoPart(gym.Env):
    """Dict observations: a position vector and a velocity scalar."""

    observation_space = spaces.Dict({"pos": spaces.Box(-1, 1, (3,), np.float32),
                                     "vel": spaces.Box(-5, 5, (1,), np.float32)})
    action_space = spaces.Box(-1, 1, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


def test_dict_observations_are_padded_and_converted_as_predict_does():
    model = PPO("MultiInputPolicy", _TwoPart(), policy_kwargs=small(), seed=0, device="cpu")
    policy = SB3Policy(model)
    policy.bind(model.observation_space, model.action_space)
    space = model.observation_space
    space.seed(0)
    for n in (5, 20):
        rows = [space.sample() for _ in range(n)]
        obs = {key: np.stack([r[key] for r in rows]) for key in rows[0]}
        actions, _ = policy.act(obs, None)
        assert actions.shape == (n, 2)
        _same_bits(actions, _predicted(model, obs))


# ------------------------------------------------------------------ SB3: the modes


class _DropoutExtractor(BaseFeaturesExtractor):
    """Features through dropout: actions differ between training and eval mode."""

    def __init__(self, observation_space: spaces.Box) -> None:
        super().__init__(observation_space, 16)
        self.net = nn.Sequential(nn.Linear(observation_space.shape[0], 16), nn.Dropout(0.5))

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.net(observations)


@pytest.fixture
def dropout_model():
    return PPO("MlpPolicy", PENDULUM, seed=0, device="cpu",
               policy_kwargs=dict(net_arch=[16], features_extractor_class=_DropoutExtractor))


def test_eval_mode_is_set_once_and_the_model_is_left_in_it(dropout_model, monkeypatch):
    policy = SB3Policy(dropout_model)
    policy.bind(dropout_model.observation_space, dropout_model.action_space)
    switches = []
    original = dropout_model.policy.set_training_mode
    monkeypatch.setattr(dropout_model.policy, "set_training_mode",
                        lambda mode: (switches.append(mode), original(mode)))
    dropout_model.policy.set_training_mode(True)
    switches.clear()
    obs = _observations(PENDULUM, 20)
    for _ in range(3):
        policy.act(obs, None)
    assert switches == [False]  # predict would have switched three times
    assert not any(m.training for m in dropout_model.policy.modules())  # as predict leaves it


@pytest.mark.parametrize("how", ["policy", "one submodule"])
def test_a_mode_changed_between_calls_is_put_back_to_eval(dropout_model, how):
    policy = SB3Policy(dropout_model)
    policy.bind(dropout_model.observation_space, dropout_model.action_space)
    obs = _observations(PENDULUM, 20)
    first, _ = policy.act(obs, None)
    if how == "policy":  # as model.learn() leaves it
        dropout_model.policy.set_training_mode(True)
    else:
        dropout_model.policy.features_extractor.net[1].train()
    again, _ = policy.act(obs, None)
    _same_bits(again, first)  # with the dropout active they would differ
    _same_bits(again, _predicted(dropout_model, obs))


def test_a_policy_with_its_own_predict_is_called_through_it():
    class Constant(ActorCriticPolicy):
        def predict(self, observation, state=None, episode_start=None, deterministic=False):
            return np.ones(len(observation), dtype=np.int64), state

    model = PPO(Constant, CARTPOLE, policy_kwargs=small(), seed=0, device="cpu")
    policy = SB3Policy(model)
    policy.bind(model.observation_space, model.action_space)
    assert not policy._fast
    assert policy.act(_observations(CARTPOLE, 4), None)[0].tolist() == [1, 1, 1, 1]


# ------------------------------------------------------------------ real zoo agents


class _Reference(BasePolicy):
    """Today's path for a zoo agent: ``normalize_obs`` then ``predict`` on the padded batch."""

    def __init__(self, model, vec_normalize=None) -> None:
        self.model, self.vec_normalize = model, vec_normalize

    def act(self, obs, states):
        if self.vec_normalize is not None:
            obs = self.vec_normalize.normalize_obs(obs)
        return _predicted(self.model, obs), None


@pytest.mark.parametrize("run, env_id, stats", [
    (CARTPOLE_RUN, CARTPOLE, None),
    (PENDULUM_RUN, PENDULUM, PENDULUM_STATS),
])
def test_zoo_agents_play_the_episodes_predict_plays(run, env_id, stats):
    policy = as_policy(run)
    reference = _Reference(policy.model, stats and load_vec_normalize(stats))
    nominal = scenarios.resolve(["nominal", "obs_noise"])
    ours = run_episodes(policy, env_for(policy, env_id), nominal, 3, seed=0, batch_size=4)
    theirs = run_episodes(reference, env_for(policy, env_id), nominal, 3, seed=0, batch_size=4)
    for name in ("nominal", "obs_noise"):
        np.testing.assert_array_equal(ours[name].returns, theirs[name].returns)
        np.testing.assert_array_equal(ours[name].lengths, theirs[name].lengths)


def test_vecnormalize_statistics_apply_as_normalize_obs_does_bit_for_bit():
    stats = load_vec_normalize(PENDULUM_STATS)
    policy = NormalizedPolicy(as_policy(lambda obs: obs), stats)
    policy.bind(stats.observation_space, spaces.Box(-2, 2, (1,)))
    assert policy._scale is not None  # the path under test
    obs = _observations(PENDULUM, 64) * 10  # some rows beyond clip_obs
    seen, _ = policy.act(obs, None)
    _same_bits(seen, stats.normalize_obs(obs))
    assert np.abs(seen).max() == stats.clip_obs
    policy.vec_normalize.norm_obs = False  # the policy's own copy of the statistics
    policy.bind(stats.observation_space, spaces.Box(-2, 2, (1,)))
    _same_bits(policy.act(obs, None)[0], obs)  # normalize_obs again, which leaves obs as they are


# ------------------------------------------------------------------ TorchPolicy modes


class _Actor(nn.Module):
    """A TD3-style actor with dropout (training mode would change its actions)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(3, 16), nn.Dropout(0.5), nn.Tanh())
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * torch.tanh(self.head(self.body(x)))


def _torch_policy(module: nn.Module) -> TorchPolicy:
    policy = TorchPolicy(module)
    policy.bind(spaces.Box(-8, 8, (3,)), spaces.Box(-2, 2, (1,)))
    return policy


def test_a_torch_module_in_training_mode_acts_as_in_eval_mode_and_keeps_each_mode():
    actor = _Actor()
    actor.body[1].eval()  # a mixed module: each part gets its own mode back
    obs = _observations(PENDULUM, 40)
    trained, _ = _torch_policy(actor).act(obs, None)
    assert actor.training and actor.body.training and not actor.body[1].training
    assert actor.head.training
    evaluated, _ = _torch_policy(_Actor().eval()).act(obs, None)
    _same_bits(trained, evaluated)


def test_a_module_that_overrides_train_still_gets_eval_and_train():
    calls = []

    class Frozen(_Actor):
        def train(self, mode: bool = True):
            calls.append(mode)
            return super().train(mode)

    actor = Frozen()
    actions, _ = _torch_policy(actor).act(_observations(PENDULUM, 8), None)
    assert calls == [False, True] and actor.training
    _same_bits(actions, _torch_policy(_Actor().eval()).act(_observations(PENDULUM, 8), None)[0])


def test_a_pickled_policy_travels_without_the_model_around_it(models):
    """What a Ray actor gets: the policy network, not a SAC model's replay buffer."""
    import pickle

    model = models["SAC"]
    assert model.replay_buffer is not None
    policy = SB3Policy(model)
    shipped = pickle.loads(pickle.dumps(policy))
    assert len(pickle.dumps(policy)) < len(pickle.dumps(model))
    assert shipped.model is shipped.sb3_policy and not hasattr(shipped.model, "replay_buffer")
    obs = _observations(PENDULUM, 17)
    _same_bits(shipped.act(obs, None)[0], policy.act(obs, None)[0])
