"""Diagnoses: for a scenario rated below PASS, what broke, why, and what to train with.

A :class:`Diagnosis` has three parts: ``pattern`` (what the numbers show, including
*when* in the episode things break), ``cause`` (the likely reason) and ``fix`` (the
wrapper and parameters to train with, or the architecture change). The texts are keyed
on the scenario's perturbation, so a custom scenario built on a known wrapper gets the
right advice too.

>>> import numpy as np
>>> from pytest_rlaudit import scenarios
>>> d = diagnose(scenarios.get("jitter"), nominal_env_steps=np.array([500, 500]),
...              perturbed_env_steps=np.array([120, 80]), parting=None,
...              ratio=0.2, rating="FAIL")
>>> d.fix
'train with Jitter(env, base=2, jitter=1) (a randomised control period)...'
>>> d.fix.endswith(f"({UNTESTED})")
True

A fix is either benchmarked (``benchmarks/bench_fixes.py`` trained the bundled recipe
under it and the failing ratios rose: :data:`BENCHMARKED`) or an untested suggestion
(:data:`UNTESTED`); every report says which, in the words of :mod:`.fixes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _format
from ..world import perturbations as P
from ..world.scenarios import Scenario

# the marks and the ScenarioMix line live in .fixes (light: the reports import it);
# re-exported here, where a diagnosis' fix is written
from .fixes import (
    BENCHMARKED,
    MIX_WEIGHT_CAP,
    UNTESTED,
    mix_line,
    mix_mark,
    mix_weights,
    short_fix,
)

__all__ = ["Diagnosis", "diagnose", "parting_step", "unmeasurable", "BENCHMARKED", "UNTESTED",
           "MIX_WEIGHT_CAP", "mix_weights", "mix_line", "mix_mark", "short_fix"]


@dataclass(frozen=True)
class Diagnosis:
    """What broke (``pattern``), why (``cause``), and what to do (``fix``)."""

    pattern: str
    cause: str
    fix: str

    def __str__(self) -> str:
        return _format.diagnosis_sentence(self.pattern, self.cause, self.fix)

    def short(self) -> str:
        """What broke and what to do, in one line: the pattern's first clause and the fix's."""
        return f"{self.pattern.split('; ')[0]}; {short_fix(self.fix)}"

    def to_dict(self) -> dict[str, str]:
        return {"pattern": self.pattern, "cause": self.cause, "fix": self.fix}


def _arg(value: Any) -> str:
    """A parameter as the wrapper call shows it; a calibrated spread (one float per
    observation element) to 3 significant digits, which is all a training setup needs."""
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, float) for v in value):
        return "(" + ", ".join(f"{v:.3g}" for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _call(name: str, params: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={_arg(v)}" for k, v in params.items())
    return f"{name}(env{', ' if args else ''}{args})"


@dataclass(frozen=True)
class _Advice:
    """What to say of a perturbation: the likely ``cause`` and the ``fix``, in which
    ``{call}`` is the wrapper call with the scenario's params (named ``label``, default the
    wrapper's name). ``timeline``: a free-form schedule, whose cause and fix come from
    the channels it disturbs."""

    cause: str = ""
    fix: str = ""
    label: str | None = None
    timeline: bool = False
    #: the fix for an agent that already normalises its observations (no advice it follows)
    fix_normalized: str | None = None


_SPIKE = ("a transient slowdown (a latency spike) pushes the system out of the region the "
          "policy can recover from",
          "train with {call} or with Jitter over a wider range so it learns to recover; "
          "audit shorter spikes (spike with duration=5) to find the tolerable length")

#: Advice per perturbation, found through the wrapper's classes (a subclass of a known
#: wrapper gets its parent's advice).
_ADVICE: dict[Any, _Advice] = {
    P.Speed: _Advice(
        "the policy was trained at one control rate and cannot hold its state when the env "
        "advances several steps per decision",
        "train with {call} or with a randomised control period (Jitter(env, base=..., "
        "jitter=...)); or deploy at the training rate",
    ),
    P.Jitter: _Advice(
        "the policy assumes a fixed control period (variable inference latency changes how "
        "long each action lasts)",
        "train with {call} (a randomised control period); add the elapsed time to the "
        "observation if the hardware can measure it",
    ),
    P.Scheduled: _Advice(timeline=True),
    P.SpeedSchedule: _Advice(*_SPIKE),
    P.spike: _Advice(*_SPIKE, label="SpeedSchedule.spike"),
    P.ObservationDelay: _Advice(
        "the policy relies on fresh observations and acts on a stale state as if it were "
        "current",
        "train with {call}; give the policy history (gymnasium.wrappers."
        "FrameStackObservation) or memory (sb3-contrib RecurrentPPO)",
    ),
    P.ObservationNoise: _Advice(
        "the policy treats sensor noise as state and over-reacts to it",
        "train with {call}; normalise observations (VecNormalize) or filter the sensor",
        fix_normalized="train with {call}; filter the sensor (observations are already "
                       "normalised: scaling does not remove noise)",
    ),
    P.DroppedObservation: _Advice(
        "the policy relies on every frame arriving and acts on a frozen observation as if "
        "it were current",
        "train with {call}; give the policy memory (sb3-contrib RecurrentPPO) or frame "
        "stacking",
    ),
    P.ActionNoise: _Advice(
        "the policy depends on precise actuation",
        "train with {call}; prefer smoother policies (lower entropy at convergence, action "
        "penalties)",
    ),
    P.StickyAction: _Advice(
        "the policy relies on every action being executed when chosen",
        "train with {call} (Machado et al.'s sticky actions)",
    ),
    P.ActionDelay: _Advice(
        "the policy expects its actions to take effect immediately",
        "train with {call}, and let it see its pending actions (frame stacking of "
        "observations and past actions)",
    ),
    P.AdversarialObservation: _Advice(
        "small, well-chosen observation errors flip the policy's decisions: its decision "
        "boundaries lie close to the states it visits",
        "train with {call} attached to the training agent (adversarial training) or with "
        "ObservationNoise of the same size; prefer smoother policies (Lipschitz or "
        "gradient penalties)",
    ),
    P.Push: _Advice(
        "the policy never learned to recover from external shoves",
        "train with {call} (random pushes in training, as legged-robot training does); audit "
        "a smaller strength to find the margin",
    ),
    P.Dynamics: _Advice(
        "the policy is fitted to the nominal physics",
        "train with domain randomisation over the shifted parameters ({call} with factors "
        "drawn per episode)",
    ),
}


#: For each schedule channel, the stationary wrapper that trains for it, built from the
#: channel's largest value.
_CHANNEL_WRAPPERS: dict[str, tuple[Any, Any]] = {
    "speed": (P.Jitter, lambda k: {"base": 1, "jitter": k - 1}),
    "delay": (P.ObservationDelay, lambda d: {"steps": d}),
    "obs_noise": (P.ObservationNoise, lambda s: {"sigma": s}),
    "action_noise": (P.ActionNoise, lambda s: {"sigma": s}),
    "dropped": (P.DroppedObservation, lambda _: {"p": 0.1}),
}
_CHANNEL_CAUSES = {
    "speed": "a slowdown (each action held for several env steps) pushes the system out of "
             "the region the policy can recover from",
    "delay": "the policy acts on stale observations as if they were current",
    "obs_noise": "the policy treats sensor noise as state and over-reacts to it",
    "action_noise": "the policy depends on precise actuation",
    "dropped": "the policy acts on a frozen observation as if it were current",
}


def _schedule_advice(schedule: Any) -> tuple[str, str]:
    """(cause, fix) for a timeline: one clause per channel it disturbs."""
    channels = schedule.channels
    cause = "; ".join(_CHANNEL_CAUSES[c] for c in channels) or "none (the schedule is nominal)"
    calls = []
    for c in channels:
        wrapper, params = _CHANNEL_WRAPPERS[c]
        calls.append(_call(wrapper.__name__, params(schedule.max_value(c))))
    fix = f"train with Scheduled(env, {schedule!r}) (this timeline)"
    if calls:
        fix += f" or with {' and '.join(calls)} so it learns to recover"
    if "delay" in channels or "dropped" in channels:
        fix += "; give the policy memory (frame stacking, sb3-contrib RecurrentPPO)"
    return cause, fix


def parting_step(
    nominal: Sequence[np.ndarray], perturbed: Sequence[np.ndarray], *, reference: float = 0.0,
    tolerance: float = 0.05,
) -> tuple[float | None, int]:
    """The median env step at which perturbed episodes fall behind their nominal twins.

    ``nominal[i]`` and ``perturbed[i]`` are the rewards of episode ``i`` at every env step.
    A pair *parts* at the first env step where the perturbed return so far trails the
    nominal one by more than ``tolerance`` of the nominal episode's return above
    ``reference``, or where the perturbed episode ends while the nominal one goes on to
    more return. Only pairs whose final return drops by more than that tolerance count.
    Returns (median parting step, 1-based, or None; the number of pairs that parted).

    >>> parting_step([np.ones(4)], [np.ones(2)])   # the perturbed episode ends at step 2
    (2.0, 1)
    """
    steps = []
    for nom, per in zip(nominal, perturbed, strict=True):
        if len(nom) == 0 or len(per) == 0:
            continue
        cum_n, cum_p = np.cumsum(nom), np.cumsum(per)
        tol = tolerance * max(abs(cum_n[-1] - reference), 1e-12)
        if not cum_p[-1] < cum_n[-1] - tol:
            continue
        horizon = max(len(cum_n), len(cum_p))
        # After an episode ends its return so far stays at its final value.
        cum_n = np.pad(cum_n, (0, horizon - len(cum_n)), mode="edge")
        ended = np.arange(horizon) >= len(cum_p) - 1
        cum_p = np.pad(cum_p, (0, horizon - len(cum_p)), mode="edge")
        behind = cum_n - cum_p > tol
        # Ending early parts the pair when the nominal twin still earns more afterwards.
        parted = np.flatnonzero(behind | (ended & (cum_n[-1] - cum_p > tol)))
        if len(parted):
            steps.append(int(parted[0]) + 1)
    return (float(np.median(steps)) if steps else None), len(steps)


def _when(nominal_env_steps: np.ndarray, perturbed_env_steps: np.ndarray,
          parting: float | None, parted: int, episodes: int) -> str:
    n_med, p_med = float(np.median(nominal_env_steps)), float(np.median(perturbed_env_steps))
    short = perturbed_env_steps < 0.9 * nominal_env_steps
    parts = []
    if p_med < 0.9 * n_med:
        parts.append(f"episodes end early: median {p_med:.0f} env steps vs {n_med:.0f} nominal")
    elif p_med > 1.1 * n_med:
        parts.append(f"episodes run longer: median {p_med:.0f} env steps vs {n_med:.0f} nominal")
    elif short.any():
        parts.append(f"{int(short.sum())} of {episodes} episodes end early (median "
                     f"{np.median(perturbed_env_steps[short]):.0f} env steps vs {n_med:.0f} "
                     "nominal); the others last as long as nominal")
    else:
        parts.append(f"episodes last as long as nominal (median {p_med:.0f} env steps) but earn less")
    if parting is not None:
        parts.append(f"returns part from nominal at env step {parting:.0f} (median over the "
                     f"{parted} of {episodes} episodes that lost return)")
    return "; ".join(parts)


def diagnose(
    scenario: Scenario,
    *,
    nominal_env_steps: np.ndarray,
    perturbed_env_steps: np.ndarray,
    parting: float | None,
    ratio: float,
    rating: str,
    parted: int = 0,
    reference: float = 0.0,
    normalized: bool = False,
) -> Diagnosis | None:
    """The diagnosis of a scenario rated below PASS (None for PASS).

    ``parting`` and ``parted`` come from :func:`parting_step` on the episode traces;
    ``normalized``: the agent already normalises its observations (VecNormalize), so the
    fix does not advise it.
    """
    if rating == "PASS":
        return None
    when = _when(np.asarray(nominal_env_steps), np.asarray(perturbed_env_steps), parting,
                 parted, len(nominal_env_steps))
    share = "of the nominal return" if reference == 0 else "of the nominal return above the reference"
    schedule = scenario.schedule
    advice = next((_ADVICE[c] for c in getattr(scenario.perturbation, "__mro__",
                                                (scenario.perturbation,)) if c in _ADVICE), None)
    if advice is not None and advice.timeline and schedule is not None:
        cause, fix = _schedule_advice(schedule)
        verb = "degrades" if rating == "MILD" else "breaks"
        pattern = (f"{verb} when {schedule.describe()}: keeps {_format.share(ratio)} {share} "
                   f"({rating}); {when}")
        return Diagnosis(pattern, cause, f"{fix} ({UNTESTED})")
    advice = advice or _Advice(
        f"the agent was not trained under the {scenario.name!r} perturbation",
        "train with the scenario's wrapper: {call}")
    cause, fix = advice.cause, (advice.fix_normalized if normalized and advice.fix_normalized
                                else advice.fix)
    label = advice.label or str(getattr(scenario.perturbation, "__name__", scenario.name))
    call = _call(label, dict(scenario.params))
    name = scenario.name if schedule is None else f"{scenario.name} ({schedule.describe()})"
    pattern = f"{name} keeps {_format.share(ratio)} {share} ({rating}); {when}"
    # no benchmark has trained under a single wrapper's fix yet (bench_fixes.py: the mix)
    return Diagnosis(pattern, cause, f"{fix.format(call=call)} ({UNTESTED})")


def unmeasurable(margin: Any, *, nominal: float, reference: float, random: bool) -> Diagnosis:
    """Why a scenario is rated INCONCLUSIVE: the agent's nominal mean return ``nominal`` is
    not clearly above the ``reference`` score (``margin``: a
    :class:`~pytest_rlaudit.stats.paired.Margin`; ``random``: the reference is random
    actions on the same seeds). The fix puts first what would likely settle it: more
    episodes when a few times as many would (:meth:`Margin.episodes_needed`), else
    training.

    >>> from pytest_rlaudit.stats.paired import Margin
    >>> d = unmeasurable(Margin(56.1, -3.2, 115.4, 30, 0.95, spread=158.0), nominal=-1150.2,
    ...                  reference=-1206.3, random=True)
    >>> print(d.pattern)
    the agent does not clearly beat random actions (nominal -1150.2 vs reference -1206.3 over 30 episodes)
    >>> print(d.fix.split(" (")[0])
    train the agent until it clearly beats the reference
    """
    what = "random actions" if random else "the reference"
    n = margin.episodes
    pattern = (f"the agent does not clearly beat {what} (nominal {_format.fixed(nominal, 1)} "
               f"vs reference {_format.fixed(reference, 1)} over {n} episodes)")
    cause = (f"its lead, {_format.fixed(margin.mean, 1)} per episode "
             f"({margin.confidence * 100:.4g}% interval "
             f"{_format.interval(margin.low, margin.high, 1)}; "
             f"{margin.mean / margin.standard_error if margin.spread else float('inf'):.1f} "
             "standard errors, where a ratio needs 4), is not clearly positive, so every "
             "ratio measured from the reference is mostly noise")
    train = "train the agent until it clearly beats the reference"
    other = "or measure from a reference it clearly beats (reference=<number>, --rl-reference)"
    needed = margin.episodes_needed()
    if needed is not None and needed <= 4 * n:
        # below 10 episodes the spread is too uncertain to name a count
        about = (f": about {needed} would show a lead of this size and spread clearly"
                 if n >= 10 else "")
        fix = f"audit more episodes (episodes=, --rl-episodes){about}; or {train}; {other}"
    else:
        fix = (f"{train} (at this lead and spread, a few times more episodes would not "
               f"settle it); {other}")
    return Diagnosis(pattern, cause, fix)
