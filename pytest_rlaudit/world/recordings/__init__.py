"""Recorded episodes, read from Minari datasets, LeRobot parquet datasets and ``.npz``
files, and written as Minari datasets (DESIGN.md section 22)."""

from .base import Recording
from .load import RecordingLike, load_recording

__all__ = ["Recording", "RecordingLike", "load_recording"]
