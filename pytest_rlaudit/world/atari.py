"""Atari (the Arcade Learning Environment, ``ale-py``): its env ids, and an episode that is
one whole game, scored as the game scores it.

Gymnasium >= 1.0 registers no Atari ids of its own: ``ale_py`` registers ``ALE/...-v5``
and the ``*NoFrameskip-v4`` family when imported. :func:`register_ale` imports it when an
id looks like one of those, so ``audit(agent, "BreakoutNoFrameskip-v4")`` works without an
``import ale_py`` of one's own (and loading the plugin imports nothing of it).

An agent trained with SB3's ``AtariWrapper`` (the rl-baselines3-zoo's 40 Atari agents) sees
a loss of life as the end of its episode (``EpisodicLifeEnv``) and clipped rewards, but the
zoo scores it on whole games: its ``Monitor`` sits under the wrapper and records the
game's own score until game over. :class:`WholeGame` and :class:`GameScore` give the audit
that episode: the wrappers stay as trained (the agent sees what it was trained on, the
FIRE press after a lost life included), while the return is the unclipped score of one
game and the episode ends at game over only.

>>> looks_atari("BreakoutNoFrameskip-v4"), looks_atari("ALE/Pong-v5"), looks_atari("CartPole-v1")
(True, True, False)
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any, SupportsFloat

import gymnasium as gym

from .._optional import install_hint
from ..errors import UnknownEnvError

__all__ = ["looks_atari", "register_ale", "is_ale", "ale_env", "GameScore", "WholeGame",
           "with_whole_games", "LIVES_LOST"]

#: The ``info`` key under which :class:`WholeGame` counts the lives lost so far in the
#: game: where it grows, the runner asks the agent for ``restart_state`` (the zoo's
#: ``VecFrameStack`` zeroes its stack at each lost life, a "done" to it).
LIVES_LOST = "rlaudit_lives_lost"

# The ids ale_py registers: ALE/<Game>-v5 and, from the old gym, <Game>[NoFrameskip|
# Deterministic]-v0/v4 and their -ram variants. Only names that say so are taken for
# Atari: a bare "Pong-v0" could be anyone's, and is tried only when unknown.
_ATARI_ID = re.compile(r"^(ALE/.+|.+(NoFrameskip|Deterministic)-v[04]|.+-ram(NoFrameskip|"
                       r"Deterministic)?-v[04])$")


def looks_atari(env_id: str) -> bool:
    """Whether ``env_id`` names an ALE env by its form (``ALE/<Game>-v5`` or
    ``<Game>NoFrameskip-v4``-like), before anything registers it."""
    return bool(_ATARI_ID.match(str(env_id)))


def register_ale(env_id: str, *, if_installed: bool = False) -> None:
    """Register ale-py's ids (by importing it) for ``env_id``, if it looks like an Atari id
    that is not registered yet; when ale-py is missing, the error names the extra that
    installs it. ``if_installed``: for any unknown id (old gym's ``Pong-v4`` has no
    telling form), import ale-py only if it is installed, and say nothing otherwise.

    >>> register_ale("CartPole-v1")   # not Atari: nothing imported
    """
    if env_id in gym.registry:
        return
    if if_installed:
        if importlib.util.find_spec("ale_py") is None:
            return
    elif not looks_atari(env_id):
        return
    try:
        import ale_py
    except ModuleNotFoundError as exc:
        if exc.name != "ale_py":
            raise  # ale_py is there but something it needs is not: its own error
        raise UnknownEnvError(
            f"{env_id!r} is an Atari env, registered by ale-py, which is not installed: "
            f"{install_hint('atari')} (ale-py with its game ROMs, and OpenCV for SB3's "
            "AtariWrapper)") from exc
    gym.register_envs(ale_py)  # a no-op that keeps the import: it registered on import
    registration = getattr(ale_py, "registration", None)
    if "ALE/Pong-v5" not in gym.registry and registration is not None:
        # imported before, and its ids dropped since (a registry restored to an earlier
        # state): the import registers nothing again, so register them again here
        for register in ("register_v0_v4_envs", "register_v5_envs"):
            getattr(registration, register, lambda: None)()
    logger = getattr(ale_py, "LoggerMode", None)
    if logger is not None:  # its banner on every first env made: warnings and errors only
        ale_py.ALEInterface.setLoggerMode(logger.Warning)


def ale_env(env: gym.Env) -> Any:
    """The ALE env at the bottom of ``env``'s wrappers, or None for any other env."""
    base = getattr(env, "unwrapped", env)
    return base if hasattr(base, "ale") and hasattr(base, "_frameskip") else None


def is_ale(env: gym.Env) -> bool:
    """Whether ``env`` is an ALE (Atari) env under its wrappers.

    >>> is_ale(gym.make("CartPole-v1"))
    False
    """
    return ale_env(env) is not None


class GameScore(gym.Wrapper):
    """Sums the game's own rewards as they come and counts the games that ended, as the
    zoo's ``Monitor`` does under the ``AtariWrapper``: :class:`WholeGame` reads the
    unclipped score and the game over from here. It changes nothing of what passes
    through it."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.total = 0.0
        self.ended = 0  # games over (or truncated) so far

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.total += float(reward)
        self.ended += bool(terminated or truncated)
        return obs, reward, terminated, truncated, info


class WholeGame(gym.Wrapper):
    """One episode per game: a lost life that the wrappers inside made terminal (SB3's
    ``EpisodicLifeEnv``) is passed over by resetting them, as the zoo's vectorised env
    does (``EpisodicLifeEnv`` then takes a no-op step rather than start a new game, and
    ``FireResetEnv`` presses FIRE), and the episode ends only when the game does (game
    over, or its time limit). The reward is the game's unclipped score since the last
    step (``score``, a :class:`GameScore` under the wrappers), the frames of those
    resets included. ``info[LIVES_LOST]`` counts the lives passed over so far.

    >>> env = GameScore(gym.make("CartPole-v1"))
    >>> whole = WholeGame(env, env)   # any env: its episodes end where they did
    >>> _ = whole.reset(seed=0)
    >>> whole.step(0)[1:4]
    (1.0, False, False)
    """

    def __init__(self, env: gym.Env, score: GameScore) -> None:
        super().__init__(env)
        self.score = score
        self._seen = 0.0
        self.lives_lost = 0

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        # A new game, always: EpisodicLifeEnv resets the game only after a game over and
        # otherwise takes a no-op step, ignoring the seed, so an env whose last episode was
        # cut short (max_steps) would carry on that game when reused for the next episode.
        layer: Any = self.env
        while isinstance(layer, gym.Wrapper):
            if hasattr(layer, "was_real_done"):
                layer.was_real_done = True
            layer = layer.env
        obs, info = self.env.reset(seed=seed, options=options)
        self._seen = self.score.total
        self.lives_lost = 0
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        games = self.score.ended
        obs, _, terminated, truncated, info = self.env.step(action)
        if terminated and not truncated and self.score.ended == games:
            # A lost life, not the end of the game: carry on, as the zoo's evaluation does.
            obs, info = self.env.reset()
            terminated, truncated = False, False
            self.lives_lost += 1
        over = self.score.ended > games  # the no-op step after a lost life can end it too
        if over:
            terminated = terminated or not truncated
        total = self.score.total
        reward, self._seen = total - self._seen, total
        # On every step, a count: a perturbation that holds an action over several steps
        # passes on the last step's info only.
        return obs, reward, terminated, truncated, {**info, LIVES_LOST: self.lives_lost}


def with_whole_games(make: Any, wrap: Any) -> gym.Env:
    """``wrap(make())`` where ``make()`` is an ALE env: with :class:`GameScore` under the
    wrappers and :class:`WholeGame` over them, so that an episode is one game scored as the
    game scores it. Any other env is ``wrap(make())`` as it is."""
    base = make()
    if not is_ale(base):
        return wrap(base)  # type: ignore[no-any-return]
    score = GameScore(base)
    return WholeGame(wrap(score), score)
