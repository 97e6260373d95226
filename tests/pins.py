"""Regression pins that hold on every machine: bit for bit on the float stack that recorded
them, within float rounding on any other.

A pin records the numbers an audit gave once, so a refactor that moves them fails. On the
machine and library versions that recorded them, they must come back bit for bit. Elsewhere
they cannot: numpy picks its float64 ``sin``/``cos`` kernels by the CPU's SIMD level (its
AVX-512 and AVX2 kernels may round a result one ulp apart), torch picks its kernels
the same way, and a library upgrade may round differently too. Pendulum's dynamics call
``np.sin``/``np.cos`` at every step, so its returns then move in the 9th digit or so and its
float32 observations by an ulp; where a swing-up balances on its unstable top, the ulp grows
over 200 steps, to 6e-5 of a return. Such a move is no regression, and a test that fails on it
would fail CI on a new machine or a new numpy with no change of ours.

So :func:`assert_pinned` compares exactly where :func:`float_stack` equals the stack the pin
was recorded on, and elsewhere compares every float within ``REL`` (every other value,
lengths, seeds, ratings, keys, still exactly). Any change of scenario semantics, seeding or
statistics moves the numbers by far more than ``REL``. Determinism on one machine is tested
bit for bit elsewhere (tests/verdicts/test_assertions.py::test_same_seed_same_numbers).

    >>> assert_pinned({"r": [1.0, 2.0], "n": 3}, {"r": [1.0, 2.00001], "n": 3}, {})
    >>> assert_pinned({"n": 3}, {"n": 4}, {})
    Traceback (most recent call last):
    ...
    AssertionError: ...
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
import torch

#: The tolerance for floats off the recording stack. Between the machine that first recorded
#: the pins and an AVX2 one (2026-11-26, numpy 2.4.6 on both), float rounding moved Pendulum's pinned numbers by up to 6e-5 (a return of
#: the dynamics scenario; its ratio by 6e-6, its interval's end by 1.3e-5, relative).
REL = 1e-3


def float_stack() -> dict[str, str]:
    """What decides the last bits of a float here: versions and the SIMD kernels chosen.

    >>> sorted(float_stack())
    ['gymnasium', 'numpy', 'numpy_simd', 'torch', 'torch_cpu']
    """
    found = np._core._multiarray_umath.__cpu_features__
    dispatch = np._core._multiarray_umath.__cpu_dispatch__
    return {
        "numpy": np.__version__,
        "numpy_simd": " ".join(t for t in dispatch if found.get(t)),
        "torch": torch.__version__,
        "torch_cpu": torch.backends.cpu.get_cpu_capability(),
        "gymnasium": gymnasium.__version__,
    }


def _within(want: Any) -> Any:
    """``want`` with every float replaced by ``pytest.approx`` of it, containers kept."""
    if isinstance(want, float):
        return pytest.approx(want, rel=REL)
    if isinstance(want, dict):
        return {k: _within(v) for k, v in want.items()}
    if isinstance(want, list | tuple):
        return type(want)(_within(v) for v in want)
    return want


def assert_pinned(got: Any, want: Any, recorded_on: dict[str, str], what: str = "") -> None:
    """``got == want`` bit for bit on the stack ``recorded_on``, floats within ``REL`` elsewhere."""
    if float_stack() == recorded_on:
        assert got == want, f"{what} moved (on the float stack that recorded it: bit for bit)"
    else:
        assert got == _within(want), f"{what} moved by more than float rounding (rel {REL})"
