"""The install instructions are true on the public package index: on Linux, PyPI's
torch==2.13.0 is the CUDA build, so every documented command that installs torch (the
README, docs/, the CI-gate workflow) names PyTorch's CPU index or follows a command that
does, and no page says the pin alone gives the CPU build. The claim the pages make about
the pin (a 2.13.0+cpu build satisfies torch==2.13.0) is checked with pip's own rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _blocks(text: str) -> list[str]:
    """The shell and workflow code blocks of a Markdown page."""
    return re.findall(r"```(?:bash|yaml|console|shell|sh)\n(.*?)```", text, re.S)


def _torch_installs(text: str) -> list[tuple[str, bool]]:
    """Each command of the page's code blocks that installs torch, and whether it names the
    CPU index itself or comes after one that does (in the same block or an earlier one)."""
    found, seen_index = [], False
    for block in _blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            if "pip install" not in line:
                continue
            if CPU_INDEX in line:
                seen_index = True
            if re.search(r"\btorch==", line):
                found.append((line.strip(), seen_index))
    return found


def _offenders(text: str) -> list[str]:
    bad = [line for line, after_index in _torch_installs(text) if not after_index]
    # the old claims: "pinned so that pip takes the CPU build", "With the pin, pip takes
    # the CPU build", "(torch first, pinned: the CPU build, ...)"
    prose = " ".join(re.sub(r"```.*?```", "", text, flags=re.S).split())
    bad += re.findall(r"[^.]*(?:pip takes the CPU build|pinned so that pip|pinned: the CPU "
                      r"build)[^.]*", prose)
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_torch_install_on_a_page_gets_the_cpu_build_from_pytorchs_index(page):
    assert _offenders(page.read_text(encoding="utf-8")) == []


def test_the_check_catches_the_old_wording():
    old = ("`torch==2.13.0` is pinned so that pip takes the CPU build rather than several GB "
           "of CUDA packages.\n\n```bash\npip install torch==2.13.0 -e \".[dev]\"\n```\n")
    assert len(_offenders(old)) == 2
    assert _offenders(f"```bash\npip install torch==2.13.0 {CPU_INDEX}\n"
                      "pip install torch==2.13.0 -e .\n```\n") == []


def test_the_pages_install_torch_somewhere():
    # the check above is not vacuous: the README, install.md and the workflow install torch
    for name in ("README.md", "docs/getting-started/install.md", "docs/tutorials/ci-gate.md"):
        assert _torch_installs((ROOT / name).read_text(encoding="utf-8")), name


def test_a_cpu_build_satisfies_the_pin_so_the_quick_start_keeps_it():
    # PEP 440: a local version (+cpu) matches ==V when the specifier has no local part;
    # the pages rely on this to say that `pip install torch==2.13.0 -e ...` keeps the
    # CPU build installed from PyTorch's index
    from pip._vendor.packaging.specifiers import SpecifierSet

    assert "2.13.0+cpu" in SpecifierSet("==2.13.0")
    assert "2.13.0+cu126" in SpecifierSet("==2.13.0")  # so the pin alone cannot choose
    assert "2.13.1+cpu" not in SpecifierSet("==2.13.0")
