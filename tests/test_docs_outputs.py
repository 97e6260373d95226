"""Every output the docs show beside a command is that command's output.

In README.md and the pages of docs/, a ```text block right after the line
``<!-- output of the example above -->`` (an HTML comment: neither GitHub nor the site
shows it) holds what the nearest ```python or ```bash block above it prints:

- a python example runs alone, from the repository root, in a namespace of its own (so it
  is whole: its imports, its agent), and its stdout is compared;
- a bash example is one ``pytest ...`` command, run from the repository root, and its
  output is compared.

Each line of the text block must appear in the output, in order (a block may quote an
excerpt); runs of spaces count as one (an excerpt of a table has other column widths), and
``...`` stands for any text (a line that is only ``...``: any lines). Nothing else is
normalised: audits are seeded, so their numbers are the same on every run.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import BLOCK

ROOT = Path(__file__).resolve().parents[1]
MARK = "<!-- output of the example above -->"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _shown() -> list[tuple[str, str, str, str]]:
    """(page, kind, example, output) for every marked output of the docs."""
    found = []
    for page in PAGES:
        if "_build" in page.parts:
            continue
        text = page.read_text(encoding="utf-8")
        blocks = list(BLOCK.finditer(text))
        for i, block in enumerate(blocks):
            if block.group(1) != "text" or not text[:block.start()].rstrip().endswith(MARK):
                continue
            example = next(b for b in reversed(blocks[:i]) if b.group(1) in ("python", "bash"))
            found.append((f"{page.relative_to(ROOT)}:{text[:block.start()].count(chr(10)) + 1}",
                          example.group(1), example.group(2), block.group(2)))
    return found


SHOWN = _shown()


def _matches(quoted: str, output: str) -> list[str]:
    """The lines of ``quoted`` not found in ``output`` in order (see the module)."""
    lines = [" ".join(line.split()) for line in output.splitlines()]
    missing, at = [], 0
    for line in (" ".join(q.split()) for q in quoted.splitlines()):
        if line in ("", "..."):
            continue
        pattern = re.compile(".*".join(map(re.escape, line.split("..."))))
        hit = next((j for j in range(at, len(lines)) if pattern.fullmatch(lines[j])), None)
        if hit is None:
            missing.append(line)
        else:
            at = hit + 1
    return missing


def _run(kind: str, example: str) -> str:
    if kind == "python":
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(example, "<docs example>", "exec"), {"__name__": "__docs__"})
        return out.getvalue()
    command = shlex.split(example.replace("\\\n", " ").split("#")[0])
    assert command[0] == "pytest", f"a bash example with an output is one pytest command: {example}"
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *command[1:]],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    return run.stdout + run.stderr


def test_the_docs_mark_their_outputs():
    """The README's headline table and the getting-started pages are checked (a marker
    lost in an edit would silently drop its check)."""
    pages = {where.split(":")[0] for where, *_ in SHOWN}
    assert {"README.md", "docs/getting-started/first-audit.md",
            "docs/getting-started/reading-the-table.md"} <= pages


@pytest.mark.needs_torch  # the examples audit the bundled PPO (and some in a subprocess)
@pytest.mark.parametrize(("where", "kind", "example", "quoted"), SHOWN,
                         ids=[where for where, *_ in SHOWN])
def test_a_shown_output_is_the_output_of_its_example(where, kind, example, quoted, monkeypatch):
    monkeypatch.chdir(ROOT)
    output = _run(kind, example)
    assert _matches(quoted, output) == [], f"{where}: the output shown differs from:\n{output}"


def test_a_changed_number_is_caught():
    assert _matches("spike  0.208\n...\nFAIL", "x\nspike 0.208\ny\nFAIL") == []
    assert _matches("spike  0.209", "spike 0.208") == ["spike 0.209"]
    assert _matches("b\na", "a\nb") == ["a"]  # in order
