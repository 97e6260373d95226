"""scipy's statistics, imported when a statistic is first computed, not with the package.

``scipy.stats`` takes about 2 s of CPU to import (it loads scipy.optimize, .sparse and
.spatial and builds every distribution), three times the rest of the public API. Imported
with the modules of :mod:`pytest_rlaudit.stats`, it was paid by every test file's
``from pytest_rlaudit import assert_robust`` at collection, in every xdist worker, even in
a run whose audits are all skipped (no ``--rl-audit``).

>>> float(scipy_stats().norm.ppf(0.5))
0.0
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["scipy_stats"]


def scipy_stats() -> ModuleType:
    """``scipy.stats``, imported on the first call; later calls find it in ``sys.modules``."""
    import scipy.stats

    module: ModuleType = scipy.stats
    return module
