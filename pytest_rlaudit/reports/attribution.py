"""Renderers of an attribution record (a failing record's ``attribution``): the terminal's
lines, the JUnit properties' text and the HTML section with its chart, as functions of
the record.

>>> c = lambda g, r: {"groups": [g], "ratio": r, "ci_low": r - 0.1, "ci_high": min(r + 0.1, 1),
...                   "p_value": 0.01, "rating": "FAIL" if r < 0.5 else "PASS"}
>>> doc = {"scenario": "delay", "confidence": 0.95, "groups": {"qpos": [0, 1], "qvel": [2, 3]},
...        "groups_source": "the MuJoCo env's observation_structure",
...        "full": c("all", 0.02), "only": {"qpos": c("qpos", 0.97), "qvel": c("qvel", 0.03)},
...        "all_but": {"qpos": c("qvel", 0.03), "qvel": c("qpos", 0.97)}, "family": 2,
...        "shapley": {"qpos": {"value": 0.0, "ci_low": -0.1, "ci_high": 0.1},
...                    "qvel": {"value": 0.98, "ci_low": 0.9, "ci_high": 1.0}},
...        "culprit_groups": ["qvel"], "culprits": ["qvel"], "confirmed": True, "notes": [],
...        "interactions": [], "runs": 4, "diagnosis": "delay breaks it through qvel: ..."}
>>> for line in attribution_lines("t::x[delay]", doc): print("".join(t for t, _ in line))
t::x[delay]: which sensor: delay breaks it through qvel: ... (a significant loss on fresh seeds too)
  group  size  alone  95% CI (2 contrasts)  all but  95% CI           Shapley
  qpos   2     0.970  0.870 to 1.000        0.030    -0.070 to 0.130  0.000
  qvel   2     0.030  -0.070 to 0.130       0.970    0.870 to 1.000   0.980
  groups: the MuJoCo env's observation_structure; 4 runs of the episodes
"""

from __future__ import annotations

from html import escape
from typing import Any

from .._format import fixed, interval

__all__ = ["attribution_lines", "attribution_html", "attribution_figure"]

Line = list[tuple[str, str]]


def _confirmation(doc: dict[str, Any]) -> str:
    return {True: " (a significant loss on fresh seeds too)", False: "",
            None: ""}[doc.get("confirmed")]


def attribution_lines(nodeid: str, doc: dict[str, Any]) -> list[Line]:
    """The terminal's lines: the diagnosis, each group's ratio alone and all-but with
    intervals and its Shapley share, where the groups came from, and the notes."""
    rating = doc["full"]["rating"]
    lines: list[Line] = [[(f"{nodeid}: which sensor: {doc['diagnosis']}{_confirmation(doc)}",
                           rating)]]
    level = f"{doc['confidence']:.0%} CI ({doc['family']} contrasts)"
    # headers short enough for 80 columns; the HTML table says them in full
    rows = [["group", "size", "alone", level, "all but", f"{doc['confidence']:.0%} CI",
             "Shapley"]]
    for g, only in doc["only"].items():
        rest, share = doc["all_but"][g], doc["shapley"].get(g)
        rows.append([g, str(len(doc["groups"].get(g, []))), fixed(only["ratio"]),
                     interval(only["ci_low"], only["ci_high"]), fixed(rest["ratio"]),
                     interval(rest["ci_low"], rest["ci_high"]),
                     "" if share is None else fixed(share["value"])])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        text = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        lines.append([(f"  {text}", "bold" if i == 0 else "")])
    lines.append([(f"  groups: {doc['groups_source']}; {doc['runs']} runs of the episodes", "")])
    lines += [[(f"  interaction: {x}", "warn")] for x in doc.get("interactions", ())]
    lines += [[(f"  note: {x}", "")] for x in doc.get("notes", ())]
    return lines


def attribution_figure(plt: Any, doc: dict[str, Any]) -> Any:
    """Each group's ratio with the scenario on it alone and on all but it, with their
    intervals, beside the full scenario's ratio (dashed).

    >>> from pytest_rlaudit.reports.chart import pyplot
    >>> plt = pyplot()
    >>> c = lambda r: {"ratio": r, "ci_low": r, "ci_high": r}
    >>> fig = attribution_figure(plt, {"only": {"a": c(1.0), "b": c(0.1)},
    ...                                "all_but": {"a": c(0.1), "b": c(1.0)}, "full": c(0.1)})
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['a', 'b']
    >>> plt.close(fig)
    """
    names = list(doc["only"])
    height = 1.3 + 0.35 * len(names)  # inches: the rows, and the legend below them
    fig, ax = plt.subplots(figsize=(5.0, height))
    fig.subplots_adjust(left=0.22, right=0.97, bottom=0.95 / height, top=1 - 0.15 / height)
    for offset, key, colour, label in ((-0.12, "only", "#b03a2e", "on this group alone"),
                                       (0.12, "all_but", "#1f4e79", "on all groups but it")):
        ys = [i + offset for i in range(len(names))]
        points = [doc[key][g] for g in names]
        ratios = [p["ratio"] for p in points]
        errors = [[max(p["ratio"] - p["ci_low"], 0) for p in points],
                  [max(p["ci_high"] - p["ratio"], 0) for p in points]]
        ax.errorbar(ratios, ys, xerr=errors, fmt="o", color=colour, markersize=4,
                    capsize=2, linewidth=1, label=label)
    ax.axvline(doc["full"]["ratio"], color="#777777", linestyle="--", linewidth=0.8,
               label="on every group")
    ends = [doc[k][g][e] for k in ("only", "all_but") for g in names for e in ("ci_low", "ci_high")]
    ax.set_xlim(min(*ends, doc["full"]["ratio"]) - 0.05, max(*ends, 1.0) + 0.05)  # whole points
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("return ratio", fontsize=8)
    ax.tick_params(labelsize=7)
    # below the axes: inside, it would hide the points at a ratio of 1
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.45 / (height - 1.1)),
              ncol=3, frameon=False)
    return fig


def attribution_html(doc: dict[str, Any], svg: str) -> str:
    """The HTML section: the diagnosis, the chart (``svg``, empty without matplotlib) and
    the table of the terminal's lines."""
    e = escape
    rows = "".join(
        f"<tr><td>{e(g)}</td><td>{len(doc['groups'].get(g, []))}</td>"
        f"<td>{fixed(o['ratio'])} ({interval(o['ci_low'], o['ci_high'])})</td>"
        f"<td>{fixed(doc['all_but'][g]['ratio'])} "
        f"({interval(doc['all_but'][g]['ci_low'], doc['all_but'][g]['ci_high'])})</td>"
        f"<td>{'' if g not in doc['shapley'] else fixed(doc['shapley'][g]['value'])}</td></tr>"
        for g, o in doc["only"].items())
    notes = "".join(f"<li>{e(x)}</li>" for x in [*doc.get("interactions", ()),
                                                  *doc.get("notes", ())])
    return (f'<div class="attribution"><h4>Which sensor</h4>'
            f"<p>{e(doc['diagnosis'])}{e(_confirmation(doc))}</p>"
            f"<figure>{svg}<figcaption>The scenario's return ratio with it seen on one "
            f"group alone and on all groups but that one ({doc['confidence']:.0%} intervals, "
            f"simultaneous over the {doc['family']} contrasts); dashed: on every "
            "group.</figcaption></figure>"
            "<table><tr><th>group</th><th>size</th><th>alone</th><th>all but it</th>"
            f"<th>share of loss</th></tr>{rows}</table>"
            f"<p>Groups: {e(doc['groups_source'])}; {doc['runs']} runs of the episodes.</p>"
            + (f"<ul>{notes}</ul>" if notes else "") + "</div>")
