"""``--rl-agent <zoo folder>`` whose config.yml names code to run (issue 43, point 1): not
run, and reported as could-not-audit (pytest's ERROR naming --rl-trusted), never as a
failed robustness test; with --rl-trusted the folder's own wrapper is imported and applied
as the zoo applies it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_rlaudit.world.agents import as_policy

CARTPOLE_RUN = Path(__file__).parents[1] / "data" / "zoo" / "ppo" / "CartPole-v1_1"
OPTIONS = ("--rl-audit", "--rl-env=CartPole-v1", "--rl-episodes=2", "--rl-scenarios=jitter",
           "-p", "no:cacheprovider")


@pytest.fixture(scope="module", autouse=True)
def _loaded_once() -> None:
    """The zoo agent loaded once both ways before pytester's snapshot of sys.modules:
    pytester drops what an inner run imports, and torch does not survive being imported
    twice in one process. The trusted load (SB3's own, which builds an optimizer) imports
    torch._dynamo and torch._inductor, which --rl-trusted's inner run would otherwise import
    and leave half-registered for every later SB3 load in this process."""
    as_policy(CARTPOLE_RUN)
    as_policy(CARTPOLE_RUN, trusted=True)


def _hostile_run(root: Path, marker: Path) -> Path:
    run = root / "run"
    shutil.copytree(CARTPOLE_RUN, run)
    config = run / "CartPole-v1" / "config.yml"
    config.write_text(config.read_text() + "  - - env_wrapper\n"
                      f"    - [{{pydoc.pipepager: {{cmd: 'touch {marker}'}}}}]\n")
    return run


def test_a_config_naming_code_is_a_collection_error_naming_rl_trusted(tester: pytest.Pytester):
    tester.makeini("[pytest]\n")
    marker = tester.path / "PWNED"
    run = _hostile_run(tester.path, marker)
    result = tester.runpytest(f"--rl-agent={run}", *OPTIONS)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error, not a failure (1)
    result.stdout.fnmatch_lines([
        "*ERROR collecting rl-audit*",
        f"*{run / 'CartPole-v1' / 'config.yml'}*env_wrapper names 'pydoc.pipepager'*"
        "trusted=True*--rl-trusted*"])
    assert " failed" not in "\n".join(result.outlines)
    assert not marker.exists()


def test_rl_trusted_imports_the_folder_s_own_wrapper(tester: pytest.Pytester):
    tester.makeini("[pytest]\n")
    run = tester.path / "run"
    shutil.copytree(CARTPOLE_RUN, run)
    made, imported = tester.path / "made", tester.path / "imported"
    tester.makepyfile(own_wrappers=f"""
import gymnasium as gym

open({str(imported)!r}, "a").close()

class Counted(gym.Wrapper):
    def __init__(self, env):
        super().__init__(env)
        open({str(made)!r}, "a").close()  # pytester forgets the module after a run: a trace
""")
    config = run / "CartPole-v1" / "config.yml"
    config.write_text(config.read_text() + "  - - env_wrapper\n    - own_wrappers.Counted\n")
    refused = tester.runpytest(f"--rl-agent={run}", *OPTIONS)
    assert refused.ret == pytest.ExitCode.INTERRUPTED
    assert not imported.exists() and not made.exists()
    result = tester.runpytest(f"--rl-agent={run}", *OPTIONS, "--rl-trusted")
    result.assert_outcomes(passed=1)
    assert made.exists()
