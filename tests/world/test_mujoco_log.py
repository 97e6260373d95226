"""MuJoCo's warnings while the audit builds envs: Python warnings, not a line per env."""

from __future__ import annotations

import warnings

import mujoco
import numpy as np
import pytest
from toy_envs import CounterEnv

from pytest_rlaudit import scenarios
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.envs import env_spec

UNSTABLE = "Nan, Inf or huge value in QPOS"
XML = "<mujoco><worldbody><body><freejoint/><geom size='.1'/></body></worldbody></mujoco>"


class WarnsWhenBuilt(CounterEnv):
    """An env whose construction makes MuJoCo warn (the first unstable step of a data),
    as a model file with a deprecated attribute does at every compilation."""

    built = 0

    def __init__(self) -> None:
        super().__init__(horizon=3)
        WarnsWhenBuilt.built += 1
        model = mujoco.MjModel.from_xml_string(XML)
        data = mujoco.MjData(model)
        data.qpos[0] = np.nan
        mujoco.mj_step(model, data)


def test_an_audit_turns_mujocos_warnings_into_python_warnings(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)  # where MuJoCo would write MUJOCO_LOG.TXT
    policy = as_policy(lambda obs: np.zeros(len(obs), np.int64))
    WarnsWhenBuilt.built = 0
    with pytest.warns(UserWarning, match=f"^MuJoCo: {UNSTABLE}") as caught:
        out = run_episodes(policy, env_spec(WarnsWhenBuilt), [scenarios.get("nominal")], 4,
                           batch_size=4)
    assert out["nominal"].returns.tolist() == [6.0] * 4  # 1 + 2 + 3
    from_mujoco = [w for w in caught if str(w.message).startswith("MuJoCo:")]
    assert len(from_mujoco) == WarnsWhenBuilt.built >= 4  # every env built, the checks' too
    printed = capfd.readouterr()
    assert UNSTABLE not in printed.out + printed.err
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert mujoco.get_mju_user_warning() is None  # MuJoCo's own handling is back after


def test_a_handler_of_the_users_is_left_alone():
    heard: list[str] = []
    mujoco.set_mju_user_warning(heard.append)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a Python warning would raise here
            env_spec(WarnsWhenBuilt).make()
        assert len(heard) == 1 and heard[0].startswith(UNSTABLE)
        assert mujoco.get_mju_user_warning() is not None
    finally:
        mujoco.set_mju_user_warning(None)
