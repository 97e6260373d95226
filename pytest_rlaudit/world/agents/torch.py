"""Torch ``nn.Module`` agents (plain modules and the CleanRL / RSL-RL shapes), and the
batch-invariant, single-thread policy call that every torch-backed adapter (SB3 too)
makes; see the package docstring."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from gymnasium import spaces

from ...errors import PolicyError
from .base import BasePolicy, check_finite

__all__ = ["TorchPolicy", "MIN_TORCH_ROWS", "RULES", "choose_rule", "on_cpu", "after_fork"]

#: Torch-backed policy calls are padded to a multiple of this many rows (batch invariance).
MIN_TORCH_ROWS = 16

#: The ways :class:`TorchPolicy` gets actions from a module, in the order ``rule="auto"``
#: tries them: the first method or attribute the module has wins, ``forward`` last.
RULES = ("get_action", "actor_mean", "actor", "get_action_and_value", "forward")

#: Rules whose Box actions are the mean (or a sample) of an unbounded Gaussian: clipped.
_CLIPPED = frozenset({"actor_mean", "actor", "get_action_and_value"})


@contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Run torch with ``threads`` intra-op threads, restoring the setting afterwards."""
    if threads is None:
        yield
        return
    import torch

    old = torch.get_num_threads()
    if old == threads:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def after_fork() -> None:
    """In a forked process: torch, if the parent imported it, on one intra-op thread.

    GNU OpenMP, torch's CPU thread pool on Linux, does not survive a fork: a parallel
    region in the child waits forever for the parent's pool threads, which the child does
    not have (a model loaded in the parent, then any large tensor op in the child, hangs).
    With one thread torch runs every op inline. Policy calls run on one thread anyway
    (``torch_threads=1``); this covers everything else a worker may do with torch (an
    env of its own, ``torch_threads=None``). Torch is never imported here.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def on_cpu(module: Any) -> bool:
    """Whether every parameter and buffer of a torch module is on the CPU: only then can a
    forked worker process run a copy of it (CUDA cannot be used after a fork).

    >>> import torch
    >>> on_cpu(torch.nn.Linear(2, 1))
    True
    """
    tensors = [*module.parameters(), *module.buffers()] if hasattr(module, "parameters") else []
    return all(t.device.type == "cpu" for t in tensors)


def _pad_rows(obs: Any, rows: int) -> Any:
    """Pad ``obs`` (an array, or a dict of arrays for a Dict space) with copies of its
    first row up to a multiple of ``rows`` rows.

    >>> _pad_rows({"x": np.arange(3)}, 4)["x"].tolist()
    [0, 1, 2, 0]
    """
    if isinstance(obs, dict):
        return {key: _pad_rows(value, rows) for key, value in obs.items()}
    n = obs.shape[0]
    target = -(-n // rows) * rows
    if n == target:
        return obs
    return np.concatenate([obs, np.repeat(obs[:1], target - n, axis=0)])


def choose_rule(module: Any) -> str:
    """The first of :data:`RULES` that ``module`` offers (``"forward"`` if none).

    >>> import torch
    >>> class Agent(torch.nn.Module):  # the shape of CleanRL's ppo.py Agent
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.actor, self.critic = torch.nn.Linear(4, 2), torch.nn.Linear(4, 1)
    >>> choose_rule(Agent()), choose_rule(torch.nn.Linear(4, 2))
    ('actor', 'forward')
    """
    for rule in RULES[:-1]:
        if callable(getattr(module, rule, None)):
            return rule
    return "forward"


def _plain_modes(module: Any) -> tuple[Any, ...] | None:
    """``module.modules()``, when eval mode is no more than each one's ``training`` flag:
    none overrides ``train`` or ``__setattr__`` (script modules keep the flag in C++);
    else None.

    >>> import torch
    >>> len(_plain_modes(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh())))
    3
    """
    import torch

    base = torch.nn.Module
    modules = tuple(module.modules())
    # identities of the methods (not overridden), which the type checker reads as a
    # comparison of two different signatures
    if all(type(m).train is base.train
           and type(m).__setattr__ is base.__setattr__  # type: ignore[comparison-overlap]
           for m in modules):
        return modules
    return None


@contextmanager
def _inference(module: Any, threads: int | None,
               modules: tuple[Any, ...] | None = None) -> Iterator[None]:
    """Eval mode, no autograd and ``threads`` torch threads; the modes are restored.

    A module in eval mode is left as it is. ``modules``: :func:`_plain_modes` of
    ``module``, whose flags are then set and put back one by one, each module getting its
    own mode back, at a tenth of the cost of ``eval()`` and ``train()`` (a recursion
    through ``nn.Module.__setattr__``, twice per call for a module left in training mode,
    as a freshly built one that loaded a checkpoint is). Without them, ``eval()`` and
    ``train()``.

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Dropout(0.5))
    >>> with _inference(net, 1, _plain_modes(net)):
    ...     net(torch.ones(1, 4)).tolist(), net[0].training
    ([[1.0, 1.0, 1.0, 1.0]], False)
    >>> net[0].training
    True
    """
    import torch

    if not module.training:
        with torch.no_grad(), _torch_threads(threads):
            yield
        return
    if modules is None:
        module.eval()
        try:
            with torch.no_grad(), _torch_threads(threads):
                yield
        finally:
            module.train()
        return
    flags = [m.training for m in modules]
    for m in modules:
        # nn.Module.__setattr__ would end in this call for a bool, after costly checks.
        object.__setattr__(m, "training", False)
    try:
        with torch.no_grad(), _torch_threads(threads):
            yield
    finally:
        for m, flag in zip(modules, flags, strict=True):
            object.__setattr__(m, "training", flag)


def _seeded(seed: int | None, fn: Callable[[], Any]) -> Any:
    """``fn()`` on a private copy of torch's CPU generator, seeded with ``seed`` if given.

    The global torch stream is left as it was: a policy call must not change what the
    user's own code (or the next agent) draws.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        return fn()


def _mean_of_get_action(out: Any, name: str) -> Any:
    """The deterministic action of a CleanRL SAC actor's ``get_action``: its third item.

    ``(action, log_prob, mean)`` for Box (the mean already tanh-squashed and scaled),
    ``(action, log_prob, action_probs)`` for Discrete (sac_atari.py).
    """
    if not (isinstance(out, (tuple, list)) and len(out) == 3):
        raise PolicyError(
            f"{name}.get_action returned {_describe(out)}; TorchPolicy reads CleanRL's SAC "
            "(action, log_prob, mean) there. For another get_action, pass rule='forward' "
            f"(or one of {', '.join(RULES)})"
        )
    return out[2]


def _describe(out: Any) -> str:
    if isinstance(out, (tuple, list)):
        return f"a {type(out).__name__} of {len(out)}"
    return f"a {type(out).__name__}" + (f" of shape {tuple(out.shape)}" if hasattr(out, "shape") else "")


class TorchPolicy(BasePolicy):
    """A torch ``nn.Module`` as a policy: a float32 observation batch in, actions out.

    How the action is read depends on what the module offers (``rule="auto"``: the first
    row that fits; or name the rule). The shapes are those of CleanRL's agents and
    RSL-RL's ``ActorCritic``:

    ========================  ===============================  ==============================
    rule (auto: this order)   typical module                   action
    ========================  ===============================  ==============================
    ``get_action``            CleanRL SAC ``Actor``            3rd item of ``get_action(x)``:
                                                               Box: ``tanh(mean) * scale +
                                                               bias``; Discrete: argmax of
                                                               the action probabilities
    ``actor_mean``            CleanRL continuous PPO           ``clip(actor_mean(x))``
    ``actor``                 CleanRL PPO ``Agent``; RSL-RL    Discrete: ``argmax actor(x)``;
                              ``ActorCritic``                  Box: ``clip(actor(x))``
    ``get_action_and_value``  PPO-style agent with neither     a *sample*: ``get_action_and_
                              of the above                     value(x)[0]``, seeded per
                                                               episode; Box: clipped
    ``forward``               CleanRL DQN ``QNetwork``,        ``module(x)``; Discrete:
                              TD3/DDPG ``Actor``, any module   argmax of per-action scores,
                                                               or integer actions as given
    ========================  ===============================  ==============================

    Why some Box actions are clipped to the action space (``clip``): ``actor_mean`` and an
    RSL-RL ``actor`` give the mean of an unbounded Gaussian, which may leave the bounds;
    CleanRL trains and evaluates them behind ``gymnasium.wrappers.ClipAction`` (its
    ``make_env``), so clipping is what the agent's own evaluation does. The other rules are
    not clipped: a TD3/DDPG or SAC actor already squashes into the bounds, and an action
    outside them is a bug the runner reports.

    The sampling rule makes the policy stateful: each episode draws from its own stream
    seeded from the episode's seed, one padded call per row, so returns are reproducible
    and do not depend on the batch. Every call runs in eval mode (each module's mode
    restored after) under ``torch.no_grad()``, with ``torch_threads`` threads, padded to
    :data:`MIN_TORCH_ROWS` rows, and leaves torch's global random stream as it was.

    >>> import numpy as np, torch
    >>> from gymnasium import spaces
    >>> class Agent(torch.nn.Module):  # CleanRL's ppo_continuous_action.py shape
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.actor_mean = torch.nn.Linear(3, 1)
    >>> agent = Agent()
    >>> with torch.no_grad():
    ...     _ = agent.actor_mean.weight.fill_(1.0), agent.actor_mean.bias.fill_(0.0)
    >>> policy = TorchPolicy(agent)
    >>> policy.bind(spaces.Box(-5, 5, (3,)), spaces.Box(-2, 2, (1,)))
    >>> policy.rule, policy.act(np.array([[1.0, 0.5, 0.0], [-3.0, -1.0, 0.0]]), None)[0].tolist()
    ('actor_mean', [[1.5], [-2.0]])
    """

    def __init__(self, module: Any, name: str | None = None, *,
                 torch_threads: int | None = 1, rule: str = "auto") -> None:
        self.module = module
        self.name = name or type(module).__name__
        self.torch_threads = torch_threads
        self.shards_freely = on_cpu(module)
        self.rule = choose_rule(module) if rule == "auto" else _checked_rule(module, rule)
        self.stateful = self.rule == "get_action_and_value"
        self._modes: tuple[Any, ...] | None = None
        self._modes_read = False

    def bind(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
        super().bind(observation_space, action_space)
        self._modes_read = False  # a rollout starts: the module may have changed since

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        return np.random.default_rng(seed) if self.stateful else None

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        rows = np.asarray(obs, dtype=np.float32)
        if self.module.training and not self._modes_read:
            self._modes, self._modes_read = _plain_modes(self.module), True
        with _inference(self.module, self.torch_threads, self._modes):
            if self.stateful:
                out = self._sampled(rows, states)
            else:
                out = self._call(_pad_rows(rows, MIN_TORCH_ROWS))[: len(rows)]
        check_finite(out, self.name)  # before an argmax or a clip hides it
        return self._actions(out), (states if self.stateful else None)

    def _sampled(self, rows: np.ndarray, states: list[Any] | None) -> np.ndarray:
        """One padded call per row, each seeded from the row's own episode stream (a
        draw for a batch would depend on which episodes share it)."""
        if states is None or len(states) != len(rows):
            raise PolicyError(f"{self.name} samples actions: it needs one state per row")
        return np.stack([self._call(_pad_rows(rows[i : i + 1], MIN_TORCH_ROWS),
                                    int(rng.integers(2**63 - 1)))[0]
                         for i, rng in enumerate(states)])

    def _call(self, rows: np.ndarray, seed: int | None = None) -> np.ndarray:
        """The rule's raw output for ``rows`` (already padded), as a numpy array."""
        import torch

        x = torch.as_tensor(rows)
        module = self.module
        if self.rule == "get_action":
            # get_action samples (rsample) before returning the mean: on a private stream
            out = _mean_of_get_action(_seeded(None, lambda: module.get_action(x)), self.name)
        elif self.rule == "get_action_and_value":
            out = _seeded(seed, lambda: module.get_action_and_value(x))[0]
        else:
            out = module(x) if self.rule == "forward" else getattr(module, self.rule)(x)
        if not isinstance(out, torch.Tensor):
            raise PolicyError(
                f"{self.name} ({self.rule}) returned {_describe(out)}, not a tensor of actions; "
                f"name the rule that gives actions: TorchPolicy(module, rule=...) with one of "
                f"{', '.join(RULES)}"
            )
        return np.asarray(out.detach().cpu().numpy())

    def _actions(self, out: np.ndarray) -> np.ndarray:
        """Raw outputs to actions of the bound action space (argmax, reshape, clip)."""
        n = out.shape[0]
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            if out.ndim == 2 and out.shape[1] == space.n:
                chosen: np.ndarray = out.argmax(axis=1) + space.start
                return chosen
            if out.ndim == 2 and out.shape[1] == 1:
                return out[:, 0]
            return out
        if isinstance(space, spaces.Box):
            out = out.reshape((n, *space.shape))
            if self.rule in _CLIPPED:
                self.unclipped = out
                out = np.clip(out, space.low, space.high)
            return out
        return out

    def __repr__(self) -> str:
        return f"<TorchPolicy {self.name} rule={self.rule}>"


def _checked_rule(module: Any, rule: str) -> str:
    if rule not in RULES:
        raise PolicyError(f"unknown rule {rule!r} for a torch module; use 'auto' or one of "
                          f"{', '.join(RULES)}")
    if rule != "forward" and not callable(getattr(module, rule, None)):
        raise PolicyError(f"{type(module).__name__} has no {rule}, so rule={rule!r} cannot apply")
    return rule


def _is_torch_module(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)
