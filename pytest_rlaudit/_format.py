"""How numbers read in every output: ratios, intervals, shares and p-values.

One place, so the terminal, JUnit, Markdown, messages and diagnoses agree. Standard
library only: the plugin loads it on every run.

>>> interval(-0.0004, 0.25)
'0.000 to 0.250'
>>> interval(-0.923, -0.1)
'-0.923 to -0.100'
>>> share(-0.0004), share(0.208), share(-0.5)
('0%', '21%', 'none')
"""

from __future__ import annotations

__all__ = ["fixed", "interval", "share", "p_value", "short_fix", "clip", "diagnosis_sentence"]


def fixed(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` decimals, never "-0.000" (a rounding artefact, not a sign)."""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def interval(low: float, high: float, digits: int = 3) -> str:
    """An interval as "low to high": a hyphen would be ambiguous with negative ends."""
    return f"{fixed(low, digits)} to {fixed(high, digits)}"


def share(ratio: float) -> str:
    """A return ratio as the share of the nominal return kept: "21%", "0%", or "none" when
    the perturbed return fell below the reference (a negative ratio)."""
    if ratio < 0 and round(ratio * 100) != 0:
        return "none"
    return f"{max(ratio, 0.0):.0%}"


def p_value(value: float | None) -> str:
    """A p-value for tables: "-" when there is none, "<0.001" below it."""
    if value is None:
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def short_fix(fix: str) -> str:
    """The first clause of a diagnosis' fix: "train with Jitter(env, base=2, jitter=1)"."""
    return fix.split(";")[0].split(" or ")[0].strip()


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, with "..." where it was cut."""
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def diagnosis_sentence(pattern: str, cause: str, fix: str) -> str:
    """A diagnosis as one sentence: "what broke. Likely cause: why. Fix: what to do."."""
    return f"{pattern}. Likely cause: {cause}. Fix: {fix}."
