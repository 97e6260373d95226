"""What the reports recommend and whether a benchmark backs it: the two marks every medium
prints, and the ScenarioMix line that trains under what broke an agent, weighted by the
audit's own episode lengths. Standard library only: the renderers import it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence

from .. import _format

__all__ = ["BENCHMARKED", "UNTESTED", "MIX_WEIGHT_CAP", "mix_weights", "mix_line", "mix_mark",
           "short_fix"]

#: The mark of a recommendation that a benchmark has shown to raise the failing ratio.
BENCHMARKED = "shown to raise the ratio in benchmarks/bench_fixes.py"
#: The mark of every other recommendation.
UNTESTED = "untested suggestion"

_GYM_ID = re.compile(r"[\w.:/-]+-v\d+")

#: The largest weight :func:`mix_weights` gives a scenario: beyond it the nominal env
#: would get under a tenth of a failing scenario's episodes, and a scenario whose episodes
#: end at once would take nearly all the training.
MIX_WEIGHT_CAP = 10

#: The env and the very set of failing scenarios whose weighted ScenarioMix line
#: benchmarks/bench_fixes.py trained the bundled recipe under (500,000 steps, seed 0) and
#: saw every failing ratio rise with the nominal return kept: spike 0.208 -> 0.726,
#: speed_5x 0.135 -> 0.647 (docs/benchmarks.md). Any other line is untested.
_BENCHMARKED_MIX: dict[str, frozenset[str]] = {"CartPole-v1": frozenset({"spike", "speed_5x"})}


def mix_weights(nominal_steps: float, steps: Sequence[float]) -> list[int]:
    """ScenarioMix weights, nominal first (weight 1): each scenario's weight is the
    nominal episodes' mean length over its own (both in env steps, as the audit measured
    them), rounded, at least 1 and at most :data:`MIX_WEIGHT_CAP`.

    ScenarioMix draws a scenario per episode, so a scenario's share of the training steps
    is its weight times its episode length: where the agent fails, its episodes are short
    and uniform weights starve it. Weights inverse to the lengths give each scenario about
    the nominal env's share of env steps while the agent still fails there, and no more
    than the cap once it learns to last (then a timing scenario's episodes, counted in
    agent steps, are shorter than nominal ones anyway).

    >>> mix_weights(500, [103.8, 67.5])
    [1, 5, 7]
    >>> mix_weights(200, [200, 190, 1])
    [1, 1, 1, 10]
    """
    if not (math.isfinite(nominal_steps) and nominal_steps > 0):
        raise ValueError(f"mix_weights: the nominal mean episode length must be a positive "
                         f"number of env steps, got {nominal_steps!r}")
    weights = [1]
    for length in steps:
        if not (math.isfinite(length) and length > 0):
            raise ValueError(f"mix_weights: a mean episode length must be a positive number "
                             f"of env steps, got {length!r}")
        weights.append(min(MIX_WEIGHT_CAP, max(1, round(nominal_steps / length))))
    return weights


def mix_line(env: str, names: Sequence[str], weights: Sequence[int] | None) -> str:
    """The ScenarioMix line that trains under ``names`` (the nominal env first) by
    ``weights`` (from :func:`mix_weights`; None, or all equal: uniform, left unsaid).

    >>> mix_line("Pendulum-v1", ["delay"], [1, 3])
    'ScenarioMix(gym.make("Pendulum-v1"), ["nominal", "delay"], weights=[1, 3])'
    >>> mix_line("my_env", ["delay"], None)
    'ScenarioMix(env, ["nominal", "delay"])'
    """
    # an id gymnasium can make (CartPole-v1, ALE/Pong-v5); else the user's own env
    made = f'gym.make("{env}")' if _GYM_ID.fullmatch(env) else "env"
    line = f"ScenarioMix({made}, {json.dumps(['nominal', *names])}"
    if weights is not None and len(set(weights)) > 1:
        line += f", weights={json.dumps(list(weights))}"
    return line + ")"


def mix_mark(env: str, names: Sequence[str], weights: Sequence[int] | None) -> str:
    """:data:`BENCHMARKED` if benchmarks/bench_fixes.py trained the bundled recipe under
    this env's line weighted by :func:`mix_weights` for this very set of scenarios and
    their ratios rose; else :data:`UNTESTED` (another env or set of scenarios, or
    unweighted: uniform weights left the bundled agent's failures at FAIL).

    >>> mix_mark("Pendulum-v1", ["delay"], [1, 3])
    'untested suggestion'
    >>> mix_mark("CartPole-v1", ["spike", "speed_5x"], [1, 5, 7])
    'shown to raise the ratio in benchmarks/bench_fixes.py'
    """
    tested = weights is not None and frozenset(names) == _BENCHMARKED_MIX.get(env)
    return BENCHMARKED if tested else UNTESTED


def short_fix(fix: str) -> str:
    """A fix's first clause, keeping its mark: "train with Speed(env, k=5) (untested
    suggestion)".

    >>> short_fix(f"train with Speed(env, k=5) or with Jitter; or not ({UNTESTED})")
    'train with Speed(env, k=5) (untested suggestion)'
    """
    first = _format.short_fix(fix)
    for mark in (UNTESTED, BENCHMARKED):
        if fix.endswith(f"({mark})") and not first.endswith(f"({mark})"):
            return f"{first} ({mark})"
    return first
