"""What a test registers, undone after it: the suite passes in any order, with or without xdist.

A pytester run in this process executes its conftest here, so a scenario it registers
(``scenarios.register(Scenario("crash", ...))``) or an env id it adds to gymnasium's
registry lands in the registries every later test reads: ``tests/world/test_pickles.py``,
which pickles every registered scenario, then failed on a pytester conftest's class when
the suite ran without xdist (with xdist the two tests happened to sit on other workers).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import gymnasium as gym

from pytest_rlaudit.world import scenarios


@contextmanager
def restored() -> Iterator[None]:
    """Undo on exit every registration made inside: scenarios and gymnasium env ids.

    >>> from pytest_rlaudit import Scenario
    >>> from pytest_rlaudit.perturbations import ObservationNoise
    >>> with restored():
    ...     _ = scenarios.register(Scenario("only_here", "custom", ObservationNoise))
    >>> "only_here" in scenarios.names()
    False
    """
    # copies of the dicts themselves: both registries are module-level dicts that
    # register() and gym.register() write into, and other modules hold references to them
    kept_scenarios = dict(scenarios._REGISTRY)
    kept_envs = dict(gym.envs.registry)
    try:
        yield
    finally:
        scenarios._REGISTRY.clear()
        scenarios._REGISTRY.update(kept_scenarios)
        gym.envs.registry.clear()
        gym.envs.registry.update(kept_envs)
