"""A zoo folder's config.yml names no code a default load runs (issue 43, points 1 and 5).

Each test crafts a config.yml in a tmp copy of the real zoo folder tests/data/zoo/ppo/
CartPole-v1_1 (the zoo's own list-of-pairs form, one entry appended): env wrappers come
from an allow-list by name, checked before anything is imported; callbacks and
policy_kwargs' classes are never imported; a broken config is an error naming the file
and the fix, not a library's internals."""

from __future__ import annotations

import json
import pickle
import shutil
import sys
import zipfile
from pathlib import Path

import gymnasium as gym
import pytest

from pytest_rlaudit.errors import CouldNotAuditError, PolicyError, UntrustedFileError
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import EnvNeeds, as_policy, env_for
from pytest_rlaudit.world.agents.zoo import read_saved_run, read_yaml
from pytest_rlaudit.world.scenarios import NOMINAL

CARTPOLE_RUN = Path(__file__).parents[1] / "data" / "zoo" / "ppo" / "CartPole-v1_1"
TRUST = r".*trusted=True.*--rl-trusted"


class TagWrapper(gym.ObservationWrapper):
    """A harmless wrapper of this module's own: what a trusted folder may name."""

    def __init__(self, env: gym.Env, scale: float = 1.0) -> None:
        super().__init__(env)
        self.scale = scale

    def observation(self, observation):
        return observation * self.scale


def _run(tmp_path: Path, *entries: str, args: str | None = None) -> Path:
    """A copy of the CartPole zoo folder whose config.yml ends with ``entries`` (each a
    ``- - key\\n    - value`` pair of the zoo's form, given as YAML text)."""
    run = tmp_path / "ppo" / "CartPole-v1_1"
    shutil.copytree(CARTPOLE_RUN, run)
    config = run / "CartPole-v1" / "config.yml"
    config.write_text(config.read_text() + "".join(entries))
    if args is not None:
        (run / "CartPole-v1" / "args.yml").write_text(args)
    return run


def _entry(key: str, value: str) -> str:
    return f"  - - {key}\n    - {value}\n"


def _config(run: Path) -> str:
    return str(run / "CartPole-v1" / "config.yml")


# --------------------------------------------------------- env_wrapper: allow-list


@pytest.mark.parametrize("name, kwargs", [
    ("os.system", "{command: 'touch {marker}'}"),
    ("subprocess.run", "{args: [touch, '{marker}']}"),
    ("pydoc.pipepager", "{cmd: 'touch {marker}'}"),
    ("builtins.eval", "{source: \"open('{marker}', 'w')\"}"),
])
def test_a_config_naming_a_callable_off_the_allow_list_is_refused_before_it_runs(
        tmp_path, name, kwargs):
    marker = tmp_path / "PWNED"
    run = _run(tmp_path, _entry("env_wrapper", f"[{{{name}: {kwargs.replace('{marker}', str(marker))}}}]"))
    with pytest.raises(UntrustedFileError) as caught:
        policy = as_policy(run)
        env_for(policy, "CartPole-v1").make()  # where the unfixed load ran it
    message = str(caught.value)
    assert _config(run) in message and repr(name) in message
    assert "trusted=True" in message and "--rl-trusted" in message
    assert isinstance(caught.value, (PolicyError, CouldNotAuditError))
    assert not marker.exists()


def test_a_module_of_the_folder_itself_is_never_imported(tmp_path, monkeypatch):
    marker = tmp_path / "IMPORTED"
    run = _run(tmp_path, _entry("env_wrapper", "evil_wrappers.Evil"))
    for where in (run, run / "CartPole-v1"):
        (where / "evil_wrappers.py").write_text(
            f"open({str(marker)!r}, 'w').close()\nimport gymnasium\n"
            "class Evil(gymnasium.Wrapper):\n    pass\n")
    monkeypatch.syspath_prepend(str(run))
    monkeypatch.chdir(run)
    monkeypatch.delitem(sys.modules, "evil_wrappers", raising=False)
    with pytest.raises(UntrustedFileError, match=rf"{_config(run)}.*'evil_wrappers\.Evil'{TRUST}"):
        as_policy(run)
    assert not marker.exists() and "evil_wrappers" not in sys.modules


def test_the_zoo_s_old_utils_wrappers_spelling_never_imports_the_folder_s_utils(
        tmp_path, monkeypatch):
    """``utils.wrappers.X`` is rl_zoo3's module: a ``utils/wrappers.py`` of the folder is
    not imported in its place."""
    marker = tmp_path / "IMPORTED"
    run = _run(tmp_path, _entry("env_wrapper", "utils.wrappers.TimeFeatureWrapper"))
    (run / "utils").mkdir()
    (run / "utils" / "__init__.py").write_text("")
    (run / "utils" / "wrappers.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nfrom gymnasium.wrappers import TimeLimit "
        "as TimeFeatureWrapper\n")
    monkeypatch.syspath_prepend(str(run))
    monkeypatch.delitem(sys.modules, "utils", raising=False)
    monkeypatch.delitem(sys.modules, "utils.wrappers", raising=False)
    try:
        as_policy(run)
    except PolicyError as exc:  # rl_zoo3 not installed here: the message says to install it
        assert "rl_zoo3" in str(exc)
    assert not marker.exists() and "utils.wrappers" not in sys.modules


def test_an_allow_listed_package_the_folder_itself_carries_is_not_imported(
        tmp_path, monkeypatch):
    """rl_zoo3 is not installed here: a ``rl_zoo3/`` in the folder (on sys.path) would be
    found in its place; the name is on the allow-list, the module it would load is not."""
    if "rl_zoo3" in sys.modules:
        pytest.skip("rl_zoo3 is imported: nothing can stand in for it")
    marker = tmp_path / "IMPORTED"
    run = _run(tmp_path, _entry("env_wrapper", "rl_zoo3.wrappers.HistoryWrapper"))
    (run / "rl_zoo3").mkdir()
    (run / "rl_zoo3" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (run / "rl_zoo3" / "wrappers.py").write_text("from gymnasium import Wrapper as HistoryWrapper\n")
    monkeypatch.syspath_prepend(str(run))
    with pytest.raises(UntrustedFileError, match=rf"package rl_zoo3 would be imported from "
                                                 rf"{run}.*inside the agent's own folder{TRUST}"):
        as_policy(run)
    assert not marker.exists() and "rl_zoo3" not in sys.modules


def test_a_hub_download_s_config_is_read_alike(tmp_path, monkeypatch):
    constants = pytest.importorskip("huggingface_hub.constants")
    marker = tmp_path / "PWNED"
    run = _run(tmp_path / "source", _entry(
        "env_wrapper", f"[{{pydoc.pipepager: {{cmd: 'touch {marker}'}}}}]"))
    snapshot = tmp_path / "cache" / "models--sb3--ppo-CartPole-v1" / "snapshots" / "0123"
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0123")
    shutil.copy(run / "CartPole-v1.zip", snapshot / "ppo-CartPole-v1.zip")
    for name in ("config.yml", "args.yml"):
        shutil.copy(run / "CartPole-v1" / name, snapshot / name)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(UntrustedFileError, match=rf"config\.yml'.*'pydoc\.pipepager'{TRUST}"):
        as_policy("hf://sb3/ppo-CartPole-v1")
    assert not marker.exists()


@pytest.mark.parametrize("name, why", [
    ("gymnasium.wrappers.RecordVideo", "writes video files"),
    ("gymnasium.wrappers.HumanRendering", "opens a window"),
    ("stable_baselines3.common.atari_wrappers.gym", "not one of stable_baselines3's env wrapper"),
    ("gymnasium.wrappers._private", "not on the allow-list"),
])
def test_names_in_allowed_modules_that_are_not_env_wrappers_or_act_outside_are_refused(
        tmp_path, name, why):
    run = _run(tmp_path, _entry("env_wrapper", name))
    with pytest.raises(UntrustedFileError, match=rf"{name.replace('.', '[.]')}'.*{why}.*{TRUST}"):
        read_saved_run(run)


@pytest.mark.parametrize("name", ["gymnasium.wrappers.TimeAwareObservation",
                                  "sb3_contrib.common.wrappers.TimeFeatureWrapper"])
def test_allow_listed_wrappers_load_by_default(tmp_path, name):
    run = _run(tmp_path, _entry("env_wrapper", name))
    env = read_saved_run(run).needs.apply("CartPole-v1").make()
    assert type(env).__name__ == name.rpartition(".")[2]


def test_trusted_imports_a_wrapper_the_allow_list_does_not_hold(tmp_path):
    name = f"{__name__}.TagWrapper"
    run = _run(tmp_path, _entry("env_wrapper", f"[{{{name}: {{scale: 2.0}}}}]"))
    with pytest.raises(UntrustedFileError, match=rf"'{name.replace('.', '[.]')}'{TRUST}"):
        as_policy(run)
    policy = as_policy(run, trusted=True)
    env = env_for(policy, "CartPole-v1").make()
    assert isinstance(env, TagWrapper) and env.scale == 2.0
    returns = run_episodes(policy, env_for(policy, "CartPole-v1"), [NOMINAL], 1, seed=0)
    assert returns["nominal"].returns.shape == (1,)


def test_the_needs_travel_to_workers_with_their_trust(tmp_path):
    """EnvNeeds is pickled to worker processes (inside the env's factory): a trusted one
    still imports its wrapper there; an untrusted one refuses an unlisted name there too,
    before importing it, even if it was put in after the load's check."""
    name = f"{__name__}.TagWrapper"
    trusted = read_saved_run(_run(tmp_path / "a", _entry("env_wrapper", name)), trusted=True).needs
    copy = pickle.loads(pickle.dumps(trusted))
    assert copy.trusted and isinstance(copy.wrap(gym.make("CartPole-v1")), TagWrapper)

    untrusted = read_saved_run(_run(tmp_path / "b")).needs
    assert not untrusted.trusted
    object.__setattr__(untrusted, "wrappers", (("evil_wrappers.Evil", {}),))
    copy = pickle.loads(pickle.dumps(untrusted))
    with pytest.raises(UntrustedFileError, match="evil_wrappers"):
        copy.wrap(gym.make("CartPole-v1"))
    assert "evil_wrappers" not in sys.modules


# ------------------------------------------- callbacks and policy_kwargs: never run


def test_callbacks_are_never_imported_or_run(tmp_path, monkeypatch):
    marker = tmp_path / "PWNED"
    run = _run(tmp_path, _entry("callback", f"[{{pydoc.pipepager: {{cmd: 'touch {marker}'}}}}, "
                                            "evil_wrappers.Evil]"))
    (run / "evil_wrappers.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(run))
    monkeypatch.delitem(sys.modules, "evil_wrappers", raising=False)
    policy = as_policy(run)
    run_episodes(policy, env_for(policy, "CartPole-v1"), [NOMINAL], 1, seed=0)
    assert not marker.exists() and "evil_wrappers" not in sys.modules


def test_a_policy_kwargs_class_naming_os_system_is_refused_and_its_code_never_run(tmp_path):
    """An activation the zip only holds pickled is taken from config.yml, by name from the
    allow-list: ``os.system`` is refused; an expression is never evaluated."""
    from stable_baselines3 import PPO
    from torch import nn

    marker = tmp_path / "PWNED"
    run = _run(tmp_path)
    model_path = run / "CartPole-v1.zip"
    PPO("MlpPolicy", "CartPole-v1", seed=0, device="cpu",
        policy_kwargs=dict(net_arch=[8], activation_fn=nn.ReLU)).save(model_path)
    with zipfile.ZipFile(model_path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(files["data"])
    data["policy_kwargs"]["activation_fn"] = "<function <lambda> at 0x7f00>"
    files["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(model_path, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    config = run / "CartPole-v1" / "config.yml"
    base = config.read_text()
    config.write_text(base + _entry("policy_kwargs", "dict(net_arch=[8], activation_fn=os.system)"))
    with pytest.raises(PolicyError, match=rf"activation_fn.*torch\.nn's activations{TRUST}"):
        as_policy(run, env="CartPole-v1")
    config.write_text(base + _entry(
        "policy_kwargs", f"\"__import__('os').system('touch {marker}')\""))
    with pytest.raises(PolicyError, match=rf"activation_fn{TRUST}"):
        as_policy(run, env="CartPole-v1")
    assert not marker.exists()


def test_vec_env_wrapper_stays_refused(tmp_path):
    run = _run(tmp_path, _entry("vec_env_wrapper", "pydoc.pipepager"))
    with pytest.raises(PolicyError, match=r"vec_env_wrapper 'pydoc\.pipepager'.*config\.yml"):
        read_saved_run(run)


# ------------------------------------------- a broken config: the file and the fix


def test_an_ordered_dict_tag_over_a_mapping_of_its_own_keys_is_refused(tmp_path):
    path = tmp_path / "config.yml"
    path.write_text("!!python/object/apply:collections.OrderedDict {frame_stack: 4}\n")
    with pytest.raises(PolicyError, match=rf"{path}.*OrderedDict tag.*frame_stack.*read it as "
                                          r"empty.*list of \[key, value\] pairs"):
        read_yaml(path)


@pytest.mark.parametrize("text", [
    "!!python/object/apply:collections.OrderedDict {dictitems: {frame_stack: 4, n: 1}}\n",
    "!!python/object/apply:collections.OrderedDict {args: [[[frame_stack, 4], [n, 1]]]}\n",
    "!!python/object/apply:collections.OrderedDict\n- {frame_stack: 4, n: 1}\n",
])
def test_pyyaml_s_own_forms_of_the_tag_are_read_as_pyyaml_reads_them(tmp_path, text):
    yaml = pytest.importorskip("yaml")
    path = tmp_path / "config.yml"
    path.write_text(text)
    assert read_yaml(path) == {"frame_stack": 4, "n": 1} == dict(
        yaml.load(text, Loader=yaml.UnsafeLoader))


@pytest.mark.parametrize("text", ["!!python/object/apply:collections.OrderedDict [[a, b, c]]\n",
                                  "!!python/object/apply:collections.OrderedDict [7]\n",
                                  "!!python/object/apply:collections.OrderedDict [[[a, 1]], 2]\n"])
def test_an_ordered_dict_tag_that_holds_no_pairs_names_the_file(tmp_path, text):
    path = tmp_path / "config.yml"
    path.write_text(text)
    with pytest.raises(PolicyError, match=rf"cannot read '{path}'.*OrderedDict tag"):
        read_yaml(path)


@pytest.mark.parametrize("value", ["four", "-1", "true", "2.5", "[4]"])
def test_a_frame_stack_that_is_not_a_count_names_the_file(tmp_path, value):
    run = _run(tmp_path, _entry("frame_stack", value))
    with pytest.raises(PolicyError, match=rf"{_config(run)}.*frame_stack .* is not a number of "
                                          "frames.*whole number"):
        read_saved_run(run)


@pytest.mark.parametrize("value, stack", [("0", 0), ("null", 0), ("false", 0), ("3", 3)])
def test_the_frame_stacks_the_zoo_writes_are_read(tmp_path, value, stack):
    assert read_saved_run(_run(tmp_path, _entry("frame_stack", value))).frame_stack == stack


def test_an_atari_wrapper_on_a_cartpole_folder_is_named_at_load_time(tmp_path):
    pytest.importorskip("cv2")
    wrapper = "stable_baselines3.common.atari_wrappers.AtariWrapper"
    run = _run(tmp_path, _entry("env_wrapper", wrapper))
    with pytest.raises(PolicyError, match=rf"{_config(run)}.*AtariWrapper.*Atari \(ALE\) games, "
                                          r"but CartPole-v1 is not one.*remove the wrapper"):
        as_policy(run)
    # Audited on an env that is not Atari, named when the env is made, not in the wrapper.
    env = EnvNeeds(wrappers=((wrapper, {}),)).apply("CartPole-v1")
    with pytest.raises(PolicyError, match=r"AtariWrapper.*but CartPole-v1 is not one"):
        env.make()


def test_wrapper_keyword_arguments_are_checked_at_load_time(tmp_path):
    run = _run(tmp_path, _entry("env_wrapper",
                                "[{gymnasium.wrappers.TimeLimit: {max_steps: 10}}]"))
    with pytest.raises(PolicyError, match=rf"{_config(run)}.*TimeLimit' cannot take the keyword "
                                          r"arguments \{'max_steps': 10\}.*max_episode_steps"):
        read_saved_run(run)
    bad = _run(tmp_path / "b", _entry("env_wrapper", "[{gymnasium.wrappers.TimeLimit: [1, 2]}]"))
    with pytest.raises(PolicyError, match=r"TimeLimit' takes \[1, 2\], not a mapping"):
        read_saved_run(bad)
    empty = _run(tmp_path / "d", _entry("env_wrapper", "[{}]"))
    with pytest.raises(PolicyError, match=r"env_wrapper entry \{\} must name one wrapper"):
        read_saved_run(empty)
    nameless = _run(tmp_path / "c", _entry("env_wrapper", "[[1, 2]]"))
    with pytest.raises(PolicyError, match=r"config\.yml'.*does not name a wrapper"):
        read_saved_run(nameless)


def test_a_function_a_wrapper_takes_is_never_text_from_the_file(tmp_path):
    marker = tmp_path / "RAN"
    func = f"\"lambda obs: open('{marker}', 'a') and obs\""
    run = _run(tmp_path, _entry("env_wrapper",
                                f"[{{gymnasium.wrappers.TransformObservation: {{func: {func}, "
                                "observation_space: null}}]"))
    with pytest.raises(PolicyError, match=rf"{_config(run)}.*TransformObservation' takes a "
                                          r"function as func.*never evaluated.*own code"):
        read_saved_run(run)
    assert not marker.exists()


@pytest.mark.parametrize("args, match", [
    ("{env: CartPole-v1, env_kwargs: [1, 2]}", r"args\.yml'.*env_kwargs \[1, 2\] is not a mapping"),
    ("{env: CartPole-v1, env_kwargs: {1: 2}}", r"args\.yml'.*env_kwargs \{1: 2\} is not a mapping"),
    ("{env: [CartPole-v1]}", r"args\.yml'.*env \['CartPole-v1'\] is not an env id"),
])
def test_an_args_yml_that_cannot_be_right_names_the_file(tmp_path, args, match):
    with pytest.raises(PolicyError, match=match):
        read_saved_run(_run(tmp_path, args=args + "\n"))


def test_the_real_folders_load_as_before():
    run = read_saved_run(CARTPOLE_RUN)
    assert (run.algo, run.frame_stack, run.needs.wrappers, run.needs.trained_on) == (
        "PPO", 0, (), "CartPole-v1")
    assert run.needs == read_saved_run(CARTPOLE_RUN, trusted=True).needs  # trust makes no other env
    assert as_policy(CARTPOLE_RUN).name == "PPO(CartPole-v1_1)"
