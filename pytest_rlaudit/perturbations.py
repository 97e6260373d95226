"""Public facade: the perturbation wrappers (``pytest_rlaudit.world.perturbations``) and
:class:`~pytest_rlaudit.world.mix.ScenarioMix`, which trains under several of them.

>>> import gymnasium as gym
>>> from pytest_rlaudit.perturbations import Jitter, ScenarioMix
>>> env = Jitter(gym.make("CartPole-v1"), base=2, jitter=1)
>>> env = ScenarioMix(gym.make("CartPole-v1"), ["nominal", "spike", "speed_5x"])
"""

from .world.mix import ScenarioMix
from .world.perturbations import *  # noqa: F403
from .world.perturbations import __all__ as _WRAPPERS

__all__ = [*_WRAPPERS, "ScenarioMix"]
