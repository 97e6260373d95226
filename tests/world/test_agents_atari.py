"""Atari agents as the rl-baselines3-zoo evaluates them: a zoo folder with SB3's
AtariWrapper and a frame stack of 4, sampled by default, one episode per game scored
unclipped, and sticky actions per emulator frame (ALE's repeat_action_probability).

The agent is a tiny CnnPolicy PPO trained for a few steps: it tests the plumbing, not the
play, so the check that an agent beats random actions is off where it is audited."""

from __future__ import annotations

import shutil
import sys
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

import pytest_rlaudit.auditing.measure
import pytest_rlaudit.reports.summary  # (before pytester drops what a run imports)
import pytest_rlaudit.verdicts.assertions
from pytest_rlaudit import audit
from pytest_rlaudit.errors import PerturbationError, UnknownEnvError
from pytest_rlaudit.perturbations import StickyAction
from pytest_rlaudit.rollout.runner import run_episodes
from pytest_rlaudit.world.agents import EnvNeeds, as_policy, env_for
from pytest_rlaudit.world.agents.zoo import read_saved_run
from pytest_rlaudit.world.atari import looks_atari, register_ale
from pytest_rlaudit.world.envs import env_spec
from pytest_rlaudit.world.scenarios import NOMINAL, get

ENV = "BreakoutNoFrameskip-v4"
WRAPPER = "stable_baselines3.common.atari_wrappers.AtariWrapper"


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """The module's torch work on one thread. On two, the CNN's convolutions in training
    cost 4x the CPU here, and each load of the zoo agent (SB3 builds the CNN and
    orthogonally initialises it before reading the weights: QR factorisations) 2.5x:
    0.8 s against 0.33, six loads a run. Policy calls are on one thread anyway."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def zoo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A zoo folder (logs/ppo/<Env>_1) of a CnnPolicy PPO trained as the zoo trains
    Atari agents: AtariWrapper, then VecFrameStack(4)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.atari_wrappers import AtariWrapper
    from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

    register_ale(ENV)
    venv = VecFrameStack(DummyVecEnv([lambda: AtariWrapper(gym.make(ENV))]), 4)
    # One update of 8 steps: trained, its optimizer state saved with it, as a zoo agent's
    # is.
    model = PPO("CnnPolicy", venv, n_steps=8, batch_size=8, n_epochs=1, seed=0,
                device="cpu", policy_kwargs={"features_extractor_kwargs": {"features_dim": 32}})
    model.learn(8)
    run = tmp_path_factory.mktemp("logs") / "ppo" / f"{ENV}_1"
    (run / ENV).mkdir(parents=True)
    model.save(run / f"{ENV}.zip")
    # As the zoo writes them (yaml.dump of an OrderedDict).
    (run / ENV / "config.yml").write_text(yaml.dump(OrderedDict(
        [("env_wrapper", [WRAPPER]), ("frame_stack", 4), ("policy", "CnnPolicy")])))
    (run / ENV / "args.yml").write_text(yaml.dump(OrderedDict(
        [("algo", "ppo"), ("env", ENV), ("env_kwargs", None)])))
    return run


@pytest.fixture
def plumbing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny agent plays no better than random actions: let it be audited anyway."""
    monkeypatch.setattr(pytest_rlaudit.auditing.measure, "check_beats_random",
                        lambda *args, **kwargs: None)


def test_atari_ids_are_known_by_their_form():
    assert looks_atari(ENV) and looks_atari("ALE/Breakout-v5") and looks_atari("Pong-ramNoFrameskip-v4")
    assert not looks_atari("CartPole-v1") and not looks_atari("LunarLander-v3")
    assert env_spec(ENV).name == ENV
    assert env_spec("Pong-v4").name == "Pong-v4"  # old gym's form, registered by ale-py too


def test_without_ale_py_an_atari_id_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "ale_py", None)  # as if not installed
    with pytest.raises(UnknownEnvError, match=r"ale-py.*pip install 'pytest-rlaudit\[atari\]'"):
        env_spec("NoSuchGameNoFrameskip-v4")


def test_a_zoo_atari_folder_reads_its_wrapper_and_frame_stack(zoo_run: Path):
    run = read_saved_run(zoo_run)
    assert (run.algo, run.frame_stack, run.atari) == ("PPO", 4, True)
    assert run.needs.wrappers == ((WRAPPER, {}),) and run.needs.trained_on == ENV


@pytest.fixture(scope="module")
def sampled(zoo_run: Path):
    """The zoo folder's agent as as_policy gives it by default (the tests only read it)."""
    return as_policy(zoo_run, env=ENV)


@pytest.fixture(scope="module")
def chosen(zoo_run: Path):
    """The zoo folder's agent with deterministic=True (a weights-only load, the default)."""
    return as_policy(zoo_run, env=ENV, deterministic=True)


def test_it_is_sampled_by_default_as_the_zoo_evaluates_atari(sampled, chosen):
    assert sampled.name == f"PPO({ENV}_1, stochastic)"
    assert sampled.policy.deterministic is False  # behind its frame stack
    assert chosen.name == f"PPO({ENV}_1)" and chosen.policy.deterministic is True
    # Everything else keeps the deterministic default.
    assert as_policy(Path(__file__).parents[1] / "data" / "zoo" / "ppo" / "CartPole-v1_1",
                     env="CartPole-v1").deterministic is True


def test_weights_only_and_trusted_loads_take_the_same_actions(zoo_run: Path, chosen):
    frames = np.random.default_rng(0).integers(0, 256, (3, 84, 84, 4), dtype=np.uint8)
    actions = []
    for trusted in (False, True):
        policy = (as_policy(zoo_run, env=ENV, deterministic=True, trusted=True) if trusted
                  else chosen)  # trusted=False: the default's load
        policy.bind(gym.spaces.Box(0, 255, (84, 84, 1), np.uint8), gym.spaces.Discrete(4))
        states = [policy.initial_state(np.random.SeedSequence(i)) for i in range(3)]
        rows = [policy.act(frames[:, :, :, k:k + 1], states) for k in range(4)]
        actions.append(np.concatenate([r[0] for r in rows]))
    assert np.array_equal(*actions)


def _zoo_scores(seed: int, actions: np.ndarray) -> tuple[float, int, int]:
    """The zoo's evaluation of a fixed action sequence: Monitor under AtariWrapper, the
    env reset at every done (a lost life) as its vectorised env does, the score read
    from the Monitor at game over; (score, agent steps, lives lost)."""
    from stable_baselines3.common.atari_wrappers import AtariWrapper
    from stable_baselines3.common.monitor import Monitor

    env = AtariWrapper(Monitor(gym.make(ENV)))
    env.reset(seed=seed)
    for step, action in enumerate(actions, 1):
        _, _, terminated, truncated, info = env.step(int(action))
        if "episode" in info:  # the Monitor's: the game is over
            return float(info["episode"]["r"]), step, 5 - env.unwrapped.ale.lives()
        if terminated or truncated:
            env.reset()
    raise AssertionError("the game did not end")


def test_an_episode_is_one_whole_game_scored_unclipped_as_the_zoo_scores_it(sampled):
    env = env_for(sampled, ENV).make()
    actions = np.random.default_rng(3).integers(0, 4, 2000)
    env.reset(seed=7)
    total, steps, lives = 0.0, 0, {env.unwrapped.ale.lives()}
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(int(action))
        total, steps = total + float(reward), steps + 1
        lives.add(env.unwrapped.ale.lives())
        if terminated or truncated:
            break
    assert terminated and not truncated and env.unwrapped.ale.game_over()
    assert lives == {5, 4, 3, 2, 1, 0}  # every life lost within the one episode
    assert (total, steps, 5) == _zoo_scores(7, actions)
    env.close()


@pytest.fixture(scope="module")
def short_games(zoo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zoo folder again, its args.yml giving ALE's ``max_num_frames_per_episode`` (the
    zoo's env_kwargs): games cut at 240 frames (60 agent steps), so audits are quick."""
    run = tmp_path_factory.mktemp("short") / "ppo" / f"{ENV}_1"
    shutil.copytree(zoo_run, run)
    (run / ENV / "args.yml").write_text(yaml.dump(OrderedDict(
        [("algo", "ppo"), ("env", ENV), ("env_kwargs", {"max_num_frames_per_episode": 240})])))
    return run


def test_it_audits_through_the_api_with_paired_reproducible_sampled_actions(
        short_games: Path, plumbing: None):
    result = audit(str(short_games), ENV, scenarios=("sticky_actions",), episodes=2,
                   progress=False)
    assert result.nominal.returns.shape == (2,)
    assert result["sticky_actions"].lengths.max() <= 60  # the folder's env_kwargs applied
    assert result.to_dict()["agent"] == f"PPO({ENV}_1, stochastic)"
    # The sampled actions come from the seed: episode 0 again, the same game.
    policy = as_policy(short_games, env=ENV)
    again = run_episodes(policy, env_for(policy, ENV), [NOMINAL], 1, seed=0)["nominal"]
    assert (again.returns[0], again.lengths[0]) == (result.nominal.returns[0],
                                                     result.nominal.lengths[0])


def test_it_audits_from_the_command_line(short_games: Path, plumbing: None,
                                         pytester: pytest.Pytester):
    result = pytester.runpytest("--rl-audit", f"--rl-agent={short_games}", "--rl-env", ENV,
                                "--rl-episodes", "2", "--rl-scenarios", "sticky_actions",
                                "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([f"*PPO({ENV}_1, stochastic)*"])
    assert result.ret in (0, 1) and "sticky_actions" in result.stdout.str()
    assert "Error" not in result.stdout.str().replace("RobustnessError", "")


class _Spy(gym.ActionWrapper):
    """Records the action the ALE env executes at each frame."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.executed: list[int] = []

    def action(self, action):
        self.executed.append(int(action))
        return action


def test_sticky_actions_stick_per_emulator_frame_as_ale_does():
    from stable_baselines3.common.atari_wrappers import AtariWrapper

    register_ale(ENV)
    spy = _Spy(gym.make(ENV).unwrapped)
    env = StickyAction(AtariWrapper(spy, noop_max=0), p=0.25)
    assert type(env.frames.env).__name__ == "AtariEnv"  # spliced right around the emulator
    env.reset(seed=0)
    spy.executed.clear()
    frames = env.frames
    frames.stuck = 0
    chosen = [1, 2, 3, 2] * 50
    for action in chosen:
        env.step(action)
    # One draw per frame: 4 frames per agent step (MaxAndSkipEnv), 25% of them stuck.
    assert len(spy.executed) == 4 * len(chosen)
    assert 0.2 < frames.stuck / len(spy.executed) < 0.3
    # Each frame executes the agent's action or keeps the previous frame's, never another.
    given = np.repeat(chosen, 4)
    previous = np.concatenate([[spy.executed[0]], spy.executed[:-1]])
    executed = np.array(spy.executed)
    assert np.all((executed == given) | (executed == previous))
    # Seeded by the perturbation: the same seed, the same frames.
    runs = []
    for _ in range(2):
        env.reset(seed=1)
        for action in chosen[:20]:
            env.step(action)
        runs.append(list(spy.executed[-80:]))
    assert runs[0] == runs[1]
    env.close()


def test_sticky_actions_refuse_an_atari_env_that_skips_frames_in_the_emulator():
    register_ale("ALE/Breakout-v5")
    with pytest.raises(PerturbationError, match="repeat_action_probability"):
        get("sticky_actions").wrap(gym.make("ALE/Breakout-v5"))


def test_a_sampled_dqn_explores_at_its_saved_rate_as_its_predict_does():
    """The zoo's Atari DQN and QRDQN agents are sampled through DQN.predict, which takes a
    random action at the exploration rate they were saved with (the Q-network's argmax
    otherwise)."""
    from stable_baselines3 import DQN

    model = DQN("MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [8]}, seed=0)
    model.exploration_rate = 0.3
    obs = np.zeros((1, 4), np.float32)
    greedy = int(model.policy.predict(obs, deterministic=True)[0][0])
    policy = as_policy(model, deterministic=False)
    policy.bind(model.observation_space, model.action_space)
    state = [policy.initial_state(np.random.SeedSequence(0))]
    actions = np.array([policy.act(obs, state)[0][0] for _ in range(400)])
    assert 0.1 < np.mean(actions != greedy) < 0.2  # half of 30% land on the other action
    assert as_policy(model, deterministic=True).act(obs, None)[0][0] == greedy


def test_the_agent_sees_the_frames_the_zoo_s_loop_shows_it_lives_lost_included():
    """Step for step, the stacked frames the agent is given equal those of the zoo's
    VecFrameStack over AtariWrapper, which starts its stack afresh at each lost life."""
    from stable_baselines3.common.atari_wrappers import AtariWrapper
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack


    plays = np.random.default_rng(3).integers(0, 4, 2000)
    seen: list[np.ndarray] = []

    def agent(stacked):
        seen.append(np.array(stacked[0]))
        return plays[len(seen) - 1:len(seen)]

    env = EnvNeeds(wrappers=((WRAPPER, {}),)).apply(ENV)
    run_episodes(as_policy(agent, frame_stack=4), env, [NOMINAL], 1, seed=7)

    zoo = VecFrameStack(DummyVecEnv([lambda: AtariWrapper(Monitor(gym.make(ENV)))]), 4)
    zoo.seed(7)
    shown = [zoo.reset()[0]]
    for action in plays[:len(seen) - 1]:
        obs, _, _, infos = zoo.step(np.array([action]))
        shown.append(obs[0])
        assert "episode" not in infos[0]  # the game goes on as long as the audit's
    zoo.close()
    restarts = [i for i, frames in enumerate(shown) if i and not frames[..., :3].any()]
    assert len(restarts) >= 4  # a fresh stack after each lost life
    assert all(np.array_equal(a, b) for a, b in zip(seen, shown, strict=True))


def test_a_used_env_starts_a_new_game_at_reset_even_after_a_game_cut_short():
    """An episode cut at max_steps leaves the game running: reset(seed) must still start
    the seed's game (EpisodicLifeEnv alone would take a no-op step instead)."""
    env = EnvNeeds(wrappers=((WRAPPER, {}),)).apply(ENV)
    fresh, used = env.make(), env.make()
    used.reset(seed=1)
    for _ in range(30):  # mid-game, no life lost yet
        used.step(3)
    runs = []
    for made in (fresh, used):
        obs, _ = made.reset(seed=2)
        runs.append([obs] + [made.step(a)[0] for a in (1, 2, 3, 2, 3)])
        made.close()
    assert all(np.array_equal(a, b) for a, b in zip(*runs, strict=True))


def test_rl_stochastic_and_rl_deterministic_together_are_a_usage_error(pytester: pytest.Pytester):
    result = pytester.runpytest("--rl-audit", "--rl-stochastic", "--rl-deterministic")
    result.stderr.fnmatch_lines(["*--rl-stochastic and --rl-deterministic contradict*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
