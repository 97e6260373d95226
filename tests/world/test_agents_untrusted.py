"""Untrusted models run no code: an SB3 .zip (a zoo folder's, an hf:// download's) and its
VecNormalize statistics load without unpickling anything by default, and in full (SB3's own
load) with trusted=True.

The proof is a file a pickle would write: crafted into a real zip's data entries and into a
vecnormalize.pkl, it is not written by a default load and is written by a trusted one.
"""

from __future__ import annotations

import base64
import contextlib
import json
import pathlib
import pickle
import shutil
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3 import PPO
from torch import nn

from pytest_rlaudit import audit
from pytest_rlaudit.errors import PolicyError
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.agents.allow_lists import allowed_class
from pytest_rlaudit.world.agents.sb3_load import load_sb3
from pytest_rlaudit.world.agents.untrusted import pickled_global, readable_space

ROOT = Path(__file__).parents[2]
BUNDLED = ROOT / "examples" / "ppo_cartpole.zip"
ZOO = ROOT / "tests" / "data" / "zoo"
PENDULUM_RUN = ZOO / "a2c" / "Pendulum-v1_1"


class _WritesFile:
    """Unpickled, it writes ``target``: what a malicious pickle could do instead."""

    def __init__(self, target: Path) -> None:
        self.target = str(target)

    def __reduce__(self):
        return pathlib.Path.write_text, (pathlib.Path(self.target), "written by a pickle")


def _evil(target: Path) -> str:
    return base64.b64encode(pickle.dumps(_WritesFile(target))).decode()


def _rewrite_zip(src: Path, dst: Path, change) -> Path:
    """A copy of the SB3 zip ``src`` whose ``data`` JSON ``change(data)`` has edited."""
    with zipfile.ZipFile(src) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(files["data"])
    change(data)
    files["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(dst, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return dst


def _crafted(tmp_path: Path, key: str, src: Path = BUNDLED) -> tuple[Path, Path]:
    """A copy of ``src`` whose pickled ``key`` entry writes a file when unpickled."""
    target = tmp_path / f"written-by-{key}.txt"

    def change(data):
        entry = data[key]
        if not (isinstance(entry, dict) and ":serialized:" in entry):
            # A plain JSON dict, written as SB3 writes a pickled one: readable fields beside it.
            entry = {":type:": "<class 'dict'>", **entry}
        entry[":serialized:"] = _evil(target)
        data[key] = entry

    return _rewrite_zip(src, tmp_path / "agent.zip", change), target


def _returns(agent, env: str = "CartPole-v1") -> list[float]:
    return audit(agent, env, scenarios=["delay"], episodes=3).nominal.returns.tolist()


@pytest.fixture(scope="module")
def bundled_returns() -> list[float]:
    """The bundled agent's ``_returns``, which every crafted copy must give: once."""
    return _returns(BUNDLED)


@pytest.mark.parametrize("key", ["_last_obs", "observation_space", "action_space",
                                 "policy_kwargs", "lr_schedule", "rollout_buffer_class"])
def test_a_pickle_in_the_zip_does_not_run_by_default(tmp_path, key, bundled_returns):
    path, target = _crafted(tmp_path, key)
    policy = as_policy(path, env="CartPole-v1")
    assert not target.exists()
    assert _returns(policy) == bundled_returns
    assert not target.exists()


def test_the_same_pickle_runs_when_trusted(tmp_path):
    path, target = _crafted(tmp_path, "_last_obs")
    as_policy(path, env="CartPole-v1", trusted=True)
    assert target.read_text() == "written by a pickle"


def test_a_space_pickle_runs_when_trusted_and_not_by_default(tmp_path):
    path, target = _crafted(tmp_path, "observation_space")
    as_policy(path)  # without an env: the readable fields beside the pickle describe it
    assert not target.exists()
    with contextlib.suppress(PolicyError):  # the "space" it unpickles to is no space
        as_policy(path, env="CartPole-v1", trusted=True)
    assert target.exists()


def test_a_policy_class_pickled_by_value_is_refused_naming_the_trusted_load(tmp_path):
    path, target = _crafted(tmp_path, "policy_class")
    with pytest.raises(PolicyError, match=r"without running code pickled in it: its policy class "
                                          r"is a class pickled by value.*trusted=True.*--rl-trusted"):
        as_policy(path, env="CartPole-v1")
    assert not target.exists()


def test_a_zoo_folder_with_crafted_stats_runs_nothing_by_default(tmp_path):
    run = tmp_path / "Pendulum-v1_1"
    shutil.copytree(PENDULUM_RUN, run)
    stats = run / "Pendulum-v1" / "vecnormalize.pkl"
    target = tmp_path / "written-by-stats.txt"
    stats.write_bytes(pickle.dumps(_WritesFile(target)))
    with pytest.raises(PolicyError, match=r"pickles pathlib\.Path\.write_text, which is not part "
                                          r"of VecNormalize statistics.*--rl-trusted"):
        as_policy(run, env="Pendulum-v1")
    assert not target.exists()
    with pytest.raises(PolicyError, match="does not hold a VecNormalize"):
        as_policy(run, env="Pendulum-v1", trusted=True)
    assert target.read_text() == "written by a pickle"


def test_the_zoo_agents_load_alike_by_default_and_trusted():
    for run, env in ((ZOO / "ppo" / "CartPole-v1_1", "CartPole-v1"), (PENDULUM_RUN, "Pendulum-v1")):
        default, trusted = as_policy(run, env=env), as_policy(run, env=env, trusted=True)
        assert default.name == trusted.name
        obs = np.linspace(-1, 1, 5 * default.model.observation_space.shape[0],
                          dtype=np.float32).reshape(5, -1)
        assert np.array_equal(default.model.policy.predict(obs, deterministic=True)[0],
                              trusted.model.policy.predict(obs, deterministic=True)[0])
        for name, tensor in trusted.model.policy.state_dict().items():
            assert np.array_equal(tensor.numpy(), default.model.policy.state_dict()[name].numpy())


def test_policy_kwargs_come_from_the_readable_fields(tmp_path):
    model = PPO("MlpPolicy", "Pendulum-v1", seed=0, policy_kwargs=dict(
        net_arch=dict(pi=[8], vf=[4]), activation_fn=nn.ELU, log_std_init=-1.0,
        optimizer_class=__import__("torch").optim.RMSprop, optimizer_kwargs=dict(alpha=0.9)))
    model.save(tmp_path / "elu.zip")
    loaded = load_sb3(tmp_path / "elu.zip")
    assert loaded.policy.activation_fn is nn.ELU
    assert loaded.policy_kwargs["net_arch"] == {"pi": [8], "vf": [4]}
    obs = np.linspace(-1, 1, 9, dtype=np.float32).reshape(3, 3)
    assert np.array_equal(loaded.policy.predict(obs, deterministic=True)[0],
                          model.policy.predict(obs, deterministic=True)[0])


class MyActivation(nn.Tanh):
    """An activation of one's own: SB3 pickles it by reference to this module."""


def test_a_custom_activation_needs_the_trusted_load(tmp_path):
    model = PPO("MlpPolicy", "CartPole-v1", seed=0,
                policy_kwargs=dict(net_arch=[8], activation_fn=MyActivation))
    model.save(tmp_path / "custom.zip")
    with pytest.raises(PolicyError, match=r"activation_fn is <class '.*MyActivation'>, which is "
                                          r"not one of those rebuilt by name.*trusted=True"):
        as_policy(tmp_path / "custom.zip", env="CartPole-v1")
    policy = as_policy(tmp_path / "custom.zip", env="CartPole-v1", trusted=True)
    assert policy.model.policy.activation_fn is MyActivation


def test_classes_are_taken_from_allow_lists_by_name_only():
    assert allowed_class("activation_fn", "torch.nn.modules.activation.LeakyReLU") is nn.LeakyReLU
    assert allowed_class("activation_fn", "th.nn.Tanh") is nn.Tanh
    assert allowed_class("activation_fn", "Tanh") is nn.Tanh
    assert allowed_class("activation_fn", "mypackage.Tanh") is None  # not torch's module
    assert allowed_class("activation_fn", "builtins.eval") is None
    assert allowed_class("optimizer_class", "<class 'torch.optim.adam.Adam'>").__name__ == "Adam"
    assert allowed_class("features_extractor_class", "NatureCNN").__name__ == "NatureCNN"


def test_pickled_global_reads_opcodes_without_running_them(tmp_path):
    target = tmp_path / "x.txt"
    assert pickled_global(_evil(target)) is None  # a call, not a bare reference
    assert pickled_global(base64.b64encode(pickle.dumps(nn.Tanh)).decode()) == (
        "torch.nn.modules.activation", "Tanh")
    assert pickled_global("not base64!") is None
    assert not target.exists()


def test_spaces_from_readable_fields():
    with zipfile.ZipFile(PENDULUM_RUN / "Pendulum-v1.zip") as archive:
        data = json.loads(archive.read("data"))
    obs, act = readable_space(data["observation_space"]), readable_space(data["action_space"])
    assert obs.shape == (3,) and obs.high.tolist() == [1.0, 1.0, 8.0]
    assert act.low.tolist() == [-2.0] and act.dtype == np.float32
    assert readable_space({":type:": "<class 'gymnasium.spaces.box.Box'>", "dtype": "uint8",
                           "_shape": [84, 84, 4], "low": "[[[0 0 ...]]]", "high": "255"}) is None


def test_a_zoo_config_gives_what_the_zip_does_not(tmp_path):
    """An activation SB3 could only write as a repr is read from config.yml, as data."""
    run = tmp_path / "ppo" / "CartPole-v1_1"
    (run / "CartPole-v1").mkdir(parents=True)
    model = PPO("MlpPolicy", "CartPole-v1", seed=0,
                policy_kwargs=dict(net_arch=[8], activation_fn=nn.ReLU))
    model.save(run / "CartPole-v1.zip")

    def unreadable(data):
        data["policy_kwargs"]["activation_fn"] = "<function <lambda> at 0x7f00>"

    _rewrite_zip(run / "CartPole-v1.zip", run / "CartPole-v1.zip", unreadable)
    with pytest.raises(PolicyError, match=r"activation_fn is <function.*trusted=True"):
        as_policy(run, env="CartPole-v1")
    (run / "CartPole-v1" / "config.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n"
        "- - - policy_kwargs\n    - dict(net_arch=[8], activation_fn=nn.ReLU)\n")
    policy = as_policy(run, env="CartPole-v1")
    assert policy.model.policy.activation_fn is nn.ReLU
    obs = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    assert np.array_equal(policy.model.policy.predict(obs, deterministic=True)[0],
                          model.policy.predict(obs, deterministic=True)[0])

    def another_class(data):
        data["policy_kwargs"]["activation_fn"] = "<class 'mine.Act'>"

    # The config fills in what the zip does not say, never a class the zip does name.
    _rewrite_zip(run / "CartPole-v1.zip", run / "CartPole-v1.zip", another_class)
    with pytest.raises(PolicyError, match=r"activation_fn is <class 'mine\.Act'>.*torch\.nn's "
                                          r"activations.*trusted=True"):
        as_policy(run, env="CartPole-v1")


class _Pixels(gym.Env):
    """Channel-last 36x36 RGB frames (NatureCNN's smallest): the spaces of a CNN agent."""

    observation_space = gym.spaces.Box(0, 255, (36, 36, 3), dtype=np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, True, {}


def test_a_cnn_agent_takes_the_env_s_images_channel_first(tmp_path):
    model = PPO("CnnPolicy", _Pixels(), seed=0, n_steps=8, batch_size=8,
                policy_kwargs=dict(net_arch=[8], features_extractor_kwargs=dict(features_dim=16)))
    model.save(tmp_path / "cnn.zip")
    with pytest.raises(PolicyError, match=r"spaces .* are not described in full.*env=env"):
        as_policy(tmp_path / "cnn.zip")  # 3888 bounds: numpy summarises them in the file
    default = as_policy(tmp_path / "cnn.zip", env=_Pixels).model
    trusted = as_policy(tmp_path / "cnn.zip", env=_Pixels, trusted=True).model
    assert default.observation_space == trusted.observation_space  # (3, 36, 36)
    frames = np.random.default_rng(0).integers(0, 256, (4, 36, 36, 3), dtype=np.uint8)
    assert np.array_equal(default.policy.predict(frames, deterministic=True)[0],
                          trusted.policy.predict(frames, deterministic=True)[0])


def test_a_features_extractor_of_one_s_own_needs_the_trusted_load(tmp_path):
    from pixel_envs import CentreDot, TinyCNN

    PPO("CnnPolicy", CentreDot(), seed=0, n_steps=8, batch_size=8,
        policy_kwargs={"features_extractor_class": TinyCNN, "net_arch": []}).save(
        tmp_path / "tiny.zip")
    with pytest.raises(PolicyError, match=r"features_extractor_class is <class "
                                          r"'pixel_envs\.TinyCNN'>.*--rl-trusted"):
        as_policy(tmp_path / "tiny.zip", env=CentreDot)
    assert as_policy(tmp_path / "tiny.zip", env=CentreDot, trusted=True).name == "PPO(tiny.zip)"
