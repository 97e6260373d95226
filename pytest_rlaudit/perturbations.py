"""Public facade: the perturbation wrappers (``pytest_rlaudit.world.perturbations``).

>>> import gymnasium as gym
>>> from pytest_rlaudit.perturbations import Jitter
>>> env = Jitter(gym.make("CartPole-v1"), base=2, jitter=1)
"""

from .world.perturbations import *  # noqa: F403
from .world.perturbations import __all__  # noqa: F401
