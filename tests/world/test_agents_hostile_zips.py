"""Broken and hostile model files, as people share them: each is an error naming the file
and the fix, never a library's internals (an IndexError from SB3's fallback, an
AttributeError on a list, numpy's broadcast error blamed on the agent). Each file is
built here from the bundled PPO zip or a zoo folder's statistics."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import stable_baselines3  # noqa: F401  (in pytester's sys.modules snapshots: see below)

from pytest_rlaudit.errors import PolicyError, SpacesMismatchError
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.agents.archives import LIMIT_VARIABLE

# SB3 is imported above so that an in-process pytester run, which restores sys.modules
# after it, does not leave SB3 (and its cv2) to be imported again, halfway.
ROOT = Path(__file__).parents[2]
BUNDLED = ROOT / "examples" / "ppo_cartpole.zip"
PENDULUM_STATS = ROOT / "tests" / "data" / "zoo" / "a2c" / "Pendulum-v1_1" / "Pendulum-v1" / \
    "vecnormalize.pkl"
NOT_INTACT = "so it is not an intact SB3 model zip"


@pytest.fixture(autouse=True)
def _default_limits(monkeypatch):
    monkeypatch.delenv(LIMIT_VARIABLE, raising=False)


def _crafted(dst: Path, change) -> Path:
    """A copy of the bundled zip whose members ``change(members)`` has edited."""
    with zipfile.ZipFile(BUNDLED) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    with zipfile.ZipFile(dst, "w") as archive:
        for name, payload in change(members).items():
            archive.writestr(name, payload)
    return dst


def _load_error(path: Path, *, trusted: bool = False) -> str:
    with pytest.raises(PolicyError) as caught:
        as_policy(str(path), env="CartPole-v1", trusted=trusted)
    message = str(caught.value)
    assert str(path) in message
    assert "IndexError" not in message and "AttributeError" not in message
    return message


@pytest.mark.parametrize("trusted", [False, True])
def test_a_member_named_outside_the_archive_is_named_and_nothing_is_written(
        tmp_path, monkeypatch, trusted):
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    crafted = _crafted(folder / "slip.zip",
                       lambda m: {**m, "../../slip_evil.pth": m["policy.pth"]})
    message = _load_error(crafted, trusted=trusted)
    assert "unexpected member '../../slip_evil.pth'" in message and NOT_INTACT in message
    assert "model.save" in message  # the fix: the model's own zip
    assert not (tmp_path / "slip_evil.pth").exists() and not any(tmp_path.rglob("slip_evil*"))


def test_a_weights_member_sb3_never_writes_is_named(tmp_path):
    crafted = _crafted(tmp_path / "extra.zip", lambda m: {**m, "evil.pth": m["policy.pth"]})
    message = _load_error(crafted)
    assert "unexpected member 'evil.pth', a weights file SB3 never writes" in message


@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.parametrize("change, said", [
    (lambda m: {**m, "actor.optimizer.pth": m["policy.optimizer.pth"]},
     "(ValueError: Key actor.optimizer is an invalid object name.)"),
    (lambda m: {k: v for k, v in m.items() if k != "policy.optimizer.pth"},
     "got {'policy'}"),  # SB3 prints the expected set in hash order: not compared
], ids=["another algorithm's optimizer", "no optimizer"])
def test_weights_members_another_algorithm_saves_are_named(tmp_path, change, said, trusted):
    """Names SB3 writes, but not for this algorithm: SB3's load refuses them, then its
    retry for old DQN files fails on the stand-in optimizer (an IndexError, a KeyError)."""
    message = _load_error(_crafted(tmp_path / "other.zip", change), trusted=trusted)
    assert "its .pth members are not those a PPO model saves" in message and said in message
    assert NOT_INTACT in message and "KeyError" not in message
    assert ("nothing of it was run" in message) is not trusted  # a trusted load ran its pickles


@pytest.mark.parametrize("data, said", [
    (b"[1, 2]", "its data member is a list in JSON, not the object of settings SB3 writes"),
    (b"\"PPO\"", "its data member is a string in JSON"),
    (b"\xff\xfe{}", "its data member is not UTF-8 text"),
    (b"{\"policy_class\": ", "its data member is not JSON"),
])
def test_a_data_member_that_is_not_sb3_settings_is_named(tmp_path, data, said):
    message = _load_error(_crafted(tmp_path / "data.zip", lambda m: {**m, "data": data}))
    assert said in message and NOT_INTACT in message


@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.parametrize("key, value", [
    ("policy_class", "MlpPolicy"), ("policy_class", {"__module__": "x"}),
    ("observation_space", [4]), ("policy_kwargs", "net_arch=[64]"),
])
def test_a_data_entry_not_as_sb3_writes_it_is_named(tmp_path, key, value, trusted):
    def change(members):
        data = json.loads(members["data"])
        data[key] = value
        return {**members, "data": json.dumps(data).encode()}

    message = _load_error(_crafted(tmp_path / "entry.zip", change), trusted=trusted)
    assert f"its data's {key} is " in message and NOT_INTACT in message
    assert "':serialized:'" in message  # what SB3 writes there


def test_a_truncated_zip_is_named(tmp_path):
    truncated = tmp_path / "truncated.zip"
    raw = BUNDLED.read_bytes()
    truncated.write_bytes(raw[: len(raw) // 2])
    message = _load_error(truncated)
    assert "not a stable-baselines3 model zip" in message and "download it again" in message


def test_a_zip_without_its_policy_weights_is_named(tmp_path):
    crafted = _crafted(tmp_path / "nopolicy.zip",
                       lambda m: {k: v for k, v in m.items() if k != "policy.pth"})
    message = _load_error(crafted)
    assert "it holds no 'policy.pth' member (the policy's weights)" in message


def test_a_pth_member_that_is_not_a_torch_file_is_named(tmp_path):
    crafted = _crafted(tmp_path / "badpolicy.zip",
                       lambda m: {**m, "policy.pth": b"not a torch file"})
    message = _load_error(crafted)
    assert "its member 'policy.pth' is not a torch file" in message and NOT_INTACT in message
    assert "weights_only" not in message  # not torch's advice to unpickle in full


def test_another_envs_statistics_are_named_at_load_with_both_shapes():
    with pytest.raises(SpacesMismatchError) as caught:
        as_policy(str(BUNDLED), vec_normalize=str(PENDULUM_STATS), env="CartPole-v1")
    message = str(caught.value)
    assert str(PENDULUM_STATS) in message
    assert "shape (3,)" in message and "shape (4,)" in message
    assert "--rl-vec-normalize" in message and "broadcast" not in message


def test_another_envs_statistics_are_named_at_bind_and_at_the_first_call():
    """Without the env at load (a policy built before the audit), the mismatch is said
    when the audit binds the policy to its env, or else at its first call."""
    from gymnasium import spaces

    bound = as_policy(str(BUNDLED), vec_normalize=str(PENDULUM_STATS))
    with pytest.raises(SpacesMismatchError, match=r"shape \(3,\).*shape \(4,\)"):
        bound.bind(spaces.Box(-np.inf, np.inf, (4,)), spaces.Discrete(2))
    called = as_policy(str(BUNDLED), vec_normalize=str(PENDULUM_STATS))
    with pytest.raises(SpacesMismatchError, match=os.path.basename(PENDULUM_STATS)):
        called.act(np.zeros((2, 4), dtype=np.float32), None)


def test_the_right_statistics_still_load_and_normalise():
    run = ROOT / "tests" / "data" / "zoo" / "a2c" / "Pendulum-v1_1"
    policy = as_policy(str(run), env="Pendulum-v1")
    actions, _ = policy.act(np.zeros((2, 3), dtype=np.float32), None)
    assert actions.shape == (2, 1)


def test_on_the_command_line_another_envs_statistics_are_an_error_not_a_failed_audit(tester):
    result = tester.runpytest("--rl-audit", f"--rl-agent={BUNDLED}",
                              f"--rl-vec-normalize={PENDULUM_STATS}", "--rl-env", "CartPole-v1",
                              "--rl-episodes", "2", "--rl-scenarios", "delay",
                              "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error, not a failed test
    result.stdout.fnmatch_lines(["*VecNormalize statistics*vecnormalize.pkl' are for "
                                 "observations of shape (3,), but the env's observations have "
                                 "shape (4,)*"])
