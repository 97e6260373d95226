"""``--rl-videos``: the ``video`` field of a failing audit's record, and its GIF.

The GIF is written where the test runs (an xdist worker too) straight into the report
folder's ``videos/``, under a name made from the node id (:func:`~pytest_rlaudit.reports.gif.
video_name`), so the controller needs only the record, which says where it is. Capturing is
:mod:`pytest_rlaudit.auditing.videos`', drawing :mod:`pytest_rlaudit.reports.gif`'s; both
are imported only when a failing audit is filmed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["film", "NOT_FILMED"]

#: The note of a test that called assert_robust itself: the check keeps its numbers, not
#: the agent and env objects a replay needs.
NOT_FILMED = ("only audits run by the rl_audit fixture or by --rl-agent/--rl-env items are "
              "filmed; this test called assert_robust itself")


def film(report: str, record: dict[str, Any], policy: Any, env: Any,
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
