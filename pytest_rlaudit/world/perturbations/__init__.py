"""Perturbations: Gymnasium wrappers, one class per behaviour.

Every wrapper here is an ordinary ``gymnasium.Wrapper`` and can be used on its own,
for example to train with the disturbance that broke an agent::

    >>> import gymnasium as gym
    >>> from pytest_rlaudit.perturbations import Jitter
    >>> env = Jitter(gym.make("CartPole-v1"), base=2, jitter=1)
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step(0)
    >>> reward in (1.0, 2.0, 3.0)
    True

Randomness. Each wrapper draws from its own ``numpy.random.Generator``, never from the
env's ``np_random`` (Gymnasium wrappers share the base env's generator, so a
perturbation drawing from it would change the env's own randomness and break the
pairing of nominal and perturbed episodes). ``reset(seed=s)`` derives the generator
from ``s`` and the wrapper's class name; the audit runner instead calls
:func:`seed_perturbations` before each reset to key it on (seed, episode, scenario).

Placement. Wrap outside the env's ``TimeLimit`` (``gym.make`` puts it innermost), so
episode limits count environment steps: CartPole under ``Speed(k=5)`` still ends at
500 environment steps and a return of at most 500.
"""


from __future__ import annotations

from .action import ActionDelay, ActionNoise, StickyAction
from .adversarial import AdversarialObservation
from .base import Perturbation, seed_perturbations
from .dynamics import Dynamics
from .groups import OnPart
from .observation import DroppedObservation, ObservationDelay, ObservationNoise
from .push import Push
from .timing import Jitter, Scheduled, Speed, SpeedSchedule, spike

__all__ = [
    "Perturbation",
    "Speed",
    "Jitter",
    "Scheduled",
    "SpeedSchedule",
    "spike",
    "ObservationDelay",
    "ObservationNoise",
    "DroppedObservation",
    "OnPart",
    "AdversarialObservation",
    "ActionNoise",
    "StickyAction",
    "ActionDelay",
    "Dynamics",
    "Push",
    "seed_perturbations",
]
