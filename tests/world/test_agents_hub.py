"""``hf://<org>/<repo>`` agents, read offline from a Hugging Face cache the test builds in
the layout ``huggingface_hub`` keeps (``models--org--repo/refs/main`` naming a snapshot)
and with the files ``rl_zoo3.push_to_hub`` uploads."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import constants  # the [hub] extra; [dev] installs it

from pytest_rlaudit import audit
from pytest_rlaudit.errors import PolicyError
from pytest_rlaudit.world.agents import NormalizedPolicy, SB3Policy, as_policy

ZOO = Path(__file__).parents[1] / "data" / "zoo"


def _cache_repo(cache: Path, repo_id: str, files: dict[str, Path]) -> None:
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / "0123456789abcdef"
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123456789abcdef")
    for name, source in files.items():
        shutil.copy(source, snapshot / name)


@pytest.fixture
def offline_cache(tmp_path, monkeypatch) -> Path:
    """An offline Hub whose cache holds sb3/ppo-CartPole-v1 and sb3/a2c-Pendulum-v1."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    cartpole, pendulum = ZOO / "ppo" / "CartPole-v1_1", ZOO / "a2c" / "Pendulum-v1_1"
    _cache_repo(tmp_path, "sb3/ppo-CartPole-v1", {
        "ppo-CartPole-v1.zip": cartpole / "CartPole-v1.zip",
        "config.yml": cartpole / "CartPole-v1" / "config.yml",
        "args.yml": cartpole / "CartPole-v1" / "args.yml",
        "train_eval_metrics.zip": cartpole / "CartPole-v1.zip"})  # logs, not a model
    _cache_repo(tmp_path, "sb3/a2c-Pendulum-v1", {
        "a2c-Pendulum-v1.zip": pendulum / "Pendulum-v1.zip",
        "config.yml": pendulum / "Pendulum-v1" / "config.yml",
        "vec_normalize.pkl": pendulum / "Pendulum-v1" / "vecnormalize.pkl"})
    return tmp_path


def test_a_hub_agent_loads_from_the_cache_offline(offline_cache):
    policy = as_policy("hf://sb3/ppo-CartPole-v1")
    assert isinstance(policy, SB3Policy)
    assert policy.name == "PPO(sb3/ppo-CartPole-v1)"
    result = audit("hf://sb3/ppo-CartPole-v1", "CartPole-v1", scenarios=["delay"], episodes=2)
    assert result.nominal.returns.tolist() == [500.0, 500.0]


def test_a_hub_agent_brings_its_vec_normalize_stats(offline_cache):
    policy = as_policy("hf://sb3/a2c-Pendulum-v1")
    assert isinstance(policy, NormalizedPolicy)
    local = as_policy(ZOO / "a2c" / "Pendulum-v1_1")
    obs = np.array([[0.5, -0.5, 1.0], [1.0, 0.0, -3.0]], dtype=np.float32)
    np.testing.assert_array_equal(policy.vec_normalize.normalize_obs(obs),
                                  local.vec_normalize.normalize_obs(obs))


def test_a_repository_missing_from_the_offline_cache_says_what_to_check(offline_cache):
    with pytest.raises(PolicyError, match=r"cannot get hf://sb3/dqn-Nothing-v0 .*HF_HUB_OFFLINE=1"):
        as_policy("hf://sb3/dqn-Nothing-v0")


@pytest.mark.parametrize("bad", ["hf://ppo-CartPole-v1", "hf://sb3/", "hf://a/b/c"])
def test_a_malformed_hub_address_shows_the_form(bad):
    with pytest.raises(PolicyError, match=r"write hf://<org>/<repo>"):
        as_policy(bad)
