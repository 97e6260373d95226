"""Agents as their owners saved them: rl-baselines3-zoo folders, models and VecNormalize
files pickled under old ``gym``, algorithm detection and labels, frame stacks, env needs.

The two zoo folders in tests/data/zoo are real published agents (see its README); their
nominal returns are checked against plain SB3 loops that share no code with the runner.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
import types
import warnings
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

from pytest_rlaudit import audit
from pytest_rlaudit.errors import AgentWarning, MisloadedAgentError, PolicyError
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world import scenarios
from pytest_rlaudit.world.agents import (
    FrameStackPolicy,
    NormalizedPolicy,
    SB3Policy,
    as_policy,
    env_for,
)
from pytest_rlaudit.world.agents.pickles import gym_as_gymnasium
from pytest_rlaudit.world.agents.preprocess import load_vec_normalize
from pytest_rlaudit.world.agents.sb3_load import load_sb3
from pytest_rlaudit.world.agents.zoo import read_saved_run

ZOO = Path(__file__).parents[1] / "data" / "zoo"
CARTPOLE_RUN = ZOO / "ppo" / "CartPole-v1_1"
PENDULUM_RUN = ZOO / "a2c" / "Pendulum-v1_1"
PENDULUM_STATS = PENDULUM_RUN / "Pendulum-v1" / "vecnormalize.pkl"
NOMINAL = scenarios.resolve(["nominal"])


def _nominal(policy, env: str, episodes: int = 3) -> np.ndarray:
    return run_episodes(policy, env_for(policy, env), NOMINAL, episodes, seed=0)["nominal"].returns


def _plain_loop(model, env_id: str, episodes: int, vec_normalize=None) -> np.ndarray:
    """Episode i reset with seed i, deterministic actions, as the zoo's enjoy runs them."""
    out = []
    for i in range(episodes):
        env = gym.make(env_id)
        obs, _ = env.reset(seed=i)
        total, done = 0.0, False
        while not done:
            x = obs[None] if vec_normalize is None else vec_normalize.normalize_obs(obs[None])
            action, _ = model.predict(x, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action[0])
            total += float(reward)
            done = terminated or truncated
        out.append(total)
    return np.array(out)


# ------------------------------------------------------------------ zoo folders


def test_a_zoo_folder_saved_under_old_gym_loads_with_its_algorithm_and_label():
    policy = as_policy(CARTPOLE_RUN)
    assert isinstance(policy, SB3Policy)
    assert type(policy.model).__name__ == "PPO"
    assert policy.name == "PPO(CartPole-v1_1)"
    assert "gym" not in sys.modules  # the alias does not outlive the load
    assert type(policy.model.observation_space).__module__.startswith("gymnasium.")


def test_a_zoo_agent_plays_as_a_plain_sb3_loop_does():
    policy = as_policy(CARTPOLE_RUN)
    returns = _nominal(policy, "CartPole-v1")
    np.testing.assert_array_equal(returns, _plain_loop(policy.model, "CartPole-v1", 3))
    assert returns.tolist() == [500.0, 500.0, 500.0]


def test_the_zip_inside_a_zoo_folder_reads_the_folder_too():
    policy = as_policy(PENDULUM_RUN / "Pendulum-v1.zip")
    assert isinstance(policy, NormalizedPolicy)
    assert policy.name == "A2C(Pendulum-v1_1)"


def test_vecnormalize_stats_are_found_and_applied_as_in_training():
    policy = as_policy(PENDULUM_RUN)
    assert isinstance(policy, NormalizedPolicy)
    assert policy.vec_normalize.training is False and policy.vec_normalize.norm_reward is False
    returns = _nominal(policy, "Pendulum-v1", episodes=4)
    plain = _plain_loop(policy.model, "Pendulum-v1", 4, load_vec_normalize(PENDULUM_STATS))
    np.testing.assert_allclose(returns, plain, rtol=1e-6)
    assert -400 < returns.mean() < -50  # the zoo's agent swings up (random: about -1200)


def test_without_its_stats_the_agent_is_caught_doing_no_better_than_random():
    bare = as_policy(PENDULUM_RUN, vec_normalize=None)
    assert isinstance(bare, SB3Policy)
    with pytest.raises(MisloadedAgentError) as caught:
        audit(bare, "Pendulum-v1", scenarios=["delay"], episodes=4, reference="random")
    message = str(caught.value)
    assert "random actions" in message and "the same 4 episode seeds" in message
    assert "VecNormalize statistics" in message and "--rl-vec-normalize" in message
    assert "Set reference='random'" not in message  # the user already did


def test_an_audit_of_a_zoo_folder_rates_every_scenario():
    result = audit(PENDULUM_RUN, "Pendulum-v1", scenarios=["obs_noise"], episodes=3,
                   reference="random")
    assert result.agent == "A2C(Pendulum-v1_1)"
    assert result.reference < result.nominal.mean_return
    assert result["obs_noise"].rating in ("PASS", "MILD", "DEGRADED", "FAIL")


def _copy_run(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.parent.name / src.name
    shutil.copytree(src, dst)
    return dst


def test_a_config_that_asks_for_stats_it_lacks_is_an_error_naming_the_folder(tmp_path):
    run = _copy_run(PENDULUM_RUN, tmp_path)
    (run / "Pendulum-v1" / "vecnormalize.pkl").unlink()
    with pytest.raises(PolicyError, match=r"trained with VecNormalize .*no vecnormalize\.pkl"):
        as_policy(run)


def test_a_bare_zip_takes_the_stats_beside_it(tmp_path):
    shutil.copy(PENDULUM_RUN / "Pendulum-v1.zip", tmp_path / "agent.zip")
    shutil.copy(PENDULUM_STATS, tmp_path / "vecnormalize.pkl")
    policy = as_policy(tmp_path / "agent.zip")
    assert isinstance(policy, NormalizedPolicy)
    assert policy.name == "A2C(agent.zip)"  # the algorithm read from the file


def test_vec_normalize_errors_name_the_file_and_the_cause(tmp_path):
    config = PENDULUM_RUN / "Pendulum-v1" / "config.yml"
    with pytest.raises(PolicyError, match=r"config\.yml' is a YAML file, not a pickled file"):
        as_policy(CARTPOLE_RUN, vec_normalize=config)
    with pytest.raises(PolicyError, match=r"does not exist"):
        as_policy(CARTPOLE_RUN, vec_normalize=tmp_path / "nope.pkl")
    # neither a path nor statistics (a TypeError from pathlib before)
    with pytest.raises(PolicyError, match=r"^vec_normalize=5 is not VecNormalize statistics: pass "
                                          r"the path of a vecnormalize\.pkl .*or None for none$"):
        as_policy(CARTPOLE_RUN, vec_normalize=5)
    missing = tmp_path / "needs_module.pkl"
    missing.write_bytes(b"\x80\x04cno_such_module_xyz\nThing\n.")
    # By default a class outside VecNormalize statistics is refused before any import...
    with pytest.raises(PolicyError, match=r"pickles no_such_module_xyz\.Thing, which is not part "
                                          r"of VecNormalize statistics.*--rl-trusted"):
        as_policy(CARTPOLE_RUN, vec_normalize=missing)
    # ... and read in full when trusted, which needs the module.
    with pytest.raises(PolicyError, match=r"pickled with module 'no_such_module_xyz'.*install"):
        as_policy(CARTPOLE_RUN, vec_normalize=missing, trusted=True)


def test_a_folder_given_as_vec_normalize_finds_the_stats_inside():
    policy = as_policy(PENDULUM_RUN, vec_normalize=PENDULUM_RUN)
    assert isinstance(policy, NormalizedPolicy)


def test_the_gym_alias_sets_an_installed_gym_aside_and_puts_it_back(monkeypatch):
    fake = types.ModuleType("gym")
    monkeypatch.setitem(sys.modules, "gym", fake)
    with gym_as_gymnasium():
        import gym as inside

        assert inside is gym
    assert sys.modules["gym"] is fake


def _with_unreadable_spaces(src: Path, dst: Path) -> Path:
    """A copy of ``src`` whose pickled observation space needs a module nobody has."""
    with zipfile.ZipFile(src) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(files["data"])
    data["observation_space"][":serialized:"] = base64.b64encode(
        b"\x80\x04cno_such_env_package\nSpace\n.").decode()
    files["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(dst, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return dst


def test_spaces_that_do_not_unpickle_come_from_the_audited_env(tmp_path):
    path = _with_unreadable_spaces(CARTPOLE_RUN / "CartPole-v1.zip", tmp_path / "agent.zip")
    with pytest.raises(PolicyError, match=r"no_such_env_package.*Give the env it is audited on"):
        as_policy(path, trusted=True)
    # By default the pickle is never read: the readable fields beside it describe the space.
    assert as_policy(path).name == "PPO(agent.zip)"
    result = audit(path, "CartPole-v1", scenarios=["delay"], episodes=2)
    assert result.nominal.returns.tolist() == [500.0, 500.0]
    trusted = audit(as_policy(path, env="CartPole-v1", trusted=True), "CartPole-v1",
                    scenarios=["delay"], episodes=2)
    assert trusted.nominal.returns.tolist() == [500.0, 500.0]


def test_the_wrong_env_for_substituted_spaces_says_so(tmp_path):
    path = _with_unreadable_spaces(CARTPOLE_RUN / "CartPole-v1.zip", tmp_path / "agent.zip")
    with pytest.raises(PolicyError, match=r"spaces stood in .* is this the env it was trained on"):
        as_policy(path, env="Acrobot-v1", trusted=True)
    with pytest.raises(PolicyError, match=r"saved for observations Box.*\(4,\).* but the env's "
                                          r"are Box.*\(6,\).* is this the env it was trained on"):
        as_policy(path, env="Acrobot-v1")


def test_an_env_other_than_the_trained_one_is_a_warning_not_an_error(tmp_path):
    run = _copy_run(CARTPOLE_RUN, tmp_path)
    args = run / "CartPole-v1" / "args.yml"
    args.write_text(args.read_text().replace("- CartPole-v1", "- CartPole-v0"))
    with pytest.warns(AgentWarning, match=r"trained on CartPole-v0 and is audited on CartPole-v1 "
                                          r"\(another version") as caught:
        result = audit(run, "CartPole-v1", scenarios=["delay"], episodes=2)
    assert result.nominal.returns.tolist() == [500.0, 500.0]
    # once, not from each place the agent's needs are applied (its spaces, its audit)
    assert sum("is audited on" in str(w.message) for w in caught) == 1


# -------------------------------------------------- saved hyperparameters


def _zoo_run(tmp_path: Path, config: str, args: str, model) -> Path:
    run = tmp_path / "ppo" / "Pendulum-v1_1"
    (run / "Pendulum-v1").mkdir(parents=True)
    model.save(run / "Pendulum-v1.zip")
    (run / "Pendulum-v1" / "config.yml").write_text(config)
    (run / "Pendulum-v1" / "args.yml").write_text(args)
    return run


def test_frame_stack_env_wrapper_and_env_kwargs_are_applied_as_the_zoo_does(tmp_path):
    from stable_baselines3 import PPO

    wrapper = "gymnasium.wrappers.TimeAwareObservation"
    train = DummyVecEnv([lambda: gym.wrappers.TimeAwareObservation(gym.make("Pendulum-v1", g=5.0))])
    model = PPO("MlpPolicy", VecFrameStack(train, 3), policy_kwargs={"net_arch": [8]},
                seed=0, device="cpu")
    config = ("!!python/object/apply:collections.OrderedDict\n"
              f"- - [env_wrapper, {wrapper}]\n  - [frame_stack, 3]\n  - [policy, MlpPolicy]\n")
    args = ("!!python/object/apply:collections.OrderedDict\n"
            "- - [algo, ppo]\n  - [env, Pendulum-v1]\n  - - env_kwargs\n    - {g: 5.0}\n")
    run = _zoo_run(tmp_path, config, args, model)
    policy = as_policy(run)
    assert isinstance(policy, FrameStackPolicy) and policy.n_stack == 3
    spec = env_for(policy, "Pendulum-v1")
    env = spec.make()
    assert env.observation_space.shape == (4,)  # the wrapper's time feature
    assert env.unwrapped.g == 5.0
    assert env_for(policy, spec) is spec  # applied once, not twice
    returns = run_episodes(policy, spec, NOMINAL, 2, seed=0)["nominal"].returns
    # The stack as SB3's VecFrameStack makes it: the same actions as in training.
    eval_env = VecFrameStack(DummyVecEnv([lambda: gym.wrappers.TimeAwareObservation(
        gym.make("Pendulum-v1", g=5.0))]), 3)
    plain = []
    for i in range(2):
        eval_env.seed(i)
        obs, total, done = eval_env.reset(), 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, dones, _ = eval_env.step(action)
            total, done = total + float(reward[0]), bool(dones[0])
        plain.append(total)
    np.testing.assert_allclose(returns, plain, rtol=1e-5)


def test_a_wrapper_that_cannot_be_imported_is_named_with_the_fix(tmp_path):
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", "Pendulum-v1", policy_kwargs={"net_arch": [8]}, device="cpu")
    config = ("!!python/object/apply:collections.OrderedDict\n"
              "- - [env_wrapper, utils.wrappers.TimeFeatureWrapper]\n")
    run = _zoo_run(tmp_path, config, "{}\n", model)
    with pytest.raises(PolicyError, match=r"env wrapper 'utils\.wrappers\.TimeFeatureWrapper'.*"
                                          r"pip install torch==2\.13\.0 --index-url \S+/cpu && pip install rl_zoo3 "):
        as_policy(run)


def test_a_zoo_yaml_file_runs_no_code(tmp_path):
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", "Pendulum-v1", policy_kwargs={"net_arch": [8]}, device="cpu")
    config = "!!python/object/apply:os.system [echo pwned]\n"
    run = _zoo_run(tmp_path, config, "{}\n", model)
    with pytest.raises(PolicyError, match=r"cannot read .*config\.yml"):
        read_saved_run(run)


# ------------------------------------------------------- detection and labels


_ALGOS = {  # name: (env, policy, extra constructor arguments)
    "PPO": ("CartPole-v1", "MlpPolicy", {}), "A2C": ("CartPole-v1", "MlpPolicy", {}),
    "DQN": ("CartPole-v1", "MlpPolicy", {"buffer_size": 100}),
    "SAC": ("Pendulum-v1", "MlpPolicy", {"buffer_size": 100}),
    "TD3": ("Pendulum-v1", "MlpPolicy", {"buffer_size": 100}),
    "DDPG": ("Pendulum-v1", "MlpPolicy", {"buffer_size": 100}),
    "QRDQN": ("CartPole-v1", "MlpPolicy", {"buffer_size": 100}),
    "TQC": ("Pendulum-v1", "MlpPolicy", {"buffer_size": 100}),
    "TRPO": ("CartPole-v1", "MlpPolicy", {}), "ARS": ("CartPole-v1", "LinearPolicy", {}),
    "CrossQ": ("Pendulum-v1", "MlpPolicy", {"buffer_size": 100}),
    "RecurrentPPO": ("CartPole-v1", "MlpLstmPolicy", {}),
    "MaskablePPO": ("CartPole-v1", "MlpPolicy", {}),
}


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory) -> dict[str, Path]:
    import sb3_contrib
    import stable_baselines3

    folder = tmp_path_factory.mktemp("algos")
    paths = {}
    for name, (env, policy, extra) in _ALGOS.items():
        cls = getattr(stable_baselines3, name, None) or getattr(sb3_contrib, name)
        kwargs = {} if name == "ARS" else {"policy_kwargs": {"net_arch": [8]}}
        if name == "RecurrentPPO":
            kwargs["policy_kwargs"]["lstm_hidden_size"] = 8
        model = cls(policy, env, device="cpu", seed=0, **kwargs, **extra)
        paths[name] = folder / f"{name.lower()}_model.zip"
        model.save(paths[name])
    return paths


@pytest.mark.parametrize("algo", list(_ALGOS))
def test_every_sb3_and_contrib_algorithm_is_detected_and_labelled(saved_models, algo):
    policy = as_policy(saved_models[algo])
    assert type(policy.model).__name__ == algo
    assert policy.name == f"{algo}({algo.lower()}_model.zip)"


@pytest.mark.parametrize("algo", list(_ALGOS))
def test_every_algorithm_loads_alike_weights_only_and_trusted(saved_models, algo):
    """The default load unpickles nothing (untrusted.py), yet builds the very network SB3's
    own load does: the same weights, the same actions."""
    env = _ALGOS[algo][0]
    default = as_policy(saved_models[algo], env=env).model
    trusted = as_policy(saved_models[algo], env=env, trusted=True).model
    assert type(default.policy) is type(trusted.policy)
    ours, theirs = default.policy.state_dict(), trusted.policy.state_dict()
    assert list(ours) == list(theirs)
    assert all(np.array_equal(ours[k].numpy(), theirs[k].numpy()) for k in theirs)
    if algo != "RecurrentPPO":
        space = trusted.observation_space
        obs = np.linspace(-1, 1, 4 * space.shape[0], dtype=np.float32).reshape(4, -1)
        assert np.array_equal(default.policy.predict(obs, deterministic=True)[0],
                              trusted.policy.predict(obs, deterministic=True)[0])


def test_off_policy_models_load_without_their_training_buffer(saved_models):
    model = load_sb3(saved_models["SAC"])
    assert model.replay_buffer.buffer_size == 1  # not the 1e6-transition training buffer


def test_a_zoo_folder_name_gives_the_algorithm_the_zip_would_not(saved_models, tmp_path):
    run = tmp_path / "ppo_lstm" / "CartPole-v1_1"
    (run / "CartPole-v1").mkdir(parents=True)
    shutil.copy(saved_models["RecurrentPPO"], run / "CartPole-v1.zip")
    (run / "CartPole-v1" / "config.yml").write_text("{policy: MlpLstmPolicy}\n")
    assert as_policy(run).name == "RecurrentPPO(CartPole-v1_1)"


def test_name_labels_an_agent_without_renaming_the_object(saved_models):
    from stable_baselines3 import PPO

    model = PPO.load(saved_models["PPO"], device="cpu")
    assert as_policy(model).name == "PPO"
    assert as_policy(model, name="candidate").name == "candidate"
    assert as_policy(saved_models["PPO"], name="mine").name == "mine"
    random = as_policy("random")
    assert as_policy(random, name="coin").name == "coin" and random.name == "random"


def test_sampled_actions_are_reproducible_and_differ_from_the_deterministic_ones(saved_models):
    sampled = as_policy(saved_models["PPO"], deterministic=False)
    first = _nominal(sampled, "CartPole-v1", episodes=3)
    again = _nominal(as_policy(saved_models["PPO"], deterministic=False), "CartPole-v1", 3)
    np.testing.assert_array_equal(first, again)
    assert sampled.stateful and not as_policy(saved_models["PPO"]).stateful


# ------------------------------------------------------------- frame stacks


def test_frame_stacks_start_from_zeros_newest_last_per_episode():
    seen = []

    def record(obs):
        seen.append(obs.copy())
        return np.zeros(len(obs), dtype=np.int64)

    policy = FrameStackPolicy(as_policy(record), 3)
    policy.bind(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2))
    states = [policy.initial_state(np.random.SeedSequence(i)) for i in range(2)]
    _, states = policy.act(np.array([[1.0, 2.0], [5.0, 6.0]]), states)
    _, states = policy.act(np.array([[3.0, 4.0]]), states[:1])
    assert seen[0].tolist() == [[0, 0, 0, 0, 1, 2], [0, 0, 0, 0, 5, 6]]
    assert seen[1].tolist() == [[0, 0, 1, 2, 3, 4]]  # episode 0 alone: its own stack


def test_frame_stack_must_be_a_positive_count():
    with pytest.raises(PolicyError, match="frame_stack must be an integer >= 1"):
        as_policy(lambda obs: obs[:, 0], frame_stack=-1)


def test_frame_stacks_run_batch_invariant_in_an_audit():
    policy = as_policy(lambda obs: (obs[:, -2] + obs[:, -1] > 0).astype(np.int64), frame_stack=2)
    spec = env_for(policy, "CartPole-v1")
    runs = [run_episodes(policy, spec, NOMINAL, 5, seed=0, batch_size=b)["nominal"].returns
            for b in (1, 3, 64)]
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])


def test_warnings_are_quiet_for_a_matching_env():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env_for(as_policy(CARTPOLE_RUN), "CartPole-v1")


def test_a_model_trained_with_vecnormalize_is_not_audited_without_its_stats(tmp_path):
    shutil.copy(PENDULUM_RUN / "Pendulum-v1.zip", tmp_path / "agent.zip")  # no stats beside
    with pytest.raises(PolicyError, match=r"agent\.zip' was trained inside a VecNormalize .*"
                                          r"--rl-vec-normalize PATH"):
        as_policy(tmp_path / "agent.zip")
    assert isinstance(as_policy(tmp_path / "agent.zip", vec_normalize=None), SB3Policy)
    assert isinstance(as_policy(tmp_path / "agent.zip", vec_normalize=PENDULUM_STATS),
                      NormalizedPolicy)
    model = as_policy(tmp_path / "agent.zip", vec_normalize=None).model
    with pytest.raises(PolicyError, match=r"the A2C model was trained inside a VecNormalize"):
        as_policy(model)


def test_models_trained_without_vecnormalize_need_no_stats():
    assert isinstance(as_policy(CARTPOLE_RUN / "CartPole-v1.zip"), SB3Policy)


def test_a_zip_loaded_for_an_audit_has_no_optimizer_to_train_or_save_with(tmp_path):
    zip_path = Path(__file__).parents[2] / "examples" / "ppo_cartpole.zip"
    model = load_sb3(zip_path)  # weights only: the default
    for use in (model.policy.optimizer.step, lambda: model.save(tmp_path / "again.zip")):
        with pytest.raises(PolicyError, match=r"without its optimizer.*with PPO\.load\(path\)"):
            use()
    a2c = load_sb3(Path(__file__).parents[1] / "data" / "zoo" / "a2c" / "Pendulum-v1_1" /
                   "Pendulum-v1.zip")  # the zoo's, whose config names RMSpropTFLike
    with pytest.raises(PolicyError, match=r"with A2C\.load\(path\)"):
        a2c.policy.optimizer.zero_grad()
    trusted = load_sb3(zip_path, trusted=True)  # SB3's own load
    assert type(trusted.policy.optimizer).__name__ == "Adam"


def test_a_missing_agent_path_names_its_folder_and_close_names(tmp_path, monkeypatch):
    from pytest_rlaudit.errors import AgentNotFoundError, CouldNotAuditError

    (tmp_path / "ppo_cartpole.zip").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AgentNotFoundError) as info:
        as_policy("ppo_cartpol.zip", env="CartPole-v1")
    assert isinstance(info.value, (CouldNotAuditError, PolicyError))  # except PolicyError holds
    assert str(info.value) == (
        f"agent path 'ppo_cartpol.zip' does not exist (a relative path, resolved against "
        f"{tmp_path}); did you mean 'ppo_cartpole.zip' (in {tmp_path})?")


def test_an_agent_for_other_spaces_could_not_be_audited(tmp_path):
    from pytest_rlaudit.errors import SpacesMismatchError

    with pytest.warns(AgentWarning, match="trained on CartPole-v1"), pytest.raises(
            SpacesMismatchError, match="is this the env it was trained on"):
        as_policy(CARTPOLE_RUN / "CartPole-v1.zip", env="Acrobot-v1")
