"""stable-baselines3 (and sb3-contrib) models as agents (loading a ``.zip``:
:mod:`.sb3_load`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from ...errors import PolicyError, SpacesMismatchError
from .base import BasePolicy
from .sb3_fast import (
    batch_rows,
    finite_outputs,
    flat_obs,
    mode_action,
    plain_mode,
    plain_predict,
    plain_q,
    plain_sac,
    row,
)
from .torch import MIN_TORCH_ROWS, _pad_rows, _torch_threads, on_cpu

__all__ = ["SB3Policy"]


def _space_summary(space: Any) -> str:
    shape = getattr(space, "shape", None)
    return f"{type(space).__name__}{tuple(shape) if shape else ''}"


def _same_obs_shape(own: Any, env: Any) -> bool:
    """The model takes the env's observations: the same shape, or for images the
    channel-first transpose SB3 trains on (its ``predict`` transposes channel-last input)."""
    own_shape, env_shape = getattr(own, "shape", None), getattr(env, "shape", None)
    if own_shape == env_shape:
        return True
    return (own_shape is not None and env_shape is not None and len(env_shape) == 3
            and tuple(own_shape) == (env_shape[-1], *env_shape[:-1]))


class SB3Policy(BasePolicy):
    """A stable-baselines3 model (or its ``.policy``), batched through its forward pass.

    ``deterministic=True`` (default) takes the mode of the action distribution. With
    ``deterministic=False`` each episode samples from its own seeded torch stream, one
    row per call (slower, but still independent of the batch); DQN and QRDQN take a
    uniform random action at their saved ``exploration_rate``, as their ``predict`` does. Recurrent policies
    (sb3-contrib RecurrentPPO) keep an LSTM state per episode, zeroed at its start.
    VecNormalize statistics and frame stacks are applied around it
    (:mod:`.preprocess`), as :func:`~.adapt.as_policy` arranges.

    Actions are those of ``policy.predict``, bit for bit, but its steps are taken here
    (:meth:`actions`) so that what it repeats on every call is done once: eval mode is set
    on the first call and again only when a module's mode has changed since (after
    ``model.learn()``, say), and a flat observation batch is copied into a tensor without
    predict's checks. The policy is left in eval mode, as ``predict`` leaves it. Policies
    that override ``predict`` (recurrent ones, users' own) are called through it.
    """

    def __init__(self, model: Any, *, deterministic: bool = True, name: str | None = None,
                 torch_threads: int | None = 1) -> None:
        self.model = model
        self.torch_threads = torch_threads
        self.sb3_policy = getattr(model, "policy", model)
        if not hasattr(self.sb3_policy, "predict"):
            raise PolicyError(f"{type(model).__name__} has no predict(); not an SB3 model")
        self.deterministic = bool(deterministic)
        self.shards_freely = on_cpu(self.sb3_policy)
        self.recurrent = hasattr(self.sb3_policy, "lstm_actor")
        if self.recurrent and not self.deterministic:
            raise PolicyError(
                "deterministic=False is not supported for recurrent SB3 policies yet; "
                "audit with deterministic=True (the default)"
            )
        self.stateful = self.recurrent or not self.deterministic
        self.name = name or type(model).__name__
        # DQN and QRDQN sample as their model's predict does: a uniform random action at
        # the exploration rate they were saved with (0.01 after the zoo's Atari training),
        # else the Q-network's argmax, which their policy's predict always takes.
        self.epsilon = float(getattr(model, "exploration_rate", 0.0) or 0.0) if (
            model is not self.sb3_policy) else 0.0
        self._fast = not self.recurrent and plain_predict(self.sb3_policy)
        self._flat = self._fast and flat_obs(self.sb3_policy)
        self._sac = self._fast and plain_sac(self.sb3_policy)
        self._mode = plain_mode(self.sb3_policy) if self._fast else None
        self._q = self._fast and plain_q(self.sb3_policy)
        self._raw: np.ndarray | None = None  # the last actions() call's, before the clip
        space = self.sb3_policy.action_space
        #: Whether act's Box actions are clipped inside SB3's own ``predict`` (a recurrent
        #: policy, one with a ``predict`` of its own), where the unclipped ones cannot be
        #: read: replay then reports ``ood_actions`` as not measured, never as 0.
        self.clip_hidden = (isinstance(space, spaces.Box) and not self.sb3_policy.squash_output
                            and not self._fast)
        self._forget_mode()

    def __getstate__(self) -> dict[str, Any]:
        # Pickled to travel (Ray actors): the policy network is all an audit runs, so the
        # model around it (its replay buffer: hundreds of MB for SAC) stays behind.
        state = dict(self.__dict__)
        state["model"] = self.sb3_policy
        state["_modules"] = None  # eval mode is checked again where it lands
        return state

    def _forget_mode(self) -> None:
        """Make the next call set eval mode (and read the device) again."""
        self._modules: tuple[Any, ...] | None = None
        self._eval_flags: list[bool] = []
        self._device: Any = None

    def bind(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
        super().bind(observation_space, action_space)
        # A rollout starts: the model may have been trained or moved since the last one.
        self._forget_mode()
        own_obs = self.sb3_policy.observation_space
        own_act = self.sb3_policy.action_space
        if not _same_obs_shape(own_obs, observation_space):
            raise SpacesMismatchError(
                f"agent {self.name} expects observations {_space_summary(own_obs)} but the env "
                f"gives {_space_summary(observation_space)}: is this the env it was trained on?"
            )
        same_bounds = not isinstance(own_act, spaces.Box) or (
            isinstance(action_space, spaces.Box)
            and np.array_equal(own_act.low, action_space.low)
            and np.array_equal(own_act.high, action_space.high))
        if type(own_act) is not type(action_space) or getattr(own_act, "shape", None) != getattr(
            action_space, "shape", None
        ) or getattr(own_act, "n", None) != getattr(action_space, "n", None) or not same_bounds:
            raise SpacesMismatchError(
                f"agent {self.name} acts in {own_act} but the env's action space is "
                f"{action_space}: is this the env it was trained on?"
            )

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        if self.recurrent:
            return None  # zero LSTM state, flagged as an episode start
        return np.random.default_rng(seed)

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        n = batch_rows(obs)
        with _torch_threads(self.torch_threads):
            if self.recurrent:
                return self._act_recurrent(obs, states)
            if not self.deterministic:
                return self._act_stochastic(obs, states)
            actions = self.actions(_pad_rows(obs, MIN_TORCH_ROWS), deterministic=True)[:n]
            self.unclipped = None if self._raw is None else self._raw[:n]
            return actions, None

    def actions(self, obs: Any, deterministic: bool = True) -> np.ndarray:
        """The actions ``sb3_policy.predict(obs, deterministic=deterministic)`` returns for
        a batch ``obs`` (an array, or a dict of arrays for a Dict space), bit for bit.

        Its steps, minus what need not be repeated: eval mode (only when it changed, see
        the class), the observation as a tensor (``obs_to_tensor``, or for a flat batch
        the copy and reshape it makes), ``_predict`` under ``torch.no_grad()``, then for
        Box actions ``unscale_action`` when the policy squashes, else a clip to the space.
        A SAC actor's deterministic action is ``tanh`` of its mean, which ``_predict``
        reaches by building a torch ``Normal`` it then ignores (a third of the call): that
        is taken straight (:func:`~.sb3_fast.plain_sac`), as is a PPO or A2C policy's mode,
        the argmax of its Categorical or the mean of its Gaussian (a fifth of the call:
        :func:`~.sb3_fast.mode_action`).

        >>> from stable_baselines3 import PPO
        >>> model = PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=[8]), seed=0)
        >>> obs = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
        >>> ours = SB3Policy(model).actions(obs)
        >>> ours.tobytes() == model.policy.predict(obs, deterministic=True)[0].tobytes()
        True
        """
        policy = self.sb3_policy
        self._raw = None
        if not self._fast:
            predicted: np.ndarray = policy.predict(obs, deterministic=deterministic)[0]
            return predicted
        import torch

        self._eval_mode()
        if self._flat:
            # obs_to_tensor's copy: the network must not see (or change) the caller's array.
            shape = (-1, *policy.observation_space.shape)
            obs_tensor = torch.as_tensor(np.array(obs).reshape(shape), device=self._device)
        else:
            obs_tensor = policy.obs_to_tensor(obs)[0]
        out: Any = None
        with torch.no_grad():
            if deterministic and self._sac:
                actor = policy.actor
                features = actor.extract_features(obs_tensor, actor.features_extractor)
                mean = actor.mu(actor.latent_pi(features))
                finite_outputs(mean, self.name)  # tanh would make an infinite mean the bound
                out = torch.tanh(mean)
            elif deterministic and self._mode:
                out = mode_action(policy, obs_tensor, self._mode, self.name)
            elif deterministic and self._q:
                q_values = policy.q_net(obs_tensor)
                finite_outputs(q_values, self.name)  # an argmax would make NaN action 0
                out = q_values.argmax(dim=1).reshape(-1)  # DQNPolicy._predict's steps
            if out is None:
                out = policy._predict(obs_tensor, deterministic=deterministic)
        space = policy.action_space
        actions: np.ndarray = out.cpu().numpy().reshape((-1, *space.shape))
        if isinstance(space, spaces.Box):
            if policy.squash_output:
                unscaled: np.ndarray = policy.unscale_action(actions)
                return unscaled
            self._raw = actions
            clipped: np.ndarray = np.clip(actions, space.low, space.high)
            return clipped
        return actions

    def _eval_mode(self) -> None:
        """``set_training_mode(False)``, which predict calls on every call (7% of the time
        of an audit of a SAC agent): here only when some module's flag has changed since
        this last called it (or on the first call), so the network runs in the very mode
        predict would give it."""
        modules = self._modules
        if modules is not None and [m.training for m in modules] == self._eval_flags:
            return
        policy = self.sb3_policy
        policy.set_training_mode(False)
        self._modules = modules = tuple(policy.modules())
        self._eval_flags = [m.training for m in modules]
        self._device = policy.device

    def _act_stochastic(self, obs: np.ndarray,
                        states: list[Any] | None) -> tuple[np.ndarray, list[Any]]:
        import torch

        assert states is not None
        rows: list[np.ndarray] = []
        raws: list[np.ndarray] = []  # each sampled row's action before the clip
        epsilon = self.epsilon
        # On the CPU a row's sample draws from the CPU generator alone: seeding only it gives
        # torch.manual_seed's bits at 1/100 of the cost (manual_seed also seeds every other
        # device type torch knows: about 0.1 ms, once per row and step).
        on_cpu = self.sb3_policy.device.type == "cpu"
        seed = torch.default_generator.manual_seed if on_cpu else torch.manual_seed
        for i, rng in enumerate(states):
            torch_seed = int(rng.integers(2**63 - 1))
            if epsilon and rng.random() < epsilon:
                space = self.sb3_policy.action_space
                rows.append(np.asarray(space.start + rng.integers(space.n), dtype=np.int64))
                continue
            with torch.random.fork_rng(devices=[]):
                seed(torch_seed)
                action = self.actions(row(obs, i), deterministic=False)
            rows.append(action[0])
            raws.append(action[0] if self._raw is None else self._raw[0])
        self.unclipped = np.stack(raws) if raws and self._raw is not None else None
        return np.stack(rows), states

    def _act_recurrent(self, obs: np.ndarray,
                       states: list[Any] | None) -> tuple[np.ndarray, list[Any]]:
        assert states is not None
        n = batch_rows(obs)
        padded = _pad_rows(obs, MIN_TORCH_ROWS)
        rows = batch_rows(padded)
        zero = np.zeros(self.sb3_policy.lstm_hidden_state_shape, dtype=np.float32)
        starts = np.ones(rows, dtype=np.float32)
        hs, cs = [], []
        for i in range(rows):
            state = states[i] if i < n else None
            if state is None:
                hs.append(zero)
                cs.append(zero)
            else:
                hs.append(state[0])
                cs.append(state[1])
                starts[i] = 0.0
        h = np.concatenate(hs, axis=1)
        c = np.concatenate(cs, axis=1)
        actions, (h, c) = self.sb3_policy.predict(
            padded, state=(h, c), episode_start=starts, deterministic=True
        )
        new_states = [(h[:, i : i + 1], c[:, i : i + 1]) for i in range(n)]
        return actions[:n], new_states


def _is_sb3(obj: Any) -> bool:
    return any(c.__module__.startswith(("stable_baselines3", "sb3_contrib"))
               for c in type(obj).__mro__)
