"""Goal-conditioned agents: SB3 models trained with HerReplayBuffer (Dict observations),
loaded from a zoo folder or a zip, weights-only and trusted alike, and audited."""

from __future__ import annotations

import numpy as np
import pytest
from goal_envs import ENV_ID, ReachEnv, register

from pytest_rlaudit import audit
from pytest_rlaudit.errors import PolicyError
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.agents.sb3_load import load_sb3, uses_her


def _observations(n: int = 8) -> dict[str, np.ndarray]:
    env = ReachEnv()
    rows = [env.reset(seed=i)[0] for i in range(n)]
    return {key: np.stack([row[key] for row in rows]) for key in rows[0]}


def _actions(agent, **options) -> np.ndarray:
    policy = as_policy(agent, **options)
    env = ReachEnv()
    policy.bind(env.observation_space, env.action_space)
    return policy.act(_observations(), None)[0]


def test_a_her_zoo_folder_loads_weights_only_and_trusted_with_the_same_actions(her_run):
    folder, model = her_run
    expected = _actions(model)  # the model as trained, through the same batched calls
    for options in ({"env": ENV_ID}, {"env": ENV_ID, "trusted": True}, {},
                    {"trusted": True}):
        got = _actions(folder, **options)
        assert got.tobytes() == expected.tobytes(), options
    assert _actions(folder / f"{ENV_ID}.zip").tobytes() == expected.tobytes()


def test_a_tqc_her_model_loads_both_ways(tmp_path):
    sb3_contrib = pytest.importorskip("sb3_contrib")
    import gymnasium as gym
    from stable_baselines3 import HerReplayBuffer

    register()
    model = sb3_contrib.TQC("MultiInputPolicy", gym.make(ENV_ID), learning_starts=10,
                            replay_buffer_class=HerReplayBuffer, buffer_size=100, seed=1,
                            policy_kwargs={"net_arch": [8], "n_critics": 1, "n_quantiles": 3})
    model.save(tmp_path / "tqc.zip")
    expected = _actions(model)
    for trusted in (False, True):
        got = _actions(tmp_path / "tqc.zip", env=ENV_ID, trusted=trusted)
        assert got.tobytes() == expected.tobytes()


def test_the_load_error_asks_about_algo_only_when_the_file_names_another(her_run):
    folder, _ = her_run
    path = folder / f"{ENV_ID}.zip"
    assert load_sb3(path, "SAC", spaces_of_env=lambda: (ReachEnv().observation_space,
                                                        ReachEnv().action_space)) is not None
    with pytest.raises(PolicyError, match="saved by SAC, not TD3: is algo right"):
        load_sb3(path, "TD3", trusted=True)


def test_her_is_read_from_the_file_without_running_it(her_run):
    import json
    import zipfile

    folder, _ = her_run
    with zipfile.ZipFile(folder / f"{ENV_ID}.zip") as archive:
        assert uses_her(json.loads(archive.read("data")))


def test_a_her_agent_is_audited_on_every_default_scenario_deterministically(her_run):
    folder, _ = her_run
    chosen = ("jitter", "delay", "spike", "obs_noise", "speed_5x", "dropped_obs",
              "action_noise")
    first = audit(folder, ENV_ID, scenarios=chosen, episodes=6, seed=3)
    again = audit(folder, ENV_ID, scenarios=chosen, episodes=6, seed=3)
    assert first.nominal.returns.mean() > 0
    for name in chosen:
        assert np.isfinite(first[name].ratio)
        assert first[name].returns.tobytes() == again[name].returns.tobytes()
    assert len(first["obs_noise"].to_dict()["params"]["spread"]) == 2 + 4


def test_vecnormalize_statistics_of_a_dict_env_are_applied_key_by_key(tmp_path):
    import gymnasium as gym
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    register()
    venv = VecNormalize(DummyVecEnv([lambda: gym.make(ENV_ID)]), norm_reward=False)
    venv.reset()
    for _ in range(30):  # statistics of some steps: what an audit must apply
        venv.step(np.array([venv.action_space.sample()]))
    venv.training = False
    model = SAC("MultiInputPolicy", venv, replay_buffer_class=HerReplayBuffer,
                buffer_size=100, policy_kwargs={"net_arch": [8]}, seed=0)
    model.save(tmp_path / "agent.zip")
    venv.save(tmp_path / "vecnormalize.pkl")
    obs = _observations()
    expected = as_policy(model, vec_normalize=None)
    expected.bind(ReachEnv().observation_space, ReachEnv().action_space)
    want = expected.act(venv.normalize_obs(obs), None)[0]
    for trusted in (False, True):
        assert _actions(tmp_path / "agent.zip", env=ENV_ID, trusted=trusted).tobytes() == (
            want.tobytes())


def test_a_frame_stack_refuses_dict_observations_naming_them(her_run):
    with pytest.raises(PolicyError, match="frame_stack needs array observations.*Dict"):
        audit(as_policy(her_run[1], frame_stack=2), ENV_ID, scenarios=["delay"], episodes=2)
