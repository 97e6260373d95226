"""``--rl-videos``: the ``video`` field of a failing audit's record, and its GIF.

The GIF is written where the test runs (an xdist worker too) straight into the report
folder's ``videos/``, under a name made from the node id (:func:`~pytest_rlaudit.reports.gif.
video_name`), so the controller needs only the record, which says where it is. Capturing is
:mod:`pytest_rlaudit.auditing.videos`', drawing :mod:`pytest_rlaudit.reports.gif`'s; both
are imported only when a failing audit is filmed.

Audits run by the ``rl_audit`` fixture and zero-config items are filmed as they fail
(:func:`film`); a check a test made itself (``assert_robust`` / ``check_robust``) after the
test, from what the check keeps for its replay (:func:`film_check`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..auditing.records import Record

__all__ = ["film", "film_check", "NOT_FILMED"]

#: The note of a check that cannot be replayed: it kept its numbers alone (a check keeps
#: what a replay needs only in the process that made it, not once pickled or deep-copied).
NOT_FILMED = ("this check holds its numbers but not the agent, env and scenario a replay "
              "needs (a check that was pickled or deep-copied keeps only its numbers)")


def film(report: str, record: Record, policy: Any, env: Any,
         scenario: Any) -> dict[str, Any]:
    """The ``video`` field of ``record`` (a failing audit of ``scenario`` for ``policy`` on
    ``env``), its GIF written into ``report``/videos/; ``{"skipped": why}`` when it cannot
    be filmed."""
    from ..auditing.videos import VideoUnavailable, capture
    from ..reports.gif import video_name, write_gif

    name = video_name(record["nodeid"])
    try:
        clip = capture(policy, env, scenario, record)
        write_gif(clip, Path(report) / "videos" / name)
    except (VideoUnavailable, ImportError) as exc:
        return {"skipped": str(exc)}
    except Exception as exc:  # a video is an extra: it must never hide the audit's failure
        return {"skipped": f"filming failed ({type(exc).__name__}: {exc})"}
    return clip.field(f"videos/{name}")


def film_check(report: str, record: Record, check: Any) -> dict[str, Any]:
    """The ``video`` field of ``record``, the record of ``check`` (a failing
    :class:`~pytest_rlaudit.verdicts.assertions.RobustnessCheck` a test made itself),
    filmed from what the check keeps for its replay; ``{"skipped": why}`` when it cannot
    be filmed."""
    replay = getattr(check, "replay", None)
    if replay is None:
        return {"skipped": NOT_FILMED}
    return film(report, record, replay.policy, replay.env, replay.scenario)
