"""Every install line the package prints works from a user's repository, and installs
torch's CPU build first where what it installs brings torch: from PyPI, a Linux machine
gets the CUDA build with several GB of ``nvidia-*`` packages, pinned or not."""

from __future__ import annotations

import re

import pytest

from pytest_rlaudit._optional import EXTRAS, TORCH_CPU_INDEX, TORCH_INSTALL, TORCH_PIN, install_hint, missing


@pytest.mark.parametrize("package", sorted(EXTRAS))
def test_a_missing_optional_package_names_its_extra_and_pins_torch_where_it_brings_it(package):
    message = missing(package, "this feature")
    extra = EXTRAS[package]
    assert f"pip install 'pytest-rlaudit[{extra}]'" in message
    if extra in ("sb3", "hub"):
        assert f": {TORCH_INSTALL} && pip install 'pytest-rlaudit[{extra}]'" in message
        assert f"--index-url {TORCH_CPU_INDEX}" in message
    else:
        assert "torch" not in message


@pytest.mark.parametrize("package", ["sb3-contrib", "rl_zoo3"])
def test_other_packages_that_bring_torch_pin_it_first(package):
    assert install_hint(package=package).startswith(
        f"pip install {TORCH_PIN} --index-url {TORCH_CPU_INDEX} && pip install {package} ")


def test_hints_that_bring_no_torch_do_not_name_it():
    assert install_hint("plot") == "pip install 'pytest-rlaudit[plot]'"
    assert install_hint(package="shimmy[gym-v21]") == "pip install shimmy[gym-v21]"


def test_no_message_in_the_package_installs_torch_unpinned():
    """A source scan: a printed ``pip install`` that names stable-baselines3, sb3-contrib,
    rl_zoo3 or the sb3/hub extras goes through install_hint (which pins torch)."""
    from pathlib import Path

    import pytest_rlaudit

    root = Path(pytest_rlaudit.__file__).parent
    unpinned = re.compile(r"pip install (?!torch==)[^\n\"']*(stable-baselines3|sb3-contrib|rl_zoo3"
                          r"|pytest-rlaudit\[(sb3|hub)\])")
    offenders = [f"{path.relative_to(root)}:{i}" for path in root.rglob("*.py")
                 for i, line in enumerate(path.read_text().splitlines(), 1)
                 if unpinned.search(line) and not line.lstrip().startswith(("#", "(``", "``"))]
    assert offenders == []
