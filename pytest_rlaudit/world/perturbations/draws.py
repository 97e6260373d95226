"""A wrapper's per-step draws taken from its generator in blocks of many steps.

numpy's ``Generator`` fills an array from its stream in order, so ``standard_normal((k,
*shape))`` holds exactly the numbers of ``k`` successive ``standard_normal(shape)`` calls
(and ``random((k,))`` those of ``k`` calls of ``random()``). A :class:`Blocks` hands them
out one step at a time: the same episode, bit for bit, in a ``k``-th of the generator
calls. One call costs about a microsecond; a lock-step batch of thousands of rows pays it
per row and per step, which is most of what a noise scenario costs there.

Only a draw that is a wrapper's sole use of its generator can be taken this way: any
other draw from the same generator would then come from further down the stream.

>>> import numpy as np
>>> blocks = Blocks("standard_normal")
>>> rng = np.random.default_rng(3)
>>> steps = [blocks.next(rng, (2,)) for _ in range(5)]
>>> again = np.random.default_rng(3)
>>> all(np.array_equal(s, again.standard_normal(2)) for s in steps)
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["Blocks", "BLOCK_ELEMENTS"]

#: At most this many numbers are drawn ahead for one wrapper (fewer steps for a large
#: observation: an image's noise is drawn a step at a time, as before).
BLOCK_ELEMENTS = 1024


class Blocks:
    """Draws of the generator method ``draw`` (``"standard_normal"``, ``"random"``), one
    step of ``shape`` at a time, from blocks (see the module). A new generator (a
    wrapper reseeded for its next episode) starts a new block."""

    def __init__(self, draw: str) -> None:
        self.draw = draw
        self.rng: np.random.Generator | None = None
        self.block: Any = None
        self.at = 0

    def next(self, rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
        """The next step's draw of ``shape`` from ``rng``'s stream."""
        if rng is not self.rng or self.at == len(self.block):
            steps = max(1, BLOCK_ELEMENTS // max(1, math.prod(shape)))
            self.block = getattr(rng, self.draw)((steps, *shape))
            self.rng, self.at = rng, 0
        self.at += 1
        return self.block[self.at - 1]
