"""A failing scenario's clip as an animated GIF: the perturbed episode beside its nominal
twin, labelled, with the env step counting and the parting step marked. Needs Pillow
(``pip install 'pytest-rlaudit[plot]'``), imported only when a GIF is made.

The one place GIFs are drawn and written: the clip itself comes from
:func:`pytest_rlaudit.auditing.videos.capture`. The same clip gives the same bytes.

>>> import numpy as np
>>> from pytest_rlaudit.auditing.videos import Clip
>>> frames = tuple(np.full((40, 60, 3), v, np.uint8) for v in (0, 80, 160))
>>> clip = Clip("jitter", 0, 0, 1, (0, 1, 2), frames, frames[::-1], (2, 9), (2.0, 9.0))
>>> gif_bytes(clip)[:6]
b'GIF89a'
>>> video_name("tests/test_x.py::test_y[jitter]")
'tests_test_x.py_test_y_jitter-619324a4.gif'
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from pathlib import Path
from typing import Any

from .files import atomic_write

__all__ = ["FRAME_MS", "gif_bytes", "write_gif", "video_name"]

#: How long each frame shows; the parting frame and the last one stay longer.
FRAME_MS, PARTING_MS, LAST_MS = 60, 600, 1500
_PAD, _BAND, _FONT_SIZE = 6, 18, 12
_SAMPLED = 6  # frames the palette is drawn from
_INK, _PAPER, _RED = (40, 40, 40), (255, 255, 255), (192, 57, 43)


def video_name(nodeid: str) -> str:
    """A file name for ``nodeid``'s GIF: readable, safe on every filesystem, the same on
    every run and every xdist worker, and unique (a hash of the node id ends it)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("._-")[:80] or "test"
    return f"{stem}-{hashlib.sha1(nodeid.encode('utf-8')).hexdigest()[:8]}.gif"


def _pillow() -> Any:
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        raise ImportError("videos need Pillow, which is not installed: "
                          "pip install 'pytest-rlaudit[plot]'") from None
    return Image, ImageDraw, ImageFont


def _font(image_font: Any) -> Any:
    try:
        return image_font.load_default(size=_FONT_SIZE)
    except (TypeError, ImportError, OSError):  # Pillow < 10.1 or without FreeType
        return image_font.load_default()


def _fit(draw: Any, text: str, font: Any, width: int) -> str:
    """``text``, cut with "..." to fit ``width`` pixels."""
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "...", font=font) > width:
        text = text[:-1]
    return text + "..."


def _frames(clip: Any) -> tuple[list[Any], list[int]]:
    """The GIF's images and their durations (ms)."""
    image, image_draw, image_font = _pillow()
    font = _font(image_font)
    height = max(f.shape[0] for f in (*clip.perturbed, *clip.nominal))
    width = max(f.shape[1] for f in (*clip.perturbed, *clip.nominal))
    size = (2 * width + 3 * _PAD, height + 2 * _BAND + 2 * _PAD)
    labels = (f"perturbed: {clip.scenario}", "nominal")
    parting = clip.parting_step
    images, durations = [], []
    for j, t in enumerate(clip.steps):
        canvas = image.new("RGB", size, _PAPER)
        draw = image_draw.Draw(canvas)
        parted = parting is not None and t >= parting
        for side, (frame, label, length) in enumerate(zip(
                (clip.perturbed[j], clip.nominal[j]), labels, clip.lengths, strict=True)):
            x, y = _PAD + side * (width + _PAD), _PAD + _BAND
            canvas.paste(image.fromarray(frame), (x, y))
            if t > length:
                label += f" (ended at step {length})"
            draw.text((x, _PAD + 2), _fit(draw, label, font, width), fill=_INK, font=font)
            if side == 0 and parted:  # the perturbed side has fallen behind: frame it
                draw.rectangle((x - 2, y - 2, x + frame.shape[1] + 1, y + frame.shape[0] + 1),
                               outline=_RED, width=2)
        counter = f"env step {t}" + ("" if parting is None else f"   |   parts at step {parting}")
        draw.text((_PAD, y + height + 4), counter, fill=_RED if parted else _INK, font=font)
        images.append(canvas)
        durations.append(LAST_MS if j == len(clip.steps) - 1
                         else PARTING_MS if t == parting else FRAME_MS)
    return images, durations


def _palette(image: Any, images: list[Any]) -> Any:
    """One palette for every frame, from a few frames spread over the clip: one global
    palette makes a smaller file than a palette per frame, and costs a tenth of the time."""
    picks = sorted({round(k * (len(images) - 1) / (_SAMPLED - 1)) for k in range(_SAMPLED)})
    width, height = images[0].size
    sample = image.new("RGB", (width, height * len(picks)))
    for row, k in enumerate(picks):
        sample.paste(images[k], (0, height * row))
    return sample.quantize(colors=255, method=image.Quantize.MEDIANCUT)


def gif_bytes(clip: Any) -> bytes:
    """``clip`` (a :class:`~pytest_rlaudit.auditing.videos.Clip`) as an animated GIF that
    loops; see the module's example."""
    image = _pillow()[0]
    images, durations = _frames(clip)
    palette = _palette(image, images)
    images = [im.quantize(palette=palette, dither=image.Dither.NONE) for im in images]
    out = io.BytesIO()
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:],
                   duration=durations, loop=0)
    return out.getvalue()


def write_gif(clip: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``clip``'s GIF to ``path`` (its folder made if needed), atomically, so that a
    report reading the folder never sees half a file. Returns the path."""
    data = gif_bytes(clip)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, data)
    return target
