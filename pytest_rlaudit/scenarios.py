"""Public facade: the scenario registry (``pytest_rlaudit.world.scenarios``).

>>> from pytest_rlaudit import scenarios
>>> scenarios.get("jitter").params["base"]
2
"""

from .world.scenarios import *  # noqa: F403
from .world.scenarios import __all__  # noqa: F401
