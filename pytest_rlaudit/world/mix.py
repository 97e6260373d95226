"""ScenarioMix: train under the scenarios that broke an agent, one drawn per episode.

Domain randomisation over what an audit found: the env of each episode is one scenario's
perturbation around the same inner env, drawn at ``reset`` with the given weights.

It lives beside :mod:`.scenarios`, not among the perturbation wrappers it is built from:
the wrappers know nothing of scenarios (see DESIGN, "break the circle").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from .._checks import number
from .._seeding import stable_hash
from ..errors import PerturbationError, UnknownScenarioError
from .perturbations import AdversarialObservation, Dynamics, Perturbation
from .scenarios import Scenario, ScenarioLike, get, resolve
from .schedules import Schedule

__all__ = ["ScenarioMix", "mixable_by_name"]

_OWNER = "ScenarioMix"


def _layers(chain: gym.Env, inner: gym.Env) -> list[gym.Env]:
    """The wrappers a scenario put around ``inner``, outermost first."""
    layers, current = [], chain
    while current is not inner:
        layers.append(current)
        current = current.env  # type: ignore[attr-defined]
    return layers


def _unmixable(scenario: Scenario, layer: object) -> str | None:
    """Why ``scenario`` (or one ``layer`` of its chain) cannot share its env with other
    scenarios, or None if it can. Checked on the class before wrapping too: a Dynamics
    wrapper changes the env as it is made."""
    builds = scenario.perturbation
    kind = builds if isinstance(builds, type) else type(layer)
    if issubclass(kind, Dynamics):
        return (f"scenario {scenario.name!r} shifts the env's physics in place (Dynamics), "
                "so every scenario sharing the env would run shifted. Mix it by making the "
                "shifted env yourself: ScenarioMix(Dynamics(gym.make(...)), [...]) trains "
                "every scenario on the shifted robot")
    if issubclass(kind, AdversarialObservation):
        return (f"scenario {scenario.name!r} attacks a fixed policy (AdversarialObservation "
                "needs the agent it attacks, which training changes); mix 'obs_noise' instead")
    return None


def _unmixed(scenario: Scenario) -> str | None:
    """Why ``scenario`` cannot be mixed, as far as its definition tells (the wrappers it
    makes are checked again when it wraps an env), or None."""
    reason = _unmixable(scenario, None)
    if reason is None and scenario.needs_spread:
        reason = (
            f"scenario {scenario.name!r} measures its noise in units of each observation "
            "element's spread under the audited agent, unknown in training. Pass "
            f"scenarios.get({scenario.name!r}).with_params(scale='absolute') (raw units) or "
            f"scenarios.get({scenario.name!r}).calibrated(spread) (spread: one std per "
            "element, e.g. from pytest_rlaudit.world.calibration.observation_spread)")
    return reason


def mixable_by_name(name: str, params: Mapping[str, Any]) -> bool:
    """Whether ``ScenarioMix(env, [name])`` trains under the scenario ``name`` audited with
    ``params``: a registered scenario with those very parameters, that can be mixed.

    >>> from pytest_rlaudit import scenarios
    >>> mixable_by_name("spike", scenarios.get("spike").params)
    True
    >>> mixable_by_name("spike", {**scenarios.get("spike").params, "k": 9})
    False
    """
    try:
        registered = get(name)
    except UnknownScenarioError:
        return False
    return dict(registered.params) == dict(params) and _unmixed(registered) is None


def _build(scenario: Scenario, inner: gym.Env) -> gym.Env:
    """``scenario``'s wrapper chain around ``inner``, checked mixable."""
    reason = _unmixed(scenario)
    if reason is None:
        try:
            chain = scenario.wrap(inner)
        except PerturbationError as exc:
            raise PerturbationError(
                f"{_OWNER}: scenario {scenario.name!r} cannot wrap this env: {exc}") from None
        for layer in _layers(chain, inner):
            reason = reason or _unmixable(scenario, layer)
    if reason is not None:
        raise PerturbationError(f"{_OWNER}: {reason}")
    return chain


def _weights(weights: Sequence[float] | None, names: Sequence[str]) -> np.ndarray:
    """The draw probabilities: ``weights`` checked and normalised (None: uniform)."""
    if weights is None:
        return np.full(len(names), 1.0 / len(names))
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence | np.ndarray):
        raise PerturbationError(f"{_OWNER}: weights must be a sequence of numbers >= 0, one "
                                f"per scenario, got {weights!r}")
    if len(weights) != len(names):
        raise PerturbationError(
            f"{_OWNER}: {len(weights)} weights for {len(names)} scenarios "
            f"({', '.join(names)}); give one weight per scenario, or none for uniform")
    values = np.array([number(f"{_OWNER}: the weight of scenario {name!r}", w, low=0.0,
                              error=PerturbationError)
                       for name, w in zip(names, weights, strict=True)])
    if values.sum() <= 0:
        raise PerturbationError(f"{_OWNER}: the weights are all zero; give at least one "
                                "scenario a positive weight")
    shares: np.ndarray = values / values.sum()
    return shares


class ScenarioMix(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Each episode runs under one of ``scenarios``, drawn at ``reset`` by ``weights``.

    ``scenarios``: registered names, :class:`~pytest_rlaudit.Scenario` objects or
    :class:`~pytest_rlaudit.Schedule` objects (as :func:`~pytest_rlaudit.scenarios.resolve`
    takes them; name ``"nominal"`` to keep the unperturbed env in the mix).
    ``weights``: one number >= 0 per scenario, not all zero (default: uniform). The
    episode's scenario is :attr:`current` and ``info["scenario"]`` at reset.

    Each scenario's wrappers are built once, around the one inner ``env`` (not rebuilt
    per episode); an episode steps only the drawn chain, whose wrappers reset their own
    state at reset. Scenarios must keep the spaces of the first one (a scenario that
    changes them cannot be mixed), and cannot change the env in place (``dynamics``:
    wrap the inner env in ``Dynamics`` yourself) or attack a fixed policy
    (``adversarial_obs``). Noise relative to the audited agent's spread (``obs_noise``)
    needs its spread or ``scale="absolute"``.

    Placement: wrap outside ``TimeLimit`` (around ``gym.make(...)``, or as
    ``make_vec_env(..., wrapper_class=ScenarioMix)``), as the audit does, so a timing
    scenario's repeated actions count against the episode limit in env steps and an
    episode's return means what the audit measures.

    Seeding: ``reset(seed=s)`` reseeds the draw (from ``s``), every scenario's
    perturbations (from ``s`` and the scenario's name) and the inner env (with ``s``), so
    a seeded run replays; ``reset()`` continues the streams. Before any seed, the draw
    comes from fresh entropy, as gymnasium's own generators do.

    >>> import gymnasium as gym
    >>> env = ScenarioMix(gym.make("CartPole-v1"), ["nominal", "spike", "speed_5x"],
    ...                   weights=[2, 1, 1])
    >>> obs, info = env.reset(seed=0)
    >>> info["scenario"] == env.current and env.current in ("nominal", "spike", "speed_5x")
    True
    >>> ScenarioMix(gym.make("CartPole-v1"), ["nominal", "spkie"])
    Traceback (most recent call last):
    ...
    pytest_rlaudit.errors.UnknownScenarioError: unknown scenario 'spkie'. Did you mean 'spike'? ...
    """

    def __init__(self, env: gym.Env, scenarios: ScenarioLike | Iterable[ScenarioLike],
                 weights: Sequence[float] | None = None) -> None:
        if scenarios is None:
            raise PerturbationError(f"{_OWNER}: give the scenarios to mix, e.g. "
                                    "['nominal', 'spike', 'speed_5x']")
        if not isinstance(scenarios, (str, Scenario, Schedule)):
            scenarios = list(scenarios)
        resolved = resolve(scenarios)
        if not resolved:
            raise PerturbationError(f"{_OWNER}: the list of scenarios is empty; give at least "
                                    "one, e.g. ['nominal', 'spike', 'speed_5x']")
        #: The scenarios' names, in the order given.
        self.names: tuple[str, ...] = tuple(s.name for s in resolved)
        #: The probability of drawing each scenario (``names`` order).
        self.probabilities: np.ndarray = _weights(weights, self.names)
        gym.utils.RecordConstructorArgs.__init__(
            self, scenarios=scenarios,
            weights=None if weights is None else [float(w) for w in weights])
        gym.Wrapper.__init__(self, env)
        self._chains = [_build(s, env) for s in resolved]
        self._check_spaces()
        self.observation_space = self._chains[0].observation_space
        self.action_space = self._chains[0].action_space
        self._rng = np.random.default_rng()
        self._index = 0
        #: The scenario of the current episode (the first one's before any reset).
        self.current: str = self.names[0]

    def _check_spaces(self) -> None:
        first, name = self._chains[0], self.names[0]
        for other, chain in zip(self.names[1:], self._chains[1:], strict=True):
            for kind in ("observation_space", "action_space"):
                mine, theirs = getattr(first, kind), getattr(chain, kind)
                if mine != theirs:
                    shown = ((f"shape {mine.shape}", f"shape {theirs.shape}")
                             if mine.shape != theirs.shape else (mine, theirs))
                    raise PerturbationError(
                        f"{_OWNER}: scenario {other!r} changes the {kind.replace('_', ' ')} "
                        f"({shown[0]} under {name!r}, {shown[1]} under {other!r}); one agent "
                        "cannot act in both, so they cannot be mixed: leave it out, or mix "
                        "only scenarios with the same spaces")

    def chain(self, name: str) -> gym.Env:
        """The wrapper chain of scenario ``name`` (around the shared inner env).

        >>> import gymnasium as gym
        >>> ScenarioMix(gym.make("CartPole-v1"), ["nominal", "speed_5x"]).chain("speed_5x").k
        5
        """
        if name not in self.names:
            raise PerturbationError(f"{_OWNER}: no scenario {name!r} in this mix; its "
                                    f"scenarios: {', '.join(self.names)}")
        return self._chains[self.names.index(name)]

    def _seed(self, seed: int) -> None:
        self._rng = np.random.default_rng(np.random.SeedSequence([seed, stable_hash(_OWNER)]))
        # Every chain now, not only the drawn one: a chain first drawn on a later unseeded
        # reset must still replay. Keyed on the name, so adding a scenario to the mix does
        # not change another's perturbations.
        for name, chain in zip(self.names, self._chains, strict=True):
            layers = [la for la in _layers(chain, self.env) if isinstance(la, Perturbation)]
            keys = np.random.SeedSequence([seed, stable_hash(_OWNER), stable_hash(name)])
            for layer, child in zip(layers, keys.spawn(len(layers)), strict=True):
                layer.seed_perturbation(child)

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Draw this episode's scenario and reset through its wrappers."""
        if seed is not None:
            self._seed(int(seed))
        self._index = int(self._rng.choice(len(self.names), p=self.probabilities))
        self.current = self.names[self._index]
        obs, info = self._chains[self._index].reset(seed=seed, options=options)
        return obs, {**info, "scenario": self.current}

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the current episode's scenario."""
        return self._chains[self._index].step(action)

    def __repr__(self) -> str:
        return f"<ScenarioMix{list(self.names)}{self.env}>"
