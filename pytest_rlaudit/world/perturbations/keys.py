"""What a perturbation of the observations does to a Dict observation: the keys it acts
on (the observed state) and the keys it leaves alone (the goal), in one place for every
wrapper.

A goal-conditioned env (gymnasium-robotics' goal envs, the zoo's HER agents) observes a
Dict of ``observation``, ``achieved_goal`` and ``desired_goal``. The first two are
measured: the robot's sensors read its state, and the achieved goal is a function of that
state (the gripper's position). The desired goal is a command: it is given, not measured.
So by default a sensing disturbance (noise, a delay, a dropped frame) acts on every key
but ``desired_goal``: a noisy or stale sensor corrupts the state and what it says was
achieved alike (a delay that froze ``observation`` but not ``achieved_goal`` would show
the agent two moments at once), while the command stays the current one. ``keys=``
chooses other keys (``keys=("observation",)``; ``keys=("desired_goal",)`` to disturb the
command). A Dict without a ``desired_goal`` (an image and a state vector, say) is
disturbed in every key by default.

Observations that are not a Dict are acted on whole, as ever (``keys`` is then an error).

>>> from gymnasium import spaces
>>> goal_env = spaces.Dict({"observation": spaces.Box(-1, 1, (3,)),
...                         "achieved_goal": spaces.Box(-1, 1, (2,)),
...                         "desired_goal": spaces.Box(-1, 1, (2,))})
>>> ObservedKeys("ObservationDelay", goal_env).keys
('achieved_goal', 'observation')
>>> ObservedKeys("ObservationDelay", goal_env, keys="observation").keys
('observation',)
>>> ObservedKeys("ObservationDelay", spaces.Box(-1, 1, (3,))).keys is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from ...errors import PerturbationError

__all__ = ["COMMAND_KEYS", "ObservedKeys", "observed_keys", "keys_argument"]

#: Keys of a Dict observation that are commands, not measurements: left alone by default.
COMMAND_KEYS: tuple[str, ...] = ("desired_goal",)


def keys_argument(owner: str, keys: Any) -> tuple[str, ...] | None:
    """``keys`` as given to a wrapper (None, a key, or a sequence of keys) as a tuple.

    >>> keys_argument("ObservationNoise", ["observation"])
    ('observation',)
    >>> keys_argument("ObservationNoise", [])
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.PerturbationError: ObservationNoise: keys must be a key of the Dict ...
    """
    if keys is None:
        return None
    listed = [keys] if isinstance(keys, str) else keys
    if not isinstance(listed, Sequence) or not listed or not all(
            isinstance(k, str) for k in listed):
        raise PerturbationError(f"{owner}: keys must be a key of the Dict observation or a "
                                f"non-empty sequence of them, got {keys!r}")
    return tuple(listed)


def observed_keys(names: Iterable[str], keys: Sequence[str] | str | None = None, *,
                  owner: str = "the perturbation") -> tuple[str, ...]:
    """The keys of a Dict observation (``names``) a perturbation acts on, sorted (the
    order of gymnasium's Dict spaces, and of a calibrated ``spread``): ``keys`` when
    given (each must be one of ``names``), else every key but :data:`COMMAND_KEYS`.

    >>> observed_keys(["observation", "achieved_goal", "desired_goal"])
    ('achieved_goal', 'observation')
    >>> observed_keys(["observation", "desired_goal"], ["goal"], owner="ObservationNoise")
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.PerturbationError: ObservationNoise: keys names 'goal', not a key ...
    """
    present = sorted(str(n) for n in names)
    chosen = keys_argument(owner, keys)
    if chosen is None:
        return tuple(n for n in present if n not in COMMAND_KEYS)
    unknown = [k for k in chosen if k not in present]
    if unknown:
        raise PerturbationError(
            f"{owner}: keys names {', '.join(map(repr, unknown))}, not a key of the Dict "
            f"observation (its keys: {', '.join(present)})")
    return tuple(n for n in present if n in chosen)


class ObservedKeys:
    """The parts of ``space``'s observations a wrapper called ``owner`` acts on:
    :attr:`keys` (see :func:`observed_keys`) for a Dict space, None for any other (the
    observation whole)."""

    def __init__(self, owner: str, space: spaces.Space[Any], keys: Any = None) -> None:
        self.owner = owner
        self.space = space
        self.keys: tuple[str, ...] | None
        if isinstance(space, spaces.Dict):
            self.keys = observed_keys(space.spaces, keys, owner=owner)
        elif keys is not None:
            raise PerturbationError(
                f"{owner}: keys= chooses keys of a Dict observation, but this env's "
                f"observation space is {space}; leave keys out")
        else:
            self.keys = None

    def parts(self) -> dict[str | None, spaces.Space[Any]]:
        """Each part acted on and its space (key None: the whole observation)."""
        if self.keys is None:
            return {None: self.space}
        assert isinstance(self.space, spaces.Dict)
        return {k: self.space.spaces[k] for k in self.keys}

    def map(self, obs: Any, change: Callable[[Any, Any], Any]) -> Any:
        """``obs`` with each part acted on replaced by ``change(key, part)``, in key
        order (so a generator's draws follow it); other keys as they are."""
        if self.keys is None:
            return change(None, obs)
        out = dict(obs)
        for key in self.keys:
            out[key] = change(key, obs[key])
        return out

    def held(self, held: Any, current: Any) -> Any:
        """What the agent sees when a wrapper shows an earlier observation ``held``: its
        parts acted on, with ``current``'s other keys (the current command)."""
        if self.keys is None:
            return held
        out = dict(current)
        for key in self.keys:
            out[key] = held[key]
        return out

    def split(self, values: Any) -> dict[str | None, np.ndarray]:
        """A flat sequence of one value per element of the parts (a calibrated
        ``spread``), cut into one array per part, shaped as the part."""
        flat = np.asarray(values, dtype=np.float64).ravel()
        out: dict[str | None, np.ndarray] = {}
        at = 0
        for key, part in self.parts().items():
            shape = tuple(part.shape or ())
            size = int(np.prod(shape)) if shape else 1
            out[key] = flat[at:at + size].reshape(shape)
            at += size
        return out

    def size(self) -> int:
        """The number of elements in the parts."""
        return sum(int(np.prod(p.shape)) if p.shape else 1 for p in self.parts().values())
