"""``--rl-agent module:attribute`` under the plain ``pytest`` script, which (unlike
``python -m pytest``) does not put the current folder on ``sys.path``."""

from __future__ import annotations

import os
import sys

import pytest

# A zero-argument factory of a batched controller (robust under jitter, so the audit passes).
MYMOD = """
import numpy as np


def make():
    return lambda obs: (np.asarray(obs) @ np.array([0.02, 0.0, 1.0, 0.2]) > 0).astype("int64")
"""


def test_an_agent_module_in_the_current_folder_imports_without_sys_path(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    pytester.makepyfile(mymod=MYMOD)  # in pytester.path, the current folder of the run
    here = str(pytester.path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path
                                      if os.path.abspath(p or os.curdir) != here])
    monkeypatch.delitem(sys.modules, "mymod", raising=False)
    result = pytester.runpytest("--rl-agent", "mymod:make", "--rl-env", "CartPole-v1",
                                "--rl-audit", "--rl-episodes", "2", "--rl-scenarios", "jitter",
                                "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["make.<locals>.<lambda>  CartPole-v1  jitter  *PASS*"])
