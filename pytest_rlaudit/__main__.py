"""``python -m pytest_rlaudit history DIR``: a history folder (``--rl-history``) looked at
outside a test run.

    python -m pytest_rlaudit history .rlaudit-history                  # list the runs
    python -m pytest_rlaudit history .rlaudit-history --trend          # every test's trend
    python -m pytest_rlaudit history .rlaudit-history --trend spike    # one scenario's
    python -m pytest_rlaudit history .rlaudit-history --compare 3 last # two runs, paired
    python -m pytest_rlaudit history .rlaudit-history --html out.html  # the history page
    python -m pytest_rlaudit history .rlaudit-history --trend --last 20  # the latest 20 runs

Runs are told by number, ``last``, or a commit prefix. A trend, like ``last``, follows
one set of settings (env, episodes, seed, scenarios): by default those of the newest
run; ``--run N`` picks another run's. Exit status 0, or 2 with a message on bad input.
Nothing here imports pytest.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _text(lines: list[list[tuple[str, str]]]) -> str:
    return "\n".join("".join(text for text, _ in line) for line in lines)


def _history(args: argparse.Namespace) -> str:
    from .auditing import history
    from .auditing.comparison import compare_records
    from .auditing.trend import trends
    from .reports.history import history_page, run_lines, trend_lines
    from .reports.terminal import comparison_section

    runs = history.read_runs(args.folder)
    if not runs.runs and not runs.skipped:
        raise ValueError(f"{args.folder}: no run there (save runs with pytest --rl-audit "
                         f"--rl-history {args.folder})")

    if args.compare:
        base = history.find_run(runs, args.compare[0])
        # "last" for the second: the newest run that pairs with the first
        current = history.find_run(runs, args.compare[1],
                                   base.key if args.compare[1] == "last" else None)
        if base.key != current.key:
            raise ValueError(f"runs {base.label} and {current.label} were made with other "
                             "settings: their episodes cannot be paired")
        comparison = compare_records(base.doc["results"], current.doc["results"])
        head = f"{current.label} against {base.label}"
        return head + "\n" + _text(comparison_section(comparison, base.doc, str(base.path)))
    chosen = history.find_run(runs, args.run or "last") if runs.runs else None
    mine = runs.paired_with(chosen.key) if chosen is not None else []
    found = trends(mine, last=args.last)
    if args.trend is not None and args.trend != "":
        found = [t for t in found if args.trend in (t.scenario, t.key)]
        if not found:
            raise ValueError(f"no test of scenario or node id {args.trend!r} in the runs with "
                             f"the settings of {chosen.label if chosen else 'the newest run'}")
    if args.html:
        from pathlib import Path

        page = Path(args.html)
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(history_page(found, history.Runs(mine, runs.skipped), args.folder),
                        encoding="utf-8")
        return f"wrote {page}: {len(mine)} run(s), {len(found)} test(s)"
    if args.trend is not None:
        return _text(trend_lines(found, last=len(mine) or 1))  # every run looked at
    return _text(run_lines(runs))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m pytest_rlaudit",
                                     description="Look at pytest-rlaudit's files.")
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("history", help="the runs of a --rl-history folder")
    show.add_argument("folder", metavar="DIR")
    show.add_argument("--trend", nargs="?", const="", default=None, metavar="SCENARIO",
                      help="each test's ratio and interval run by run (one scenario's, or "
                           "one node id's, if named), the first significant drop marked")
    show.add_argument("--compare", nargs=2, metavar=("BASE", "RUN"),
                      help="compare two runs paired episode by episode, as --rl-compare does")
    show.add_argument("--html", metavar="FILE", help="write the history page to FILE")
    show.add_argument("--last", type=int, metavar="N", help="--trend and --html over the "
                      "latest N runs only (default: all; each costs a paired comparison)")
    show.add_argument("--run", metavar="RUN", help="follow the settings of this run (a "
                      "number, last or a commit prefix; default: the newest run)")
    args = parser.parse_args(argv)
    from .errors import BaselineError

    try:
        print(_history(args))
    except (ValueError, BaselineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
