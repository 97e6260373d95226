"""RobustnessCallback: audits during SB3 training, logged through SB3's logger, leaving
training exactly as it would have gone without them."""

from __future__ import annotations

import contextlib
import csv
import math
import random
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import VecNormalize

from pytest_rlaudit import AgentWarning, PolicyError, Schedule, UnknownEnvError, UnknownScenarioError
from pytest_rlaudit.auditing import callback as callback_module
from pytest_rlaudit.sb3 import RATING_SCORES, RobustnessCallback

TRAINED_PPO = Path(__file__).resolve().parents[2] / "examples" / "ppo_cartpole.zip"
TINY = dict(n_steps=64, batch_size=64, n_epochs=1, policy_kwargs=dict(net_arch=[16]), seed=0)


class GlobalRandomReset(gym.Wrapper):
    """An env that draws from the global python, numpy and torch streams on reset, as
    many hand-written envs do: an audit of it must not shift training's draws."""

    def reset(self, **kwargs):
        random.random(), np.random.random(), torch.rand(1)
        return self.env.reset(**kwargs)


def greedy_env() -> gym.Env:
    return GlobalRandomReset(gym.make("CartPole-v1"))


def train(callback=None, total=256) -> PPO:
    model = PPO("MlpPolicy", "CartPole-v1", **TINY)
    model.learn(total, callback=callback)
    return model


def weights(model: PPO) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.policy.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def audited_steps(cb: RobustnessCallback) -> list[int]:
    return sorted([s for s, _ in cb.history] + [s for s, _ in cb.skipped])


@pytest.mark.filterwarnings("ignore::pytest_rlaudit.errors.AgentWarning")  # near random
def test_audits_leave_training_as_it_would_have_gone_without_them(monkeypatch):
    plain = weights(train())

    def callback():
        return RobustnessCallback(greedy_env, scenarios=["delay", "speed_5x"], audit_freq=64,
                                  episodes=2)

    cb = callback()
    assert same(weights(train(cb)), plain)
    assert audited_steps(cb) == [64, 128, 192, 256]  # the audits really ran
    # The test can fail: without the guard, the env's global draws shift training's.
    monkeypatch.setattr(callback_module, "training_state_kept", lambda model: contextlib.nullcontext())
    assert not same(weights(train(callback())), plain)


def test_an_audit_keeps_the_policy_mode_and_the_training_vec_normalize():
    venv = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, seed=0))
    model = PPO("MlpPolicy", venv, **TINY)
    cb = RobustnessCallback("CartPole-v1", scenarios="delay", audit_freq=64, episodes=2)
    with pytest.warns(AgentWarning):  # untrained: no audit has a ratio
        model.learn(64, callback=cb)
    model.policy.set_training_mode(True)
    before = venv.obs_rms.mean.copy()
    assert cb.run_audit() is None
    assert len(cb.skipped) == 2
    assert model.policy.training and all(m.training for m in model.policy.modules())
    # The audit normalised with a copy of the statistics; training's still update.
    assert venv.training and venv.norm_reward
    np.testing.assert_array_equal(venv.obs_rms.mean, before)
    venv.step_async(np.zeros(1, dtype=np.int64)), venv.step_wait()
    assert not np.array_equal(venv.obs_rms.mean, before)


def _rows(folder: Path) -> list[dict[str, str]]:
    with open(folder / "progress.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_ratios_and_ratings_go_to_the_sb3_logger_at_the_audit_timesteps(tmp_path):
    model = PPO.load(TRAINED_PPO, env=gym.make("CartPole-v1"), device="cpu", n_steps=64,
                     batch_size=64, n_epochs=1, seed=0)
    model.set_logger(configure(str(tmp_path), ["csv"]))
    cb = RobustnessCallback("CartPole-v1", scenarios=["delay", "speed_5x"], audit_freq=128,
                            episodes=2)
    model.learn(256, callback=cb)

    # The audit due at 256 (the end) is the final audit, of the model learn() returns.
    assert [s for s, _ in cb.history] == [128, 256] and not cb.skipped
    assert cb.last_result is cb.history[-1][1]
    rows = [r for r in _rows(tmp_path) if r.get("robustness/delay/ratio")]
    assert [int(r["time/total_timesteps"]) for r in rows] == [128, 256]
    for row, (_, result) in zip(rows, cb.history, strict=True):
        for name in ("delay", "speed_5x"):
            r = result[name]
            assert float(row[f"robustness/{name}/ratio"]) == pytest.approx(r.ratio)
            low, high = (float(row[f"robustness/{name}/ci_{end}"]) for end in ("low", "high"))
            assert math.isfinite(low) and low <= float(row[f"robustness/{name}/ratio"]) <= high
            assert row[f"robustness/{name}/rating_name"] == r.rating
            assert int(row[f"robustness/{name}/rating"]) == RATING_SCORES[r.rating]
        assert float(row["robustness/nominal_return"]) == pytest.approx(result.nominal.mean_return)
        assert float(row["robustness/deployment_score"]) == pytest.approx(result["delay"].ratio)
        assert float(row["robustness/stress_score"]) == pytest.approx(result["speed_5x"].ratio)
        assert float(row["robustness/measured"]) == 1.0
    assert set(cb.keys()) <= set(rows[0])


def test_audit_freq_counts_timesteps_over_all_envs_and_untrained_models_do_not_stop_training(tmp_path):
    def run(final_audit):
        model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=3, seed=0),
                    **{**TINY, "n_steps": 32, "batch_size": 96})
        model.set_logger(configure(str(tmp_path / str(final_audit)), ["csv"]))
        cb = RobustnessCallback("CartPole-v1", scenarios="delay", audit_freq=100, episodes=2,
                                final_audit=final_audit)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.learn(200, callback=cb)  # 3 rollouts of 3 x 32 steps: to 288
        return model, cb, [w for w in caught if w.category is AgentWarning]

    model, cb, warned = run(final_audit=True)
    assert model.num_timesteps == 288
    # due at the first step past 100 (102) and past 200 (201: in the last rollout, so left
    # to the final audit at 288)
    assert audited_steps(cb) == [102, 288] and not cb.history
    assert all("than random actions" in why for _, why in cb.skipped)
    assert [str(w.message).split(";")[0] for w in warned] == [
        "RobustnessCallback: no audit of this training measured robustness"]
    assert warned[0].filename == __file__  # the learn() call above
    measured = [r["robustness/measured"] for r in _rows(tmp_path / "True") if r.get("robustness/measured")]
    assert measured == ["0.0", "0.0"]
    _, cb, _ = run(final_audit=False)
    assert audited_steps(cb) == [102, 201]


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(audit_freq=0), ValueError, r"audit_freq must be an integer >= 1 \(timesteps between audits\), got 0"),
    (dict(episodes=1), ValueError, r"episodes must be an integer >= 2"),
    (dict(scenarios=["jiter"]), UnknownScenarioError, r"unknown scenario 'jiter'. Did you mean 'jitter'"),
    (dict(scenarios=[]), ValueError, r"scenarios names none to audit"),
    (dict(reference="rand"), ValueError, r"reference must be a number or 'random'"),
    (dict(env="CartPol-v1"), UnknownEnvError, r"Did you mean 'CartPole-v1'"),
    (dict(env=make_vec_env("CartPole-v1")), TypeError, r"env is a VecEnv.*pass the Gymnasium id"),
    (dict(thresholds=0.8), TypeError, r"thresholds must be a pytest_rlaudit.stats.Thresholds"),
    (dict(workers=-1), ValueError, r"workers must be an integer >= 0"),
    (dict(scenarios=["dynamics"], env="FrozenLake-v1"), Exception, r"scenario 'dynamics' cannot run on this env"),
])
def test_bad_arguments_fail_when_the_callback_is_made(kwargs, error, match):
    with pytest.raises(error, match=match):
        RobustnessCallback(**{"env": "CartPole-v1", **kwargs})


@pytest.mark.parametrize("env, scenario, outputs, error, match", [
    ("Acrobot-v1", "delay", ["csv"], PolicyError, r"expects observations Box\(4,\) but the env gives Box\(6,\)"),
    ("CartPole-v1", Schedule(speed=2).as_scenario("x" * 30), ["stdout"], ValueError,
     r"would cut 'robustness/x+/ratio' and 'robustness/x+/ci_low' alike"),
])
def test_what_only_the_model_or_its_logger_tells_fails_before_the_first_step(
        tmp_path, env, scenario, outputs, error, match):
    model = PPO("MlpPolicy", "CartPole-v1", **TINY)
    model.set_logger(configure(str(tmp_path), outputs))
    with pytest.raises(error, match=match):
        model.learn(64, callback=RobustnessCallback(env, scenarios=scenario, audit_freq=32, episodes=2))
    assert model.num_timesteps == 0


def test_verbose_says_why_a_scenario_is_inconclusive(tmp_path, monkeypatch, capsys):
    """`jitter 0.21 INCONCLUSIVE` alone misleads: the line after it says why, in the words
    audit() uses."""
    from pytest_rlaudit import audit as real_audit
    from pytest_rlaudit.auditing import callback as module

    def swing_up(obs):  # barely better than random actions on Pendulum: INCONCLUSIVE
        cos, sin, vel = obs[:, 0], obs[:, 1], obs[:, 2]
        return np.clip(-(6.0 * np.arctan2(sin, cos) + 1.0 * vel), -2, 2)[:, None]

    result = real_audit(swing_up, "Pendulum-v1", ["jitter"], episodes=3, reference="random")
    assert result["jitter"].rating == "INCONCLUSIVE"
    monkeypatch.setattr(module, "audit", lambda *args, **kwargs: result)
    model = PPO("MlpPolicy", "Pendulum-v1", **TINY)
    model.set_logger(configure(str(tmp_path), ["csv"]))
    cb = RobustnessCallback("Pendulum-v1", scenarios="jitter", episodes=3, verbose=1)
    cb.init_callback(model)
    cb.run_audit()
    out = capsys.readouterr().out
    assert "jitter" in out and "INCONCLUSIVE" in out
    assert f"  {result.inconclusive}\n" in out
    assert "the agent does not clearly beat random actions" in result.inconclusive
    assert result.inconclusive in str(result).replace("\n", " ")
