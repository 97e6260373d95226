"""Batch kinds: the envs a lock-step batch steps together, behind one small interface.

A :class:`BatchKind` resets chosen rows with chosen seeds and steps every row at once.
Three kinds wrap what users have:

- :class:`CartPoleRows`: gymnasium's ``CartPoleVectorEnv`` (the vector entry point of
  ``CartPole-v0``/``-v1``), with each episode's seeded start state put in at its reset, so
  that its episodes are the scalar env's bit for bit;
- :class:`VectorRows`: any ``gymnasium.vector.VectorEnv`` that resets chosen envs with
  seeds (``SyncVectorEnv``, ``AsyncVectorEnv``, ``gym.make_vec``);
- :class:`ProtocolRows`: a simulator behind the :class:`~.protocol.BatchedEnv` protocol.

The fourth kind, the scalar path's (one gymnasium env per row, each wrapped whole by its
scenario), is :class:`pytest_rlaudit.rollout.slots.SlotRows`: it needs the runner's
contract checks and deadline, so it lives with them.

>>> rows = CartPoleRows("CartPole-v1", 3)
>>> rows.reset(np.array([0, 2]), [5, 6]).shape
(2, 4)
>>> obs, rewards, terminated, truncated = rows.step(np.array([0, 1, 1]))
>>> rewards.tolist()
[1.0, 1.0, 1.0]
>>> rows.close()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils.seeding import np_random

from ...errors import EnvContractError
from ..rows import row_of, take
from .protocol import POLICY_KEY, BatchedEnv

__all__ = ["BatchKind", "BatchSource", "CartPoleRows", "VectorRows", "ProtocolRows", "RowView",
           "as_numpy", "one_factory", "vector_entry"]


def as_numpy(value: Any) -> np.ndarray:
    """``value`` (a numpy array, a torch tensor on any device, a list) as a numpy array."""
    if hasattr(value, "detach"):  # a torch tensor: duck-typed, torch is not imported here
        value = value.detach().cpu().numpy()
    return np.asarray(value)


class BatchKind:
    """``num_envs`` envs stepped together (see the module). ``label`` names the kind in
    messages; the spaces are those of one env."""

    label: str = "a batch of envs"
    #: A factory of one of its envs, if it has one (a vector env built from one factory):
    #: the scenarios the batch cannot step (``dynamics``, ``push``: per-env physics) run one
    #: env per slot from it, with the scalar path's numbers. None: they are refused.
    per_env: Callable[[], gym.Env] | None = None
    #: Said after the remedy when such a scenario is refused (how the kind could run it).
    hint: str = ""
    #: How to make its episodes replay under their seeds, said when they do not (None:
    #: the gymnasium env's way, for a batch of gymnasium envs).
    seed_fix: str | None = None
    num_envs: int
    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]

    def reset(self, ids: np.ndarray, seeds: Sequence[int]) -> np.ndarray:
        """The first observations of rows ``ids``, row ``ids[i]`` reset with ``seeds[i]``
        (an array with a row each; a dict of such arrays for a Dict observation space)."""
        raise NotImplementedError

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every row stepped: observations (as :meth:`reset` gives them), rewards
        (float64), terminated, truncated."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the kind (only one the audit made: a kind the user gave is theirs)."""

    def finish(self) -> None:
        """Release what one run made on the kind (called after every run, given or made)."""

    def idle_actions(self) -> np.ndarray:
        """An action for every row, for rows that run no episode (their results are
        ignored): the action space's first element, so nothing random is drawn."""
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            one: Any = space.start
        elif isinstance(space, spaces.Box):
            one = np.clip(np.zeros(space.shape, space.dtype), space.low, space.high)
        else:
            raise EnvContractError(
                f"{self.label}: a batch runs Box or Discrete actions, not {space}")
        return np.stack([np.asarray(one)] * self.num_envs)


def _split(result: tuple[Any, ...], label: str) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    if not isinstance(result, tuple) or len(result) not in (4, 5):
        raise EnvContractError(
            f"{label}: step() must return (obs, rewards, terminated, truncated), with an "
            "optional fifth item, got "
            + (f"{len(result)} items" if isinstance(result, tuple) else type(result).__name__))
    obs, rewards, terminated, truncated = result[:4]
    return (obs, as_numpy(rewards).astype(np.float64, copy=False).reshape(-1),
            as_numpy(terminated).astype(bool, copy=False).reshape(-1),
            as_numpy(truncated).astype(bool, copy=False).reshape(-1))


class CartPoleRows(BatchKind):
    """gymnasium's ``CartPoleVectorEnv`` with seeded resets of chosen rows (see the module).

    The vector env draws every start state from one generator and resets rows itself at
    the step after they end; here each episode's start is drawn as the scalar env draws
    it (``np_random(seed)``, uniform in +-0.05) and written into the row, and the row's
    step count and pending reset are cleared. The dynamics are the scalar env's, so the
    episodes are too (tests/rollout/test_batch_kinds.py holds them to it).
    """

    label = "gymnasium's CartPoleVectorEnv"

    def __init__(self, env_id: str, num_envs: int) -> None:
        self.venv = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
        self.base: Any = self.venv.unwrapped
        self.base.reset(seed=0)  # allocates the state; every row is set at its own reset
        self.num_envs = num_envs
        self.per_env = partial(gym.make, env_id)
        self.observation_space = self.base.single_observation_space
        self.action_space = self.base.single_action_space

    def reset(self, ids: np.ndarray, seeds: Sequence[int]) -> np.ndarray:
        base = self.base
        for row, seed in zip(ids, seeds, strict=True):
            generator, _ = np_random(int(seed))
            base.state[:, row] = generator.uniform(low=-0.05, high=0.05, size=(4,))
        base.steps[ids] = 0
        base.prev_done[ids] = False
        out: np.ndarray = base.state[:, ids].T.astype(np.float32)
        return out

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        obs, rewards, terminated, truncated, _ = self.base.step(actions)
        # A row that ended is reset by the vector env at its next step from the shared
        # generator: never one of ours, which are set by reset() before they step again.
        return obs, rewards.astype(np.float64), terminated, truncated

    def close(self) -> None:
        self.venv.close()


def vector_entry(env_id: str) -> type[CartPoleRows] | None:
    """The batch kind that runs ``env_id`` as its scalar env does, if there is one: the
    CartPole ids gymnasium registers with a vector entry point (their start states can
    be put in row by row); None for every other id.

    >>> vector_entry("CartPole-v1").__name__, vector_entry("Pendulum-v1")
    ('CartPoleRows', None)
    """
    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        return None
    entry = str(spec.vector_entry_point or "")
    if entry.endswith(":CartPoleVectorEnv") and entry.startswith("gymnasium.envs.classic_control"):
        return CartPoleRows
    return None


class VectorRows(BatchKind):
    """A ``gymnasium.vector.VectorEnv`` given by the user, its rows reset with
    ``options={"reset_mask": ...}`` and a seed per row (Sync and Async do this)."""

    def __init__(self, venv: gym.vector.VectorEnv) -> None:
        self.venv = venv
        self.label = f"the vector env {type(venv).__name__}"
        self.num_envs = int(venv.num_envs)
        self.observation_space = venv.single_observation_space
        self.action_space = venv.single_action_space
        space = self.observation_space
        if not (isinstance(space, spaces.Box) or (isinstance(space, spaces.Dict) and all(
                isinstance(part, spaces.Box) for part in space.values()))):
            raise EnvContractError(
                f"{self.label}: a vector env runs as one batch with array observations (a "
                f"Box, or a Dict of Boxes), and its observations are {space}; pass a "
                "factory of one env instead (lambda: gym.make(...)): the audit then runs one "
                "env per row")
        self._started = False
        self.per_env = one_factory(venv)
        if self.per_env is None and isinstance(venv, _BUILT_FROM_FACTORIES):
            self.hint = (f" A {type(venv).__name__} built from one factory (as "
                         "gym.make_vec builds it, or [make] * n) runs them on that "
                         "factory's envs; this one's envs come from different factories")

    def reset(self, ids: np.ndarray, seeds: Sequence[int]) -> np.ndarray:
        every: list[int | None] = [None] * self.num_envs
        mask = np.zeros(self.num_envs, dtype=bool)
        for row, seed in zip(ids, seeds, strict=True):
            every[int(row)] = int(seed)
            mask[row] = True
        if self._started:
            # gymnasium's vector envs take a seed per env, which its stubs do not say
            obs, _ = self.venv.reset(seed=every, options={"reset_mask": mask})  # type: ignore[arg-type]
        else:  # the first reset resets every row: the others get seeds of their own
            self._started = True
            obs, _ = self.venv.reset(seed=[s if s is not None else 0 for s in every])  # type: ignore[arg-type]
        rows: np.ndarray = take(_batch_of(obs), ids)
        return rows

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        obs, rewards, terminated, truncated = _split(self.venv.step(actions), self.label)
        return _batch_of(obs), rewards, terminated, truncated


def _batch_of(obs: Any) -> Any:
    """A vector env's observations as numpy: an array, or a dict of arrays (a Dict space)."""
    if isinstance(obs, dict):
        return {k: as_numpy(v) for k, v in obs.items()}
    return as_numpy(obs)


_BUILT_FROM_FACTORIES = (gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv)


def one_factory(venv: Any) -> Callable[[], gym.Env] | None:
    """The factory every env of ``venv`` was made by, if ``venv`` is a ``SyncVectorEnv``
    or ``AsyncVectorEnv`` (not wrapped: a vector wrapper would change what its envs
    give) whose ``env_fns`` are one factory: the same object, or functions of the same
    code with equal defaults and closures (``[lambda: gym.make(id) for _ in ...]``), or
    equal ``functools.partial`` objects; where the factories are gone (gymnasium 1.1's
    ``make_vec`` hands a ``SyncVectorEnv`` a generator of them), ``gym.make`` of the spec
    its envs share, if that makes the same wrapper stack. None otherwise.

    >>> make = lambda: gym.make("CartPole-v1")
    >>> one_factory(gym.vector.SyncVectorEnv([make] * 2)) is make
    True
    >>> one_factory(gym.vector.SyncVectorEnv(
    ...     [lambda: gym.make("CartPole-v1"), lambda: gym.make("CartPole-v1", max_episode_steps=9)]))
    >>> one_factory(gym.vector.SyncVectorEnv(
    ...     [lambda: gym.make("CartPole-v1"), lambda: gym.make("CartPole-v1")])) is not None
    True
    """
    if not isinstance(venv, _BUILT_FROM_FACTORIES):
        return None
    fns = getattr(venv, "env_fns", ())
    if not isinstance(fns, Sequence):  # gymnasium 1.1's make_vec passes a generator, spent
        return _remade(venv)
    if fns and all(_same_factory(fns[0], f) for f in fns[1:]):
        return fns[0]  # type: ignore[no-any-return]
    return None


def _remade(venv: Any) -> Callable[[], gym.Env] | None:
    """A factory of ``venv``'s envs from their spec, where its factories are gone: a
    ``SyncVectorEnv`` whose envs share one spec, which ``gym.make`` turns into an env with
    the same wrappers (checked on one made here); else None."""
    envs = getattr(venv, "envs", None)  # a SyncVectorEnv's own envs (Async's are elsewhere)
    if not envs:
        return None
    spec = envs[0].spec
    if spec is None or any(env.spec != spec for env in envs[1:]):
        return None
    try:
        made = gym.make(spec)
    except Exception:  # a spec that does not rebuild its env: no factory
        return None
    same = str(made) == str(envs[0])  # the wrapper stack, outermost first
    made.close()
    return partial(gym.make, spec) if same else None


def _same_factory(a: Any, b: Any) -> bool:
    """Whether factories ``a`` and ``b`` make the same env (see :func:`one_factory`)."""
    if a is b:
        return True
    if isinstance(a, partial) and isinstance(b, partial):
        return (_same_factory(a.func, b.func) and _equal(a.args, b.args)
                and _equal(a.keywords, b.keywords))
    code_a, code_b = getattr(a, "__code__", None), getattr(b, "__code__", None)
    if code_a is None or code_b is None or not _same_code(code_a, code_b):
        return False
    try:
        cells = [tuple(c.cell_contents for c in (f.__closure__ or ())) for f in (a, b)]
    except ValueError:  # a cell not yet filled: nothing to compare
        return False
    return (_equal(a.__defaults__, b.__defaults__) and _equal(a.__kwdefaults__, b.__kwdefaults__)
            and _equal(*cells))


def _same_code(a: Any, b: Any) -> bool:
    """Whether code objects ``a`` and ``b`` do the same, wherever they were written: two
    ``lambda: gym.make(id)`` on one line are one code object on Python 3.10 and two on
    3.11 (which records columns), and make the same env either way."""
    return a is b or all(getattr(a, name) == getattr(b, name) for name in (
        "co_code", "co_consts", "co_names", "co_varnames", "co_freevars", "co_cellvars"))


def _equal(a: Any, b: Any) -> bool:
    """``a == b`` as a plain truth; an object that cannot say (numpy arrays) is unequal."""
    try:
        return bool(a == b)
    except Exception:  # an ambiguous truth value: not known to be the same
        return False


class ProtocolRows(BatchKind):
    """A :class:`~.protocol.BatchedEnv`: tensors copied to numpy, a ``"policy"`` key read."""

    seed_fix = ("Fix: in reset(env_ids, seeds), draw the start of env env_ids[i] from "
                "seeds[i] alone (a generator of its own, such as "
                "torch.Generator(device).manual_seed(seed), not the simulator's shared one), "
                "and draw nothing in step that the seeds do not fix (the resets step makes "
                "of its own are never used: the audit resets each episode itself). A "
                "simulator that truly cannot be seeded cannot be audited with paired "
                "episodes: its ratios would mix the perturbation's effect with its own luck.")

    def __init__(self, env: BatchedEnv) -> None:
        self.env = env
        self.label = f"the batched env {type(env).__name__}"
        self.num_envs = int(env.num_envs)
        space = env.single_observation_space
        self.key = POLICY_KEY if isinstance(space, spaces.Dict) else None
        if self.key is not None and POLICY_KEY not in space.spaces:
            raise EnvContractError(
                f"{self.label}: its Dict observation space has no {POLICY_KEY!r} key (keys: "
                f"{', '.join(map(str, space.spaces))}); the policy reads obs[{POLICY_KEY!r}]")
        self.observation_space = space[POLICY_KEY] if self.key else space
        self.action_space = env.single_action_space

    def _obs(self, obs: Any) -> np.ndarray:
        if isinstance(obs, dict):
            if POLICY_KEY not in obs:
                raise EnvContractError(
                    f"{self.label} returned observations with keys {', '.join(map(str, obs))}; "
                    f"the policy reads obs[{POLICY_KEY!r}]")
            obs = obs[POLICY_KEY]
        # a copy: a simulator may write the next step into the same buffer, and a delayed
        # observation must stay the one it was
        return np.array(as_numpy(obs), copy=True)

    def reset(self, ids: np.ndarray, seeds: Sequence[int]) -> np.ndarray:
        return self._obs(self.env.reset(ids.copy(), [int(s) for s in seeds]))

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        obs, rewards, terminated, truncated = _split(self.env.step(actions), self.label)
        return self._obs(obs), rewards, terminated, truncated


@dataclass(frozen=True)
class BatchSource:
    """Where an audited env's batches come from: ``make(rows)`` builds a kind of that many
    rows (the audit's own, closed after the run), or ``given`` is one the user gave, of
    the rows it has, run whatever the scenarios (a scenario it cannot take is an error)."""

    make: Callable[[int], BatchKind] | None = None
    given: BatchKind | None = None


class RowView(gym.Env):
    """Row 0 of a batch kind as one gymnasium env, for the checks an audit makes before
    its episodes (spaces, the seed-replay check). Each step steps the whole batch, the
    other rows idle; closing it leaves the batch open (the audit's run uses it next)."""

    def __init__(self, kind: BatchKind) -> None:
        self.kind = kind
        self.observation_space = kind.observation_space
        self.action_space = kind.action_space
        self._actions = kind.idle_actions()
        self._row = np.array([0])

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return row_of(self.kind.reset(self._row, [0 if seed is None else seed]), 0), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        actions = self._actions.copy()
        actions[0] = action
        obs, rewards, terminated, truncated = self.kind.step(actions)
        return row_of(obs, 0), float(rewards[0]), bool(terminated[0]), bool(truncated[0]), {}
