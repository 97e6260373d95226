"""env_spec's checks and messages, and user-named modules imported from the current folder.

Envs that cannot be made are fake registrations (entry points that raise what a missing
dependency raises), so no MuJoCo or Box2D is needed; modules are written into tmp_path.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.envs.registration import EnvSpec

from pytest_rlaudit._imports import import_module
from pytest_rlaudit.errors import UnknownEnvError
from pytest_rlaudit.world.envs import env_spec

CARTPOLE = "gymnasium.envs.classic_control.cartpole:CartPoleEnv"


def _needs_fakelib(**kwargs: Any) -> gym.Env:
    raise ImportError("RlauditDep needs fakelib, which is not installed: pip install fakelib")


def _needs_fakesim(**kwargs: Any) -> gym.Env:
    raise gym.error.DependencyNotInstalled(
        'FakeSim is not installed, run `pip install "fakesim[all]"`')


@pytest.fixture
def register(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, Any], None]:
    """Register a fake id for one test (removed afterwards)."""
    def add(env_id: str, entry_point: Any = CARTPOLE) -> None:
        monkeypatch.setitem(gym.registry, env_id, EnvSpec(env_id, entry_point=entry_point))
    return add


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """tmp_path as the current folder, not on sys.path (as under the plain `pytest`
    script); sys.path, and the modules and ids its modules add, are restored afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path
                                      if os.path.abspath(p or os.curdir) != str(tmp_path)])
    modules, ids = set(sys.modules), set(gym.registry)
    yield tmp_path
    for name in set(sys.modules) - modules:
        if name.startswith("rlaudit_"):
            del sys.modules[name]
    for env_id in set(gym.registry) - ids:
        del gym.registry[env_id]


# -- versions ------------------------------------------------------------------------


def test_an_old_version_lists_the_registered_versions_and_says_which_to_use(register):
    register("RlauditOld-v1")
    register("RlauditOld-v3")
    with pytest.raises(UnknownEnvError) as info:
        env_spec("RlauditOld-v2")
    assert str(info.value) == (
        f"Gymnasium environment 'RlauditOld-v2' is an old version, no longer registered "
        f"(gymnasium {gym.__version__}); the registered versions are RlauditOld-v1, "
        "RlauditOld-v3. Use 'RlauditOld-v3', or install the older release that still "
        "registers 'RlauditOld-v2'.")


def test_gymnasiums_own_deprecated_version_names_the_current_one():
    assert "LunarLander-v2" not in gym.registry  # gymnasium >= 1.0 registers v3 only
    with pytest.raises(UnknownEnvError, match=r"'LunarLander-v2' is an old version.*"
                                              r"registered versions are LunarLander-v3\. "
                                              r"Use 'LunarLander-v3'"):
        env_spec("LunarLander-v2")


def test_a_version_that_does_not_exist_names_the_newest(register):
    register("RlauditOld-v1")
    register("RlauditOld-v3")
    with pytest.raises(UnknownEnvError) as info:
        env_spec("RlauditOld-v9")
    assert str(info.value) == (
        "Gymnasium environment 'RlauditOld-v9' is not a registered version; the registered "
        "versions are RlauditOld-v1, RlauditOld-v3. Use 'RlauditOld-v3'.")


def test_an_id_without_version_names_the_versions(register):
    register("RlauditOld-v0")
    register("RlauditOld-v1")
    with pytest.raises(UnknownEnvError, match=r"id 'RlauditOld' has no version; the registered"
                                              r" versions are RlauditOld-v0, RlauditOld-v1\. "
                                              r"Use 'RlauditOld-v1'\.$"):
        env_spec("RlauditOld")


def test_versions_are_those_of_the_same_namespace(register):
    register("rlaudit/Ns-v1")
    register("Ns-v4")
    with pytest.raises(UnknownEnvError, match=r"registered versions are rlaudit/Ns-v1\. "
                                              r"Use 'rlaudit/Ns-v1'\.$"):
        env_spec("rlaudit/Ns-v2")


def test_a_typo_still_gets_a_close_match():
    with pytest.raises(UnknownEnvError, match=r"unknown Gymnasium environment id "
                                              r"'CartPol-v1'\. Did you mean 'CartPole-v1'"):
        env_spec("CartPol-v1")


# -- missing dependencies ------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:.*out of date:DeprecationWarning")
def test_a_missing_dependency_keeps_the_hint_and_names_newer_versions(register):
    register("RlauditDep-v1")
    register("RlauditDep-v3", _needs_fakelib)
    register("RlauditDep-v4")
    register("RlauditDep-v5")
    with pytest.raises(UnknownEnvError) as info:
        env_spec("RlauditDep-v3")
    assert str(info.value) == (
        "Gymnasium environment 'RlauditDep-v3' cannot be made, a dependency is missing: "
        "RlauditDep needs fakelib, which is not installed: pip install fakelib. Install the "
        "missing dependency, or use a newer version of the env (which may need other "
        "dependencies): the newer registered versions are RlauditDep-v4, RlauditDep-v5.")
    assert isinstance(info.value.__cause__, ImportError)


def test_dependency_not_installed_on_the_newest_version(register):
    register("RlauditDep-v1")
    register("RlauditDep-v2", _needs_fakesim)
    with pytest.raises(UnknownEnvError) as info:
        env_spec("RlauditDep-v2")
    assert str(info.value) == (
        "Gymnasium environment 'RlauditDep-v2' cannot be made, a dependency is missing: "
        'FakeSim is not installed, run `pip install "fakesim[all]"`. Install the missing '
        "dependency and run again.")
    assert isinstance(info.value.__cause__, gym.error.DependencyNotInstalled)


def test_a_spec_with_a_missing_dependency_is_checked_too(register):
    register("RlauditDep-v1", _needs_fakesim)
    with pytest.raises(UnknownEnvError, match=r"'RlauditDep-v1' cannot be made.*FakeSim is "
                                              r"not installed"):
        env_spec(gym.spec("RlauditDep-v1"))


def test_one_env_is_made_at_spec_time_and_one_per_make(register):
    made = []

    def counting(**kwargs: Any) -> gym.Env:
        made.append(kwargs)
        return CartPoleEnv(**kwargs)

    register("RlauditCount-v0", counting)
    spec = env_spec("RlauditCount-v0", render_mode="rgb_array")
    assert made == [{"render_mode": "rgb_array"}]
    spec.make().close()
    spec.make().close()
    assert len(made) == 3


# -- module:Id -----------------------------------------------------------------------


def test_a_missing_module_says_which_and_how_to_fix_it(cwd: Path):
    with pytest.raises(UnknownEnvError) as info:
        env_spec("rlaudit_no_such_pkg:PandaReach-v1")
    message = str(info.value)
    assert message.startswith(
        "cannot make Gymnasium env 'rlaudit_no_such_pkg:PandaReach-v1': its module "
        "'rlaudit_no_such_pkg', which registers the id, could not be imported. No module "
        f"named 'rlaudit_no_such_pkg' in this Python ({sys.executable}) nor in the current "
        f"folder ({cwd}).")
    assert "run `python -m pytest` from the folder that holds it" in message
    assert "add that folder to `pythonpath` in the pytest ini file" in message
    assert message.endswith("A guess from the module's name: it is often published as "
                            "'rlaudit-no-such-pkg' (pip install rlaudit-no-such-pkg).")
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_no_package_name_is_guessed_without_underscore(cwd: Path):
    with pytest.raises(UnknownEnvError) as info:
        env_spec("rlauditnosuchpkg:Foo-v0")
    assert "module 'rlauditnosuchpkg'" in str(info.value)
    assert "published as" not in str(info.value)


def test_a_module_that_does_not_register_the_id(cwd: Path):
    (cwd / "rlaudit_empty.py").write_text("X = 1\n")
    with pytest.raises(UnknownEnvError, match=r"unknown Gymnasium environment id 'Foo-v0' "
                                              r"\(module 'rlaudit_empty' was imported but did "
                                              r"not register it\)\."):
        env_spec("rlaudit_empty:Foo-v0")


def test_a_module_in_the_current_folder_registers_its_env(cwd: Path):
    (cwd / "rlaudit_cwd_envs.py").write_text(
        "import gymnasium\n"
        f"gymnasium.register('RlauditCwd-v0', entry_point={CARTPOLE!r})\n")
    spec = env_spec("rlaudit_cwd_envs:RlauditCwd-v0")
    assert spec.name == "rlaudit_cwd_envs:RlauditCwd-v0"
    assert spec.make().spec.id == "RlauditCwd-v0"
    assert sys.path[0] == str(cwd)


def test_an_error_inside_the_env_module_passes_through(cwd: Path):
    (cwd / "rlaudit_broken_envs.py").write_text("import rlaudit_missing_dependency\n")
    with pytest.raises(ModuleNotFoundError) as info:
        env_spec("rlaudit_broken_envs:Foo-v0")
    assert str(info.value) == "No module named 'rlaudit_missing_dependency'"


# -- import_module -------------------------------------------------------------------


def test_import_module_imports_from_the_current_folder(cwd: Path):
    (cwd / "rlaudit_cwd_agents.py").write_text("def make():\n    return 42\n")
    with pytest.raises(ImportError):  # the plain `pytest` script's sys.path
        __import__("rlaudit_cwd_agents")
    module = import_module("rlaudit_cwd_agents")
    assert module.make() == 42
    assert Path(module.__file__ or "").parent == cwd
    assert sys.path[0] == str(cwd)


def test_import_module_imports_a_package_and_its_submodule_from_the_current_folder(cwd: Path):
    (cwd / "rlaudit_pkg").mkdir()
    (cwd / "rlaudit_pkg" / "__init__.py").write_text("")
    (cwd / "rlaudit_pkg" / "agents.py").write_text("NAME = 'sub'\n")
    assert import_module("rlaudit_pkg.agents").NAME == "sub"


def test_import_module_says_where_it_looked_and_the_fix(cwd: Path):
    path = list(sys.path)
    with pytest.raises(ModuleNotFoundError) as info:
        import_module("rlaudit_nowhere")
    assert str(info.value) == (
        f"No module named 'rlaudit_nowhere' in this Python ({sys.executable}) nor in the "
        f"current folder ({cwd}). If it comes from a package, install that package; if it "
        "is your own module, run `python -m pytest` from the folder that holds it, or add "
        "that folder to `pythonpath` in the pytest ini file.")
    assert info.value.name == "rlaudit_nowhere"
    assert sys.path == path  # nothing there: the folder is not added


def test_import_module_names_a_missing_submodule(cwd: Path):
    with pytest.raises(ModuleNotFoundError, match=r"^No module named 'json\.rlaudit_nope' in"):
        import_module("json.rlaudit_nope")


def test_a_missing_dependency_inside_a_user_module_passes_through(cwd: Path):
    (cwd / "rlaudit_needs_dep.py").write_text("import rlaudit_missing_dependency\n")
    with pytest.raises(ModuleNotFoundError) as info:
        import_module("rlaudit_needs_dep")
    assert str(info.value) == "No module named 'rlaudit_missing_dependency'"
    assert info.value.name == "rlaudit_missing_dependency"


def test_an_import_error_raised_by_a_user_module_passes_through(cwd: Path):
    (cwd / "rlaudit_raises.py").write_text("raise ImportError('needs torch>=2.0')\n")
    with pytest.raises(ImportError, match=r"^needs torch>=2\.0$"):
        import_module("rlaudit_raises")
