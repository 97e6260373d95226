"""The keys under which the plugin keeps an item's results in ``item.stash``: one module
that the modules writing them (:mod:`.audits`, :mod:`.runs`, :mod:`.replays`) and the one
reading them (:mod:`.session`) import, so none of them imports another for a key."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..auditing.records import Record

__all__ = ["RECORD_KEY", "SAME_AS_KEY", "PROPERTIES_KEY"]

RECORD_KEY: pytest.StashKey[Record] = pytest.StashKey()
SAME_AS_KEY = pytest.StashKey[str]()  # the item whose error this item's repeats
PROPERTIES_KEY = pytest.StashKey[list[tuple[str, object]]]()  # the JUnit properties we added
