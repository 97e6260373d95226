"""Adaptive sampling: paired episodes in rounds until the verdict is decided.

A group-sequential design on repeated confidence intervals (RCIs) of the return ratio:
Lan-DeMets error spending with a Hwang-Shih-DeCani spending function (its boundaries in
:mod:`.spending`). See :func:`adaptive_sample` for the method and its error guarantee;
:func:`adaptive_decisions` applies the same rule to many simulated runs at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .paired import check_reference
from .ratings import MODES
from .scipy_lazy import scipy_stats
from .spending import SPENDING_GAMMA, look_bounds

__all__ = ["AdaptiveResult", "AdaptiveRuns", "adaptive_sample", "adaptive_decisions",
           "look_bounds", "SPENDING_GAMMA", "FAIL_MARGIN_SHARE"]

# Offsets (in standard errors of the ratio) at which an interval end is searched for.
_SCAN = np.array([0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 1024], float)
_STOPS = ("", "decided", "settled", "narrow", "max_episodes")
#: The share of the point-mode margin a settled FAIL may use (a PASS uses all of it); why
#: half: :func:`adaptive_sample`'s docstring.
FAIL_MARGIN_SHARE = 0.5


@dataclass(frozen=True)
class AdaptiveResult:
    """The outcome of :func:`adaptive_sample`: the data it ended with and why it stopped.

    ``ci`` is the repeated confidence interval at the last look, ``look_confidence`` its
    pointwise level; ``margin`` the point-mode margin at that look (0 in other modes)."""

    nominal: np.ndarray
    perturbed: np.ndarray
    ci: tuple[float, float]
    looks: int
    planned_looks: int
    look_confidence: float
    stopped: str
    margin: float = 0.0


@dataclass(frozen=True)
class AdaptiveRuns:
    """The outcome of :func:`adaptive_decisions`, one entry per run (row)."""

    episodes: np.ndarray  # episodes spent
    ratio: np.ndarray  # point ratio at the stop
    ci: np.ndarray  # (runs, 2): the repeated interval at the stop
    looks: np.ndarray
    stopped: np.ndarray  # "decided", "settled", "narrow" or "max_episodes"


def _moments(nominal: np.ndarray, perturbed: np.ndarray, reference: float) -> dict[str, Any]:
    """Means and central co-moments (up to third order) of ``a = nominal - reference`` and
    ``b = perturbed - reference`` over the last axis: every statistic of
    ``D(x) = b - x a`` follows from them, for any ratio ``x``."""
    a = nominal - reference
    b = perturbed - reference
    ma, mb = a.mean(-1), b.mean(-1)
    da, db = a - ma[..., None], b - mb[..., None]
    m = {k: (u * v).mean(-1) for k, (u, v) in
         {"aa": (da, da), "ab": (da, db), "bb": (db, db)}.items()}
    m |= {k: (u * v * w).mean(-1) for k, (u, v, w) in
          {"aaa": (da, da, da), "aab": (da, da, db), "abb": (da, db, db),
           "bbb": (db, db, db)}.items()}
    return {"n": a.shape[-1], "a": ma, "b": mb, **m}


def _statistic(x: np.ndarray, m: dict[str, Any], crit: float) -> np.ndarray:
    """Hall's skewness-corrected studentized mean of ``D(x)``, to compare with ``crit``
    (``m``'s arrays broadcast against ``x``).

    Capped returns skew D (CartPole's long left tail), and a plain t then passes at the
    threshold far too often (8.6% instead of 2.5%); Hall's monotone cubic correction (JRSS B
    54:221, 1992) brings that back to 2.5-3%. Its coefficient is capped at ``0.3 / crit``:
    beyond 1/3 the cubic flattens the heavy side to a plateau below ``crit`` and no sample,
    however clear (every perturbed episode at 30% of a constant nominal), could decide."""
    n = m["n"]
    mean = m["b"] - x * m["a"]
    m2 = m["bb"] - 2 * x * m["ab"] + x * x * m["aa"]
    m3 = m["bbb"] - 3 * x * m["abb"] + 3 * x * x * m["aab"] - x ** 3 * m["aaa"]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        pos = m2 > 0
        safe = np.where(pos, m2, 1.0)
        t = np.where(pos, mean * math.sqrt(n - 1) / np.sqrt(safe), np.sign(mean) * np.inf)
        lam = np.where(pos, m3 / safe ** 1.5, 0.0) / (3 * math.sqrt(n))
        lam = np.clip(lam, -0.3 / crit, 0.3 / crit)
        h = t + lam * t * t + lam * lam * t ** 3 / 3 + lam / 2
        # an exact fit (no variance) is infinitely significant, or not at all at its ratio
        return np.where(np.isfinite(h), h, np.where(np.isnan(t), 0.0, t))


def _look(nominal: np.ndarray, perturbed: np.ndarray, z: float,
          reference: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ratio, low, high, standard error) over the last axis: the interval is the set of
    ratios ``x`` with ``|statistic(x)| <= t_{n-1}(Phi(z))`` around the point (Fieller's
    inversion of the paired test), its ends found by a scan outward and bisection."""
    m = _moments(nominal, perturbed, reference)
    n = m["n"]
    point = m["b"] / m["a"]
    resid = np.maximum(m["bb"] - 2 * point * m["ab"] + point * point * m["aa"], 0.0)
    se = np.sqrt(resid / (n - 1)) / np.abs(m["a"])
    scale = np.maximum.reduce([np.ones_like(point), np.abs(m["a"]), np.abs(m["b"]),
                               np.sqrt(m["aa"]), np.sqrt(m["bb"])])
    flat = np.sqrt(resid) <= 1e-12 * scale  # the ratio cannot vary: the point interval
    st = scipy_stats()
    crit = float(st.t.isf(st.norm.sf(z), n - 1))
    # both ends at once on a trailing (low, high) axis
    side = np.array([-1.0, 1.0])
    step = np.where(flat, 0.0, se)[..., None] * side
    centre = point[..., None]
    wide = {k: v if k == "n" else np.asarray(v)[..., None, None] for k, v in m.items()}
    out = np.abs(_statistic(centre[..., None] + step[..., None] * _SCAN, wide, crit)) > crit
    j = np.argmax(out, axis=-1)
    found = out.any(-1) | flat[..., None]
    lo, hi = np.where(j > 0, _SCAN[np.maximum(j - 1, 0)], 0.0), _SCAN[j]
    near = {k: v if k == "n" else np.asarray(v)[..., None] for k, v in m.items()}
    for _ in range(24):  # the end to within 2**-24 of its bracket (<= 512 standard errors)
        mid = (lo + hi) / 2
        beyond = np.abs(_statistic(centre + mid * step, near, crit)) > crit
        lo, hi = np.where(beyond, lo, mid), np.where(beyond, mid, hi)
    ends = np.where(found, centre + hi * step, side * np.inf)
    return point, ends[..., 0], ends[..., 1], np.where(flat, 0.0, se)


def _stop(point: np.ndarray, low: np.ndarray, high: np.ndarray, margin: np.ndarray,
          threshold: float | None, mode: str | None, strict: bool,
          target_ci_width: float | None, last: bool) -> np.ndarray:
    """The index into ``_STOPS`` of why a run stops at this look (0: go on)."""
    code = np.zeros(np.shape(point), int)
    if last:
        code[...] = 4
    if target_ci_width is not None:
        code = np.where(high - low <= target_ci_width, 3, code)
    if threshold is not None:
        def above(x: np.ndarray) -> np.ndarray:
            return x > threshold if strict else x >= threshold

        if mode == "point":
            settled = np.where(above(point), above(low + margin),
                               ~above(high - FAIL_MARGIN_SHARE * margin))
            code = np.where(settled, 2, code)
        code = np.where(above(low) | ~above(high), 1, code)
    return code


def _plan(episodes: int, max_episodes: int, round_size: int | None, threshold: float | None,
          target_ci_width: float | None, mode: str | None) -> list[int]:
    if episodes < 2 or max_episodes < episodes:
        raise ValueError(
            f"adaptive sampling needs 2 <= episodes <= max_episodes, got {episodes}, {max_episodes}"
        )
    if threshold is None and target_ci_width is None:
        raise ValueError("adaptive sampling needs a threshold or a target_ci_width to stop on")
    if target_ci_width is not None and not target_ci_width > 0:
        raise ValueError(f"target_ci_width must be > 0, got {target_ci_width}")
    if mode is not None and mode not in MODES:
        raise ValueError(f"unknown verdict mode {mode!r}; modes are {', '.join(MODES)}")
    if round_size is not None and round_size < 1:
        raise ValueError(f"round_size must be >= 1, got {round_size}")
    step = round_size or episodes
    return [*range(episodes, max_episodes, step), max_episodes]


def _margin_factor(max_episodes: int, confidence: float) -> float:
    # the half-width, in standard errors, of a fixed-sample interval from max_episodes
    return float(scipy_stats().t.ppf(1.0 - (1.0 - confidence) / 2.0, max(max_episodes - 1, 1)))


def adaptive_sample(
    more: Callable[[int, int], tuple[np.ndarray, np.ndarray]],
    *,
    episodes: int,
    max_episodes: int,
    threshold: float | None = None,
    target_ci_width: float | None = None,
    reference: float = 0.0,
    confidence: float = 0.95,
    seed: int = 0,
    round_size: int | None = None,
    strict: bool = False,
    n_resamples: int = 9999,
    mode: str | None = None,
    gamma: float = SPENDING_GAMMA,
) -> AdaptiveResult:
    """Add paired episodes in rounds until the verdict is decided or the interval is narrow.

    ``more(start, stop)`` returns the nominal and perturbed returns of episodes
    ``start .. stop-1``. The first look uses ``episodes``; each further round adds
    ``round_size`` (default: ``episodes``) up to ``max_episodes``. It stops early when the
    interval lies wholly on one side of ``threshold`` ("decided"), when it is narrower than
    ``target_ci_width`` ("narrow") or, with ``mode="point"``, when the point verdict is
    settled ("settled", below); else at ``max_episodes``, where the caller judges as usual.

    Method: a group-sequential design with repeated confidence intervals (Jennison &
    Turnbull 1989, JRSS B 51:305; their book, 2000, ch. 7 and 9). "ratio >= x" is "mean(D) >=
    0" for the paired differences ``D_i = (perturbed_i - ref) - x (nominal_i - ref)``; their
    studentized mean at the looks is, in large samples, a Brownian motion observed at
    information proportional to episodes. :func:`look_bounds` spends ``alpha = 1 -
    confidence`` over the planned looks (Lan & DeMets 1983, Biometrika 70:659, with the
    Hwang-Shih-DeCani 1990 function, ``gamma``) and gives critical values ``c_k``; the look's
    interval is every ratio ``x`` whose statistic, skewness-corrected (Hall 1992), lies
    within the ``t[n-1]`` quantile at level ``Phi(c_k)`` (Fieller's inversion).

    Guarantee. In the normal-theory model the design rests on, the intervals of all looks
    cover the true ratio at once with probability ``confidence``; in small samples the t
    quantile and Hall's correction make this approximate (measured at the threshold over 20,000
    runs of 20 looks, 10 to 200 episodes: up to 2.7% per side on smooth returns and 3.0% on
    skewed CartPole-like ones, for a nominal 2.5%; 3.2% with 39 looks, rounds of 5). Hence,
    whatever the true ratio and however many looks:

    - a "decided" stop lands on the wrong side of the threshold with probability at most
      ``alpha / 2`` per side (``alpha = 1 - confidence``), so ``confident`` and
      ``not_worse`` verdicts keep their one-sided error;
    - with ``mode="point"`` (verdict ``ratio >= threshold``), it also stops once the point
      verdict is right to within ``m = t[N-1](1 - alpha/2) * SE_N``, the half-width of a
      fixed-sample interval from all ``N = max_episodes`` episodes (``SE_N`` estimated at
      each look as ``SE_n * sqrt(n / N)``): a PASS needs the interval above
      ``threshold - m``, a FAIL below ``threshold + m / 2`` (:data:`FAIL_MARGIN_SHARE`). An
      early PASS when the true ratio is below ``threshold - m``, or FAIL when it is above
      ``threshold + m / 2``, has probability at most ``alpha / 2``: stopping early costs no
      more than the resolution that ``max_episodes`` episodes would have had, and a FAIL,
      the error that breaks a CI job, half of it.

    Why half for a FAIL. ``m`` grows with the returns' spread. On bimodal returns (an
    episode survives whole or collapses early: CartPole's timing failures) it is wide, about
    0.045 at 200 episodes, so a true 0.85 lay barely beyond ``threshold + m`` and the whole
    margin stopped it early for FAIL 1.3% of the time (collapse to 0.2 of the return), on top
    of the 1.2% the 200-episode point verdict fails by itself: 2.1% in all. Half the margin
    leaves 0.1% of early FAILs, so the false-fail rate is the 200-episode verdict's own (no
    stopping rule capped at ``max_episodes`` can do better than that without stopping to
    PASS more eagerly), at the cost of 10-20 more episodes (medians) for clearly failing
    agents (bimodal ones, and smooth ones: 30 instead of 20) and none at 0.85.

    Measured with rounds of 10 up to 200, threshold 0.8, ``mode="point"``, 20,000 runs
    (``tests/stats/test_sequential.py``, ``benchmarks/bench_adaptive.py``): false-fail
    0.2-0.3% at a true ratio of 0.85 and power 99.9% at 0.70, on smooth and CartPole-like
    returns, with median episodes 30 at 0.70 and 50-80 at 0.85 (190 summed over the
    four), where the Bonferroni shares this replaced spent 40-50 and 140-180 (410 summed).
    On bimodal returns (``bimodal`` there) false-fail 0.73% at a collapse to 0.3 (the
    200-episode verdict alone: 0.68%), 1.2% at 0.2 (1.2%), 1.8% at 0.1 (1.8%), and power
    98-100% at 0.70 in medians of 40-60 episodes.

    Rounds. Smaller rounds after the first stage (``round_size``) buy little: rounds of 5
    instead of 10 spend 0-7% fewer episodes on average on those returns (the summed medians
    185 instead of 190 over 2,000 runs, mostly the finer look grid) in up to twice the rounds, and a
    round has a cost of its own besides its episodes (an audit plays them side by side):
    ``check_robust`` on CartPole took 12-19% longer in rounds of 5. Hence the default.
    ``seed`` and ``n_resamples`` are kept for compatibility: the interval is analytic now.

    >>> rng = np.random.default_rng(0)
    >>> def more(start, stop):
    ...     n = rng.normal(100, 5, stop - start)
    ...     return n, n * 0.5
    >>> res = adaptive_sample(more, episodes=10, max_episodes=40, threshold=0.8)
    >>> res.stopped, res.looks
    ('decided', 1)
    """
    # One loop: the looks, their bounds and the stopping rules share its state.
    looks = _plan(episodes, max_episodes, round_size, threshold, target_ci_width, mode)
    bounds = look_bounds(looks, confidence, gamma)
    factor = _margin_factor(max_episodes, confidence)
    nominal, perturbed = more(0, episodes)
    nominal, perturbed = np.asarray(nominal, float), np.asarray(perturbed, float)
    for k, stop_at in enumerate(looks):
        if k:
            n_new, p_new = more(len(nominal), stop_at)
            nominal = np.concatenate([nominal, np.asarray(n_new, float)])
            perturbed = np.concatenate([perturbed, np.asarray(p_new, float)])
        check_reference(float(nominal.mean()), reference)
        point, low, high, se = _look(nominal, perturbed, float(bounds[k]), reference)
        margin = factor * float(se) * math.sqrt(stop_at / max_episodes) if mode == "point" else 0.0
        code = int(_stop(point, low, high, np.asarray(margin), threshold, mode, strict,
                         target_ci_width, k == len(looks) - 1))
        if code:
            level = 2.0 * float(scipy_stats().norm.cdf(bounds[k])) - 1.0
            return AdaptiveResult(nominal, perturbed, (float(low), float(high)), k + 1,
                                  len(looks), level, _STOPS[code], margin)
    raise AssertionError("unreachable: the last look always stops")


def adaptive_decisions(
    nominal: np.ndarray,
    perturbed: np.ndarray,
    *,
    episodes: int,
    threshold: float | None = None,
    target_ci_width: float | None = None,
    reference: float = 0.0,
    confidence: float = 0.95,
    round_size: int | None = None,
    strict: bool = False,
    mode: str | None = None,
    gamma: float = SPENDING_GAMMA,
) -> AdaptiveRuns:
    """:func:`adaptive_sample`'s rule applied to many runs at once, for simulations: row
    ``i`` of the ``(runs, max_episodes)`` arrays holds run ``i``'s episodes in order.

    >>> rng = np.random.default_rng(0)
    >>> nom = rng.normal(100, 15, (3, 40))
    >>> runs = adaptive_decisions(nom, 0.5 * nom + rng.normal(0, 10, (3, 40)), episodes=10,
    ...                           threshold=0.8, mode="point")
    >>> runs.episodes.tolist(), runs.stopped.tolist()
    ([10, 10, 10], ['decided', 'decided', 'decided'])
    """
    nominal, perturbed = np.asarray(nominal, float), np.asarray(perturbed, float)
    if nominal.ndim != 2 or nominal.shape != perturbed.shape:
        raise ValueError("nominal and perturbed must be (runs, max_episodes) arrays of one shape, "
                         f"got {nominal.shape} and {perturbed.shape}")
    runs, max_episodes = nominal.shape
    looks = _plan(episodes, max_episodes, round_size, threshold, target_ci_width, mode)
    bounds = look_bounds(looks, confidence, gamma)
    factor = _margin_factor(max_episodes, confidence)
    used, look = np.zeros(runs, int), np.zeros(runs, int)
    point, ci, why = np.zeros(runs), np.zeros((runs, 2)), np.zeros(runs, int)
    active = np.arange(runs)
    for k, n in enumerate(looks):
        nom, per = nominal[active, :n], perturbed[active, :n]
        if not (nom.mean(-1) > reference).all():
            check_reference(float(nom.mean(-1).min()), reference)
        r, low, high, se = _look(nom, per, float(bounds[k]), reference)
        margin = factor * se * math.sqrt(n / max_episodes) if mode == "point" else 0 * se
        code = _stop(r, low, high, margin, threshold, mode, strict, target_ci_width,
                     k == len(looks) - 1)
        done = code > 0
        idx = active[done]
        used[idx], look[idx], point[idx], why[idx] = n, k + 1, r[done], code[done]
        ci[idx] = np.stack([low[done], high[done]], axis=-1)
        active = active[~done]
        if not len(active):
            break
    return AdaptiveRuns(used, point, ci, look, np.asarray(_STOPS, dtype=object)[why])
