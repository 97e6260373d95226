"""README badges of ``--rl-report``: ``badge-deployment.svg`` and ``badge-stress.svg``, in
shields.io's flat style, each showing the worst (agent, env) score of its category.

Standard library only: badges are written with or without matplotlib.

>>> aggs = [{"agent": "PPO", "env": "E", "stress": None,
...          "deployment": {"score": 0.97, "rating": "PASS", "scenario": "jitter"}},
...         {"agent": "SAC", "env": "E", "stress": None,
...          "deployment": {"score": 0.62, "rating": "DEGRADED", "scenario": "delay"}}]
>>> value, colour, _ = badge_value(aggs, "deployment")
>>> value, colour
('DEGRADED 0.620', '#fe7d37')
>>> badge_value(aggs, "stress")[:2]
('n/a', '#9f9f9f')
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..stats.ratings import INCONCLUSIVE
from .rows import score_text

__all__ = ["COLOURS", "badge", "badge_value", "badges"]

#: A badge's colour by rating (shields.io's brightgreen, yellowgreen, orange, red; blue
#: for INCONCLUSIVE: not a grade on the scale); grey for a category without records.
COLOURS = {"PASS": "#4c1", "MILD": "#a4a61d", "DEGRADED": "#fe7d37", "FAIL": "#e05d44",
           INCONCLUSIVE: "#007ec6", None: "#9f9f9f"}

# Advance widths of Verdana at 11 px (shields' font), by character; the rest are 7 px.
# The SVG's textLength holds the text to these widths whatever font draws it.
_WIDTHS = {**dict.fromkeys("ijl.,:;'!|", 3.0), **dict.fromkeys(" f()[]", 3.9),
           **dict.fromkeys("tI-", 4.6), **dict.fromkeys("r", 4.7),
           **dict.fromkeys("csz", 5.7), **dict.fromkeys("mMW", 10.0),
           **dict.fromkeys("wDGHNOQU", 8.3)}
_PAD = 5  # px each side of a text, as shields


def _width(text: str) -> float:
    return sum(_WIDTHS.get(ch, 7.0) for ch in text)


def badge(label: str, value: str, colour: str, title: str = "") -> str:
    """A flat two-part badge: ``label`` on grey, ``value`` on ``colour``; ``title`` is the
    tooltip (default "label: value").

    >>> svg = badge("stress", "FAIL 0.135", COLOURS["FAIL"])
    >>> svg.startswith("<svg") and 'fill="#e05d44"' in svg and ">FAIL 0.135</text>" in svg
    True
    """
    left, right = _width(label), _width(value)
    lw, rw = round(left) + 2 * _PAD, round(right) + 2 * _PAD
    width = lw + rw
    title = escape(title or f"{label}: {value}")
    texts = "".join(
        f'<text x="{x * 10:.0f}" y="150" fill="#010101" fill-opacity=".3" transform="scale(.1)" '
        f'textLength="{length * 10:.0f}">{escape(text)}</text>'
        f'<text x="{x * 10:.0f}" y="140" transform="scale(.1)" fill="#fff" '
        f'textLength="{length * 10:.0f}">{escape(text)}</text>'
        for x, length, text in ((lw / 2, left, label), (lw + rw / 2, right, value)))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" '
            f'aria-label="{title}"><title>{title}</title>'
            '<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" '
            'stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>'
            f'<clipPath id="r"><rect width="{width}" height="20" rx="3" fill="#fff"/></clipPath>'
            f'<g clip-path="url(#r)"><rect width="{lw}" height="20" fill="#555"/>'
            f'<rect x="{lw}" width="{rw}" height="20" fill="{escape(colour)}"/>'
            f'<rect width="{width}" height="20" fill="url(#s)"/></g>'
            '<g text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" '
            f'text-rendering="geometricPrecision" font-size="110">{texts}</g></svg>\n')


def badge_value(aggregates: list[dict[str, Any]], category: str) -> tuple[str, str, str]:
    """(value, colour, tooltip) of ``category``'s badge: the lowest score over the
    (agent, env) pairs of ``aggregates`` (an INCONCLUSIVE pair before any: its score
    says nothing), or "n/a" in grey when none has the category."""
    scored = [a for a in aggregates if a.get(category)]
    if not scored:
        return "n/a", COLOURS[None], f"{category}: no {category} scenario audited"
    worst = min(scored, key=lambda a: (a[category]["rating"] != INCONCLUSIVE,
                                       a[category]["score"], a["agent"], a["env"]))
    score = worst[category]
    value = score_text(score)
    return (value, COLOURS[score["rating"]],
            f"{category}: {value} ({worst['agent']} on {worst['env']}, {score['scenario']})")


def badges(doc: dict[str, Any]) -> dict[str, str]:
    """The badge files of the summary.json document ``doc``: {file name: SVG text}.

    >>> sorted(badges({"aggregates": []}))
    ['badge-deployment.svg', 'badge-stress.svg']
    """
    out = {}
    for category in ("deployment", "stress"):
        value, colour, title = badge_value(doc["aggregates"], category)
        out[f"badge-{category}.svg"] = badge(category, value, colour, title)
    return out
