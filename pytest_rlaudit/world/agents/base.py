"""The batched policy protocol every agent is adapted to, and a base for adapters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from gymnasium import spaces

from ...errors import NonFiniteOutputError

if TYPE_CHECKING:
    from .needs import EnvNeeds

__all__ = ["Policy", "CorePolicy", "BasePolicy", "check_finite", "unclipped_actions",
           "clip_hidden"]


@runtime_checkable
class CorePolicy(Protocol):
    """What a policy of one's own must implement itself: ``stateful``, ``act``,
    ``initial_state`` and ``reset`` (see :class:`Policy`). :func:`~.adapt.as_policy`
    completes such an object into a :class:`Policy`, with the defaults of
    :class:`BasePolicy` for the members it lacks."""

    stateful: bool

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        ...

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        ...

    def reset(self) -> None:
        ...


@runtime_checkable
class Policy(CorePolicy, Protocol):
    """The batched policy protocol the rollout runner drives.

    ``act(obs, states)`` maps a batch of observations (first axis: one row per active
    episode) to a batch of actions. Stateless policies have ``stateful = False`` and get
    and return ``states = None``. Stateful ones (recurrent nets, random policies) get a
    list with one state per row, where ``initial_state(seed)`` made each state at the
    start of its episode from that episode's own seed, and return the updated list.
    ``reset()`` is called once before each rollout.

    Every policy :func:`~.adapt.as_policy` returns has all the members below, so the
    code that drives it reads them directly. A policy of one's own needs only those of
    :class:`CorePolicy`; subclass :class:`BasePolicy`, or let ``as_policy`` fill in the
    rest (an object without them is wrapped in a
    :class:`~.preprocess.PolicyWrapper`, which has them).
    """

    #: The agent's label in reports, messages and records (an audit's ``agent``).
    name: str

    #: Whether ``act`` takes and returns one state per row: the runner calls
    #: ``initial_state`` at the start of each episode and keeps each row's state between
    #: steps only for a stateful policy; a stateless one gets ``states=None``.
    stateful: bool

    #: Whether the runner's worker processes (``workers=``) may each run a copy of it
    #: (inherited by fork) on whole episodes of their own, so that policy calls are
    #: spread too: True for every policy ``as_policy`` makes on the CPU. False keeps
    #: every policy call in this one copy, with only the env steps spread over the
    #: workers: for an agent on a GPU, which a forked process cannot use. The results
    #: are the same either way.
    shards_freely: bool

    #: What the agent needs of the env it is audited on (a zoo folder's ``env_kwargs``
    #: and wrappers), or None: :func:`~.adapt.env_for` applies it to every env the audit
    #: makes, the random reference's too.
    env_needs: EnvNeeds | None

    def bind(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
        """Called with the spaces of the first env the runner makes, before ``reset`` and
        the first ``act`` of each rollout (and of the seed replay): the policy learns the
        env's spaces and may refuse spaces that do not fit it (a
        :class:`~pytest_rlaudit.errors.PolicyError`). Every other env of the rollout
        has the same spaces."""
        ...

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        """Called at every agent step with the observations of the episodes that are
        running (a batch of rows, at most the audit's batch size) and, for a stateful
        policy, their states in the same order; returns one action per row (checked
        against the action space) and the states to pass with those rows next time."""
        ...

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        """Called by the runner at the start of each episode of a stateful policy with
        that episode's own seed sequence (the same in every scenario, so that episodes
        stay paired): the state its first ``act`` gets for that row. Sampling policies
        draw from a generator made here, never from a global one."""
        ...

    def reset(self) -> None:
        """Called once at the start of each rollout, after ``bind`` and before any
        ``initial_state`` or ``act``."""
        ...

    # Optional, not a member of the protocol: ``restart_state(state) -> state``, asked of
    # a stateful policy for a row whose agent restarts within the audit's episode (an
    # Atari life lost, which SB3's VecFrameStack treats as a done: see
    # pytest_rlaudit.world.atari). FrameStackPolicy empties its stack there.


class BasePolicy:
    """Convenience base: a stateless policy bound to the env's spaces by the runner,
    with every member of :class:`Policy` but ``act``."""

    stateful: bool = False
    name: str = "policy"
    observation_space: spaces.Space[Any] | None = None
    action_space: spaces.Space[Any] | None = None
    #: What the agent needs of its env (a zoo folder's env_kwargs and wrappers), if anything.
    env_needs: EnvNeeds | None = None
    #: Whether the runner's worker processes may each run a copy of it on episodes of
    #: their own (``workers=``; see :class:`Policy`); False for an agent on a GPU.
    shards_freely: bool = True
    #: The Box actions of the last ``act`` as the network gave them, before the clip to
    #: the action space that ``act`` applies (SB3's ``predict`` clips too); None when the
    #: last call clipped nothing. Replay reads it (:func:`unclipped_actions`): an action
    #: the hardware would not take is hidden by the clip.
    unclipped: np.ndarray | None = None

    def bind(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
        """Learn the env's spaces before a rollout (and check they fit the agent)."""
        self.observation_space = observation_space
        self.action_space = action_space

    def initial_state(self, seed: np.random.SeedSequence) -> Any:
        return None

    def reset(self) -> None:
        return None

    def act(self, obs: np.ndarray, states: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def check_finite(out: np.ndarray, name: str) -> None:
    """Raise a :class:`~pytest_rlaudit.errors.NonFiniteOutputError` if the float output
    ``out`` of the agent ``name`` (first axis: one row per observation) holds NaN or an
    infinite value: an argmax or a clip downstream would hide it. One ``isfinite`` pass per
    batch; the culprit row is looked for only when there is one.

    >>> check_finite(np.array([[0.5, 1.0], [np.nan, 0.0]]), "net")
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.NonFiniteOutputError: net output [nan, 0.0] for row 1 of its batch...
    """
    if out.dtype.kind != "f" or np.isfinite(out).all():
        return
    bad = ~np.isfinite(out.reshape(len(out), -1)).all(axis=1) if out.ndim else np.array([True])
    row = int(np.argmax(bad))
    value = out[row] if out.ndim else out
    raise NonFiniteOutputError(
        f"{name} output {np.asarray(value).tolist()!r} for row {row} of its batch: NaN or "
        "infinite, which no action can stand for", row=row, output=value)


def unclipped_actions(policy: Any, rows: int) -> np.ndarray | None:
    """The unclipped actions of ``policy``'s last ``act`` on ``rows`` rows (the
    ``unclipped`` of it or of the policy it wraps, however deep), or None when that call
    clipped nothing; then cleared, so that a later call that clips nothing reads None.

    >>> class Clipping(BasePolicy):
    ...     def act(self, obs, states):
    ...         self.unclipped = obs * 3.0
    ...         return np.clip(self.unclipped, -1, 1), None
    >>> p = Clipping()
    >>> _ = p.act(np.array([[0.5]]), None)
    >>> unclipped_actions(p, 1).tolist(), unclipped_actions(p, 1)
    ([[1.5]], None)
    """
    found, seen = None, 0
    while policy is not None and seen < 32:  # a wrapper chain, never a cycle in practice
        own = getattr(policy, "__dict__", {})  # not __getattr__: wrappers delegate to it
        if found is None and own.get("unclipped") is not None:
            found = own["unclipped"][:rows]
        if "unclipped" in own:
            policy.unclipped = None
        policy, seen = own.get("policy"), seen + 1
    return found


def clip_hidden(policy: Any) -> bool:
    """Whether ``policy`` (or a policy it wraps) clips its Box actions where the unclipped
    ones cannot be read (its ``clip_hidden``: SB3's own ``predict`` of a recurrent policy).

    >>> clip_hidden(BasePolicy())
    False
    """
    seen = 0
    while policy is not None and seen < 32:
        own = getattr(policy, "__dict__", {})
        if own.get("clip_hidden"):
            return True
        policy, seen = own.get("policy"), seen + 1
    return False
