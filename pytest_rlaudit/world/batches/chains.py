"""A scenario's perturbation run slot by slot in a lock-step batch, by the wrappers' own code.

Every perturbation wrapper that can run in a batch (``LOCKSTEP``) splits its step in two
hooks (:meth:`~pytest_rlaudit.world.perturbations.Perturbation.decide` before the env's
steps, :meth:`~pytest_rlaudit.world.perturbations.Perturbation.observe` after them), and
its gymnasium ``step`` is nothing else. A :class:`Chain` is a scenario's wrappers built
around a :class:`Mailbox` (an env with the batch's spaces that steps nothing): the batch
steps the envs itself and calls the hooks of each slot's chain, so a slot draws from the
wrappers' own generators, seeded as the scalar path seeds them, and its episode is the
scalar path's. No perturbation is written twice.

>>> import numpy as np
>>> from gymnasium import spaces
>>> from pytest_rlaudit import scenarios
>>> chain = Chain(scenarios.get("jitter"), (spaces.Box(-1, 1, (2,)), spaces.Discrete(2)),
...               "a batch")
>>> obs = chain.reset(np.zeros(2, np.float32), np.random.SeedSequence(0), 0)
>>> action, hold = chain.decide(1)
>>> action, hold in (1, 2, 3)
(1, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np

from ...errors import PerturbationError
from ..envs import AuditEnv
from ..perturbations import Perturbation, seed_perturbations
from ..scenario import Scenario
from ..scenarios import check_applicable
from .kinds import BatchKind

__all__ = ["Mailbox", "Chain", "check_batchable", "check_scenarios"]


class Mailbox(gym.Env):
    """The env under a slot's chain: it has the batch's spaces, its ``reset`` returns the
    observation the batch put in ``obs``, and nothing ever steps it."""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.obs: Any = None

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        return self.obs, {}

    def step(self, action: Any) -> Any:
        raise RuntimeError("a lock-step batch steps its envs itself; the chain's hooks run "
                           "around those steps")


def _remedy(label: str, hint: str = "") -> str:
    return (f"Audit it on one env per slot instead: pass the env's id or a factory of one "
            f"env (as audit(agent, 'CartPole-v1') does), not {label}.{hint}")


class Chain:
    """``scenario``'s wrappers around a :class:`Mailbox` of ``spaces`` (observations,
    actions), with the hooks of one agent step (see the module). ``label`` names the
    batch kind in errors: a scenario the batch cannot take is a
    :class:`~pytest_rlaudit.errors.PerturbationError` naming it, the kind and the remedy
    (``hint``: what else would make the kind run it).
    """

    def __init__(self, scenario: Scenario, spaces: tuple[gym.Space[Any], gym.Space[Any]],
                 label: str, hint: str = "") -> None:
        self.name = scenario.name
        self.box = Mailbox(*spaces)
        made = scenario.perturbation
        if isinstance(made, type) and not (issubclass(made, Perturbation) and made.LOCKSTEP):
            raise PerturbationError(_refusal(scenario, made, label, hint))  # before it is built
        try:
            self.env = scenario.wrap(self.box)
        except PerturbationError as exc:  # it refused the batch's spaces: say whose
            raise PerturbationError(f"scenario {scenario.name!r} cannot run on {label}: "
                                    f"{exc}") from exc
        layers: list[Perturbation] = []
        current: Any = self.env
        while current is not self.box:
            if not isinstance(current, Perturbation) or not current.LOCKSTEP:
                raise PerturbationError(_refusal(scenario, type(current), label, hint))
            layers.append(current)
            current = current.env  # type: ignore[attr-defined]  # a gym.Wrapper's
        if any(layer.TIMING for layer in layers[:-1]):
            raise PerturbationError(
                f"scenario {scenario.name!r} cannot run on {label}: a timing perturbation "
                f"({type(next(x for x in layers[:-1] if x.TIMING)).__name__}) wraps another "
                "perturbation, so the wrappers below it would run once per env step; in a "
                f"batch only the innermost wrapper may hold actions. {_remedy(label, hint)}")
        if (self.env.observation_space, self.env.action_space) != spaces:
            raise PerturbationError(
                f"scenario {scenario.name!r} changes the env's spaces; the same agent must "
                "run every scenario, so a perturbation has to keep them")
        self.layers = layers
        self.inner = list(reversed(layers))
        # whether any layer changes the action or its hold, or what the agent sees: a batch
        # calls only the hooks that do something (most scenarios act on one side)
        self.decides = any(type(x).decide is not Perturbation.decide for x in layers)
        self.observes = any(type(x).observe is not Perturbation.observe for x in layers)
        if len(layers) == 1:  # the registry's scenarios: the wrapper's own hooks, no loop
            self.decide = layers[0].decide  # type: ignore[method-assign]
            self.observe = layers[0].observe  # type: ignore[method-assign]

    def reset(self, obs: Any, streams: np.random.SeedSequence, env_seed: int) -> Any:
        """What the agent sees of ``obs``, the first observation of an episode reset with
        ``env_seed``, the wrappers' generators pinned to ``streams`` (as the scalar path
        pins them: :func:`~pytest_rlaudit.world.perturbations.seed_perturbations`)."""
        self.box.obs = obs
        if self.layers:
            seed_perturbations(self.env, streams)
        return self.env.reset(seed=env_seed)[0]

    def decide(self, action: Any) -> tuple[Any, int]:
        """The action the env executes for the agent's ``action``, and for how many steps."""
        hold = 1
        for layer in self.layers:
            action, hold = layer.decide(action)
        return action, hold

    def observe(self, obs: Any) -> Any:
        """What the agent sees of ``obs``, the env's observation after the held steps."""
        for layer in self.inner:
            obs = layer.observe(obs)
        return obs


def _refusal(scenario: Scenario, made: type, label: str, hint: str) -> str:
    kind = made.__name__
    if kind in ("Dynamics", "Push"):
        why = (f"its perturbation ({kind}) changes the env's physics, which needs each env's "
               f"own model; {label} steps its envs together and gives no per-env access to "
               "their physics")
    elif getattr(made, "attach_policy", None) is not None:
        why = f"its perturbation ({kind}) attacks the agent inside each env's step"
    else:
        why = (f"its perturbation ({kind}) acts inside the env's step; a batch runs only "
               "perturbations that split their step into decide() and observe() "
               "(pytest_rlaudit.perturbations.Perturbation, LOCKSTEP = True)")
    return f"scenario {scenario.name!r} cannot run on {label}: {why}. {_remedy(label, hint)}"


def check_batchable(scenarios: Sequence[Scenario], kind: BatchKind) -> list[Scenario]:
    """The scenarios of ``scenarios`` that ``kind`` cannot step but runs one env per slot
    from its own factory (``kind.per_env``: ``dynamics`` and ``push`` on a vector env
    built from one factory); a :class:`~pytest_rlaudit.errors.PerturbationError` naming
    every scenario it cannot run at all (each with its cause and remedy). One still to be
    calibrated is checked in raw units."""
    problems, apart = [], []
    spaces = (kind.observation_space, kind.action_space)
    for scenario in scenarios:
        probe = scenario.calibrated(None) if scenario.needs_spread else scenario
        try:
            Chain(probe, spaces, kind.label, kind.hint)
        except PerturbationError as exc:
            apart.append(scenario)
            problems.append(str(exc))
    if problems and kind.per_env is None:
        raise PerturbationError("; ".join(problems))
    return apart


def check_scenarios(scenarios: Sequence[Scenario], env: AuditEnv) -> None:
    """Before any episode: a :class:`~pytest_rlaudit.errors.PerturbationError` naming each
    of ``scenarios`` that cannot run on ``env``: on the batch the user gave, if any
    (:func:`check_batchable`; those it runs one env per slot, on one of its envs), else
    on one env each (its wrappers' own checks,
    :func:`~pytest_rlaudit.world.scenarios.check_applicable`)."""
    given = env.batch.given if env.batch is not None else None
    if given is None:
        check_applicable(scenarios, env.make)
        return
    apart = check_batchable(scenarios, given)
    if apart:
        assert given.per_env is not None  # else check_batchable refused them
        check_applicable(apart, replace(env, factory=given.per_env, batch=None).make)
