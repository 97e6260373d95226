"""Public facade: hypothesis strategies over perturbations (``pytest_rlaudit.world.strategies``).

Importing it needs hypothesis (``pip install 'pytest-rlaudit[hypothesis]'``).
"""

from .world.strategies import *  # noqa: F403
from .world.strategies import __all__  # noqa: F401
