"""Torch modules in the shapes of CleanRL's and RSL-RL's agents, and state-dict checkpoints.

Each module below is a few-unit copy of a CleanRL (or RSL-RL) class: the same attribute
names, methods and outputs as the original, seeded weights, no training. The tests check
that :class:`TorchPolicy` reads each shape's deterministic action the way the shape means
it (recomputed here by hand from the module's layers, on the observations of a real
rollout), that results do not depend on the audit's batch size, that the one sampling
rule is reproducible episode by episode, and that :func:`load_checkpoint` reads every
checkpoint layout and says clearly which file does not fit and why.
"""

from __future__ import annotations

import re
from itertools import pairwise

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical, Normal

from pytest_rlaudit import scenarios
from pytest_rlaudit.errors import PolicyError
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import TorchPolicy, as_policy
from pytest_rlaudit.world.agents.checkpoints import load_checkpoint
from pytest_rlaudit.world.envs import env_spec

CARTPOLE = "CartPole-v1"
PENDULUM = "Pendulum-v1"
MOUNTAINCAR = "MountainCarContinuous-v0"
BATCH_SIZES = (1, 7, 64)
EPISODES = 3
OBS_DIM = {CARTPOLE: 4, PENDULUM: 3, MOUNTAINCAR: 2}
BOUND = {PENDULUM: 2.0, MOUNTAINCAR: 1.0}  # both Box(-b, b, (1,))

# --------------------------------------------------------------------------------------
# The shapes, after cleanrl/ppo.py, ppo_continuous_action.py, dqn.py,
# sac_continuous_action.py, td3_continuous_action.py (ddpg's Actor is the same) and
# rsl_rl/modules/actor_critic.py.


def _mlp(*sizes: int, act: type[nn.Module] = nn.Tanh) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(pairwise(sizes)):
        layers += [nn.Linear(a, b)] + ([act()] if i < len(sizes) - 2 else [])
    return nn.Sequential(*layers)


class PPOAgent(nn.Module):
    """cleanrl/ppo.py: ``actor`` gives logits, ``get_action_and_value`` samples."""

    def __init__(self, env_id: str = CARTPOLE, hidden: int = 8) -> None:
        super().__init__()
        self.critic = _mlp(OBS_DIM[env_id], hidden, 1)
        self.actor = _mlp(OBS_DIM[env_id], hidden, 2)

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


class PPOContinuousAgent(nn.Module):
    """cleanrl/ppo_continuous_action.py: ``actor_mean`` and a state-independent log std.

    The head is scaled up: CleanRL initialises it at std 0.01, so an untrained mean would
    never leave the bounds and the clipping would go untested.
    """

    def __init__(self, env_id: str = MOUNTAINCAR, hidden: int = 8) -> None:
        super().__init__()
        self.critic = _mlp(OBS_DIM[env_id], hidden, 1)
        self.actor_mean = _mlp(OBS_DIM[env_id], hidden, 1)
        with torch.no_grad():
            self.actor_mean[-1].weight.mul_(8.0)
        self.actor_logstd = nn.Parameter(torch.zeros(1, 1))

    def get_action_and_value(self, x, action=None):
        mean = self.actor_mean(x)
        probs = Normal(mean, torch.exp(self.actor_logstd.expand_as(mean)))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


class QNetwork(nn.Module):
    """cleanrl/dqn.py: ``forward`` gives one Q-value per action."""

    def __init__(self, env_id: str = CARTPOLE, hidden: int = 8) -> None:
        super().__init__()
        self.network = _mlp(OBS_DIM[env_id], hidden, hidden, 2, act=nn.ReLU)

    def forward(self, x):
        return self.network(x)


def _action_buffers(module: nn.Module, env_id: str) -> None:
    """CleanRL's ``action_scale`` and ``action_bias`` buffers for the env's Box."""
    space = gym.make(env_id).action_space
    module.register_buffer("action_scale", torch.tensor((space.high - space.low) / 2.0))
    module.register_buffer("action_bias", torch.tensor((space.high + space.low) / 2.0))


class SACActor(nn.Module):
    """cleanrl/sac_continuous_action.py: ``forward`` gives (mean, log_std); ``get_action``
    gives (sampled action, log_prob, tanh-squashed and scaled mean)."""

    def __init__(self, env_id: str = PENDULUM, hidden: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(OBS_DIM[env_id], hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc_mean = nn.Linear(hidden, 1)
        self.fc_logstd = nn.Linear(hidden, 1)
        _action_buffers(self, env_id)

    def forward(self, x):
        x = F.relu(self.fc2(F.relu(self.fc1(x))))
        log_std = -5 + 0.5 * (2 - -5) * (torch.tanh(self.fc_logstd(x)) + 1)
        return self.fc_mean(x), log_std

    def get_action(self, x):
        mean, log_std = self(x)
        normal = Normal(mean, log_std.exp())
        x_t = normal.rsample()
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t) - torch.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
        mean = torch.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob.sum(1, keepdim=True), mean


class TD3Actor(nn.Module):
    """cleanrl/td3_continuous_action.py (and ddpg's): ``forward`` gives scaled actions."""

    def __init__(self, env_id: str = PENDULUM, hidden: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(OBS_DIM[env_id], hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc_mu = nn.Linear(hidden, 1)
        _action_buffers(self, env_id)

    def forward(self, x):
        x = F.relu(self.fc2(F.relu(self.fc1(x))))
        return torch.tanh(self.fc_mu(x)) * self.action_scale + self.action_bias


class TD3QNetwork(nn.Module):
    """cleanrl/td3_continuous_action.py's critic: saved beside the actor in one tuple."""

    def __init__(self, env_id: str = PENDULUM, hidden: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(OBS_DIM[env_id] + 1, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 1)


class RSLActorCritic(nn.Module):
    """rsl_rl ActorCritic: ``actor`` gives the Gaussian mean, ``forward`` is not defined.

    The head is scaled up (x4) so that the untrained mean leaves Pendulum's bounds at times.
    """

    def __init__(self, env_id: str = PENDULUM, hidden: int = 8) -> None:
        super().__init__()
        self.actor = _mlp(OBS_DIM[env_id], hidden, hidden, 1, act=nn.ELU)
        with torch.no_grad():
            self.actor[-1].weight.mul_(4.0)
            self.actor[-1].bias.mul_(4.0)
        self.critic = _mlp(OBS_DIM[env_id], hidden, hidden, 1, act=nn.ELU)
        self.std = nn.Parameter(torch.ones(1))

    def forward(self):
        raise NotImplementedError

    def act_inference(self, observations):
        return self.actor(observations)


class SamplingAgent(nn.Module):
    """A PPO-style agent whose only action method samples (no actor, no actor_mean)."""

    def __init__(self, env_id: str = CARTPOLE, hidden: int = 8) -> None:
        super().__init__()
        self.pi = _mlp(OBS_DIM[env_id], hidden, 2)
        self.v = _mlp(OBS_DIM[env_id], hidden, 1)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.pi(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.v(x)


def build(cls: type[nn.Module], seed: int = 0, **kwargs) -> nn.Module:
    """``cls(**kwargs)`` with weights from torch seed ``seed``; the global RNG left alone."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return cls(**kwargs)


def _t(obs: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.asarray(obs, dtype=np.float32))


# Each deterministic shape: (class, env, rule auto must choose, the action computed by
# hand from the module's layers, not through TorchPolicy).
@torch.no_grad()
def _sac_mean(m: SACActor, obs: np.ndarray) -> np.ndarray:
    x = F.relu(m.fc2(F.relu(m.fc1(_t(obs)))))
    return (torch.tanh(m.fc_mean(x)) * m.action_scale + m.action_bias).numpy()


SHAPES = {
    "ppo": (PPOAgent, CARTPOLE, "actor",
            lambda m, o: m.actor(_t(o)).argmax(1).numpy()),
    "dqn": (QNetwork, CARTPOLE, "forward",
            lambda m, o: m(_t(o)).argmax(1).numpy()),
    "ppo_continuous": (PPOContinuousAgent, MOUNTAINCAR, "actor_mean",
                       lambda m, o: np.clip(m.actor_mean(_t(o)).numpy(), -1.0, 1.0)),
    "sac": (SACActor, PENDULUM, "get_action", _sac_mean),
    "td3": (TD3Actor, PENDULUM, "forward", lambda m, o: m(_t(o)).numpy()),
    "rsl_rl": (RSLActorCritic, PENDULUM, "actor",
               lambda m, o: np.clip(m.actor(_t(o)).numpy(), -2.0, 2.0)),
}
ALL_SHAPES = (*SHAPES, "sampling")
# Weight seeds whose untrained module acts in a way the tests can tell apart (seed 0's DQN
# always pushes left; its continuous PPO mean is always beyond the bounds).
SEEDS = {"dqn": 2, "ppo_continuous": 2}


def _module(shape: str, **kwargs) -> nn.Module:
    if shape == "sampling":
        return build(SamplingAgent, **kwargs)
    return build(SHAPES[shape][0], SEEDS.get(shape, 0), **kwargs)


def _env_of(shape: str) -> str:
    return CARTPOLE if shape == "sampling" else SHAPES[shape][1]


def _run(policy, env_id: str, batch_size: int = 7, *, episodes=EPISODES, seed: int = 0,
         names=("nominal", "jitter"), record: bool = False):
    return run_episodes(policy, env_spec(env_id), scenarios.resolve(list(names)),
                        episodes=episodes, seed=seed, batch_size=batch_size, record=record)


def _bound(policy: TorchPolicy, env_id: str) -> TorchPolicy:
    env = gym.make(env_id)
    policy.bind(env.observation_space, env.action_space)
    env.close()
    return policy


# --------------------------------------------------------------------------------------
# 1. Each shape gets its rule, and the rollout's actions follow it.


@pytest.mark.parametrize("shape", ALL_SHAPES)
def test_auto_rule_follows_the_module_shape(shape):
    module = _module(shape)
    policy = as_policy(module)  # as_policy builds TorchPolicy(module, torch_threads=...)
    assert isinstance(policy, TorchPolicy) and policy.module is module
    expected = "get_action_and_value" if shape == "sampling" else SHAPES[shape][2]
    assert policy.rule == expected
    assert policy.stateful == (shape == "sampling")
    assert repr(policy) == f"<TorchPolicy {type(module).__name__} rule={expected}>"


@pytest.fixture(scope="module")
def recorded():
    """shape -> (its module, a recorded 2-episode nominal run of it), each made once: the
    shape-rule and the clipping tests read the same run, neither changes it."""
    made: dict[str, tuple[nn.Module, object]] = {}

    def get(shape: str):
        if shape not in made:
            module = _module(shape)
            made[shape] = module, _run(TorchPolicy(module), SHAPES[shape][1], episodes=2,
                                       names=("nominal",), record=True)
        return made[shape]

    return get


@pytest.mark.parametrize("shape", SHAPES)
def test_rollout_actions_follow_the_shape_rule(shape, recorded):
    _, env_id, _, by_hand = SHAPES[shape]
    module, out = recorded(shape)
    batch = out["nominal"]
    obs = np.concatenate(batch.observations)
    taken = np.concatenate(batch.actions)
    with torch.no_grad():
        expected = by_hand(module, obs)
    if env_id == CARTPOLE:
        np.testing.assert_array_equal(taken, expected)
        assert 0 < taken.mean() < 1  # both actions occur: an argmax over the wrong axis would not
    else:
        # one big call here against padded 16-row calls there: equal up to float rounding
        np.testing.assert_allclose(taken, expected.reshape(taken.shape), rtol=1e-5, atol=1e-6)
        assert np.unique(taken).size > 10  # the actions really depend on the observation


@pytest.mark.parametrize("shape", ["ppo_continuous", "rsl_rl"])
def test_gaussian_means_are_clipped_to_the_action_bounds(shape, recorded):
    _, env_id, rule, _ = SHAPES[shape]
    module, out = recorded(shape)
    obs = np.concatenate(out["nominal"].observations)
    taken = np.concatenate(out["nominal"].actions)
    with torch.no_grad():
        raw = getattr(module, rule)(_t(obs)).numpy().reshape(taken.shape)
    bound = BOUND[env_id]
    outside = np.abs(raw) > bound
    assert outside.any() and not outside.all(), "the fixture should cross the bounds sometimes"
    np.testing.assert_array_equal(np.abs(taken[outside]), bound)
    np.testing.assert_allclose(taken[~outside], raw[~outside], rtol=1e-5, atol=1e-6)


def test_a_scaled_actor_is_not_clipped():
    """TD3/DDPG actors squash into the bounds themselves; a wider output is an agent bug
    the runner must report, not hide."""
    module = build(TD3Actor)
    with torch.no_grad():
        module.action_scale.mul_(3.0)  # a mis-scaled actor: up to 3x the torque bound
    with pytest.raises(Exception, match="not in the action space"):
        _run(TorchPolicy(module), PENDULUM, episodes=1, names=("nominal",))


@pytest.mark.parametrize("shape", ALL_SHAPES)
def test_returns_do_not_depend_on_batch_size(shape):
    # continuous PPO on Pendulum here: an untrained MountainCar episode lasts 999 steps
    env_id = PENDULUM if shape == "ppo_continuous" else _env_of(shape)
    policy = TorchPolicy(_module(shape, env_id=env_id))
    runs = {b: _run(policy, env_id, b) for b in BATCH_SIZES}
    for name in ("nominal", "jitter"):
        first = runs[BATCH_SIZES[0]][name]
        for b in BATCH_SIZES[1:]:
            np.testing.assert_array_equal(runs[b][name].returns, first.returns,
                                          err_msg=f"{shape} {name} batch_size={b}")
            np.testing.assert_array_equal(runs[b][name].lengths, first.lengths)


# --------------------------------------------------------------------------------------
# 2. The sampling rule: seeded per episode, reproducible, global RNG untouched.


def test_sampling_is_reproducible_and_keyed_on_the_episode_seed():
    policy = TorchPolicy(build(SamplingAgent))
    first = _run(policy, CARTPOLE, episodes=6, names=("nominal",))["nominal"]
    again = _run(policy, CARTPOLE, episodes=6, names=("nominal",))["nominal"]
    np.testing.assert_array_equal(first.returns, again.returns)
    # episode 4 alone plays exactly as it did among the others
    alone = _run(policy, CARTPOLE, episodes=[4], names=("nominal",))["nominal"]
    assert alone.returns[0] == first.returns[4]
    other = _run(policy, CARTPOLE, episodes=6, seed=100, names=("nominal",))["nominal"]
    assert not np.array_equal(other.returns, first.returns)


def test_sampling_draws_differ_between_seeds_on_the_same_observations():
    policy = _bound(TorchPolicy(build(SamplingAgent)), CARTPOLE)
    obs = np.zeros((64, 4), dtype=np.float32)  # one observation, 64 independent draws

    def draws(seed: int) -> np.ndarray:
        states = [policy.initial_state(s) for s in np.random.SeedSequence(seed).spawn(64)]
        return policy.act(obs, states)[0]

    a, b = draws(0), draws(1)
    np.testing.assert_array_equal(a, draws(0))
    assert not np.array_equal(a, b)
    assert set(np.unique(a)) == {0, 1}  # it samples: not the argmax every time


@pytest.mark.parametrize("shape", ["sampling", "sac"])
def test_policy_calls_leave_the_global_torch_rng_alone(shape):
    policy = TorchPolicy(_module(shape))
    before = torch.random.get_rng_state()
    _run(policy, _env_of(shape), episodes=2, names=("nominal",))
    assert torch.equal(torch.random.get_rng_state(), before)


def test_sampled_box_actions_are_clipped_like_cleanrls_clip_action():
    module = build(PPOContinuousAgent, env_id=PENDULUM)
    policy = TorchPolicy(module, rule="get_action_and_value")  # forced: the mean exists
    assert policy.stateful
    out = _run(policy, PENDULUM, episodes=1, names=("nominal",), record=True)["nominal"]
    taken = np.concatenate(out.actions)
    assert (np.abs(taken) <= 2.0).all() and (np.abs(taken) == 2.0).any()
    assert np.unique(taken).size > 50  # samples, not a clipped constant
    again = _run(policy, PENDULUM, episodes=1, names=("nominal",))["nominal"]
    np.testing.assert_array_equal(again.returns, out.returns)


# --------------------------------------------------------------------------------------
# 3. Modes and refusals.


def test_eval_mode_during_calls_and_training_mode_restored():
    module = build(PPOAgent)
    seen: list[bool] = []
    module.actor.register_forward_hook(lambda m, i, o: seen.append(m.training))
    module.train()
    _run(TorchPolicy(module), CARTPOLE, episodes=1, names=("nominal",))
    assert seen and not any(seen)
    assert all(m.training for m in module.modules())


def test_an_unknown_or_absent_rule_is_refused():
    with pytest.raises(PolicyError, match="unknown rule 'mean'"):
        TorchPolicy(build(QNetwork), rule="mean")
    with pytest.raises(PolicyError, match="QNetwork has no actor_mean"):
        TorchPolicy(build(QNetwork), rule="actor_mean")


def test_a_forward_that_returns_a_tuple_is_refused_with_the_rules():
    policy = _bound(TorchPolicy(build(SACActor), rule="forward"), PENDULUM)
    with pytest.raises(PolicyError, match=r"returned a tuple of 2, not a tensor.*get_action"):
        policy.act(np.zeros((2, 3), dtype=np.float32), None)


def test_a_get_action_of_another_shape_is_refused():
    class Other(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(3, 1)

        def get_action(self, x):
            return self.net(x)

    policy = _bound(TorchPolicy(build(Other)), PENDULUM)
    with pytest.raises(PolicyError, match=r"get_action returned a Tensor of shape \(16, 1\); "
                                          r".*rule='forward'"):
        policy.act(np.zeros((2, 3), dtype=np.float32), None)


# --------------------------------------------------------------------------------------
# 4. Checkpoints.


def _actions(module: nn.Module, env_id: str, n: int = 40) -> np.ndarray:
    obs = np.random.default_rng(0).normal(size=(n, OBS_DIM[env_id])).astype(np.float32)
    return _bound(TorchPolicy(module), env_id).act(obs, None)[0]


def _layout(kind: str, trained: nn.Module) -> object:
    state = trained.state_dict()
    return {
        "plain": state,
        # RSL-RL's layout; the optimizer entry as an unstepped Adam's state_dict()
        "model_state_dict": {"model_state_dict": state, "iter": 300, "infos": None,
                             "optimizer_state_dict": {"state": {}, "param_groups": [
                                 {"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1, 2]}]}},
        "state_dict": {"state_dict": state, "epoch": 3},
        "model": {"model": state},
        "data_parallel": {f"module.{k}": v for k, v in state.items()},
    }[kind]


@pytest.mark.parametrize("kind", ["plain", "model_state_dict", "state_dict", "model",
                                  "data_parallel"])
@pytest.mark.parametrize("shape", ["ppo", "rsl_rl"])
def test_checkpoint_layouts_load_the_trained_weights(tmp_path, kind, shape):
    cls, env_id, _, _ = SHAPES[shape]
    trained, fresh = build(cls, seed=0), build(cls, seed=1)
    assert not torch.equal(trained.actor[0].weight, fresh.actor[0].weight)
    path = tmp_path / "agent.cleanrl_model"
    torch.save(_layout(kind, trained), path)
    assert load_checkpoint(fresh, path) is fresh
    for key, value in trained.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value), key
    np.testing.assert_array_equal(_actions(fresh, env_id), _actions(trained, env_id))


def test_a_loaded_checkpoint_audits_like_the_original(tmp_path):
    trained = build(RSLActorCritic, seed=0)
    path = tmp_path / "model_300.pt"
    torch.save(_layout("model_state_dict", trained), path)
    loaded = load_checkpoint(build(RSLActorCritic, seed=1), path)
    a = _run(TorchPolicy(trained), PENDULUM, episodes=2)
    b = _run(TorchPolicy(loaded), PENDULUM, episodes=2)
    for name in ("nominal", "jitter"):
        np.testing.assert_array_equal(a[name].returns, b[name].returns)


def test_cleanrl_td3_tuple_loads_the_actor_part(tmp_path):
    actor, qf1, qf2 = build(TD3Actor, 0), build(TD3QNetwork, 1), build(TD3QNetwork, 2)
    path = tmp_path / "td3_continuous_action.cleanrl_model"
    torch.save((actor.state_dict(), qf1.state_dict(), qf2.state_dict()), path)
    loaded = load_checkpoint(build(TD3Actor, 3), path)
    np.testing.assert_array_equal(_actions(loaded, PENDULUM), _actions(actor, PENDULUM))
    critic = load_checkpoint(build(TD3QNetwork, 4), path)
    assert torch.equal(critic.fc3.weight, qf1.fc3.weight)  # the first that fits


def test_a_checkpoint_of_another_class_names_the_keys(tmp_path):
    path = tmp_path / "dqn.cleanrl_model"
    torch.save(build(QNetwork).state_dict(), path)
    module = build(PPOAgent)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    with pytest.raises(PolicyError) as info:
        load_checkpoint(module, path)
    message = str(info.value)
    assert message.startswith(f"checkpoint {str(path)!r} does not fit PPOAgent: ")
    assert "missing keys actor.0.bias, actor.0.weight, actor.2.bias, actor.2.weight and 4 more" in message
    assert "unexpected keys network.0.bias, network.0.weight, network.2.bias, network.2.weight and 2 more" in message
    assert message.endswith("Is this checkpoint for this module class?")
    assert all(torch.equal(v, before[k]) for k, v in module.state_dict().items())  # untouched


def test_a_checkpoint_of_other_sizes_names_the_first_mismatch(tmp_path):
    path = tmp_path / "ppo.cleanrl_model"
    torch.save(build(PPOAgent, hidden=8).state_dict(), path)
    with pytest.raises(PolicyError) as info:
        load_checkpoint(build(PPOAgent, hidden=16), path)
    assert str(info.value) == (
        f"checkpoint {str(path)!r} does not fit PPOAgent: size mismatch for critic.0.weight: "
        "(8, 4) in the checkpoint, (16, 4) in the module (and 5 more). Build the module with "
        "the sizes it was trained with (observation and action dimensions, hidden units)"
    )


@pytest.mark.parametrize("content", [b"hello, not a checkpoint\n", b"",
                                     b"\x93NUMPY\x01\x00v\x00{'descr': '<f8'}"])
def test_a_file_that_is_not_a_torch_file_is_named(tmp_path, content):
    path = tmp_path / "agent.pt"
    path.write_bytes(content)
    with pytest.raises(PolicyError, match=rf"^checkpoint '{re.escape(str(path))}' is not a torch file \(\w+"):
        load_checkpoint(build(PPOAgent), path)


def test_a_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(PolicyError, match=rf"^checkpoint '{re.escape(str(tmp_path / 'nope.pt'))}' does not exist$"):
        load_checkpoint(build(PPOAgent), tmp_path / "nope.pt")
    with pytest.raises(PolicyError, match="is a directory, not a file"):
        load_checkpoint(build(PPOAgent), tmp_path)


def test_a_pickled_module_is_refused_without_unpickling_it(tmp_path):
    path = tmp_path / "whole_model.pt"
    torch.save({"model": build(PPOAgent).actor}, path)  # a whole nn.Module, not its weights
    with pytest.raises(PolicyError, match=r"holds Python objects besides tensors \(it pickles "
                                          r"torch\.nn\.modules\.container\.Sequential\).*"
                                          r"torch\.save\(model\.state_dict\(\), path\)"):
        load_checkpoint(build(PPOAgent), path)


def test_a_torch_file_without_a_state_dict_says_what_it_holds(tmp_path):
    path = tmp_path / "stats.pt"
    torch.save({"iter": 3, "returns": torch.zeros(3), "note": "no weights"}, path)
    with pytest.raises(PolicyError, match=r"holds a dict with keys iter, returns, note, not a "
                                          r"state dict; .*'model_state_dict' or 'state_dict' or 'model'"):
        load_checkpoint(build(PPOAgent), path)


def test_as_policy_loads_a_checkpoint_into_the_module(tmp_path):
    trained = build(PPOAgent, seed=0)
    path = tmp_path / "ppo.cleanrl_model"
    torch.save(trained.state_dict(), path)
    policy = as_policy(build(PPOAgent, seed=1), checkpoint=path)
    assert isinstance(policy, TorchPolicy) and policy.rule == "actor"
    np.testing.assert_array_equal(_actions(policy.module, CARTPOLE), _actions(trained, CARTPOLE))
