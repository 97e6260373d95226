"""The plugin's markers: their documentation, their validated arguments, and the
parametrization ``rl_scenario`` makes (one item per scenario, so xdist can spread them).

A marker argument the marker does not take, or a value out of range, is a
:class:`MarkerError`, reported as a collection error that says which.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from .options import parse_episodes, parse_mode, parse_rating, parse_ratio

__all__ = ["MARKERS", "MarkerError", "threshold_marker", "episodes_marker", "scenario_marker",
           "tolerance_marker", "replay_marker", "attribute_marker", "parametrize"]

MARKERS = (
    "rl_audit: an RL robustness audit test; runs only with --rl-audit.",
    "rl_scenario(*names, **params): run the test once per named perturbation scenario "
    "(ids are the scenario names); params override the scenarios' defaults, checked at "
    "collection (out of range, or perturbing nothing: a collection error).",
    "rl_threshold(min_ratio=None, min_rating=None, mode='point'): the pass condition of "
    "the scenario's return ratio; mode is point, confident or not_worse.",
    "rl_episodes(n, max_n=None, target_ci_width=None): paired episodes per scenario, "
    "optionally adaptive up to max_n until the interval is narrower than target_ci_width.",
    "rl_tolerance(param=None, values=None): measure the tolerance curve of each rl_scenario "
    "(the ratio at each value of param, default: its main parameter and ladder); fails when "
    "the curve breaks (ratio below rl_threshold's min_ratio, default 0.8) at or below the "
    "scenario's own value.",
    "rl_replay(dataset, *, candidate=None, max_disagreement=None, max_divergence=None, "
    "mode='point', tolerance=None, episodes=None, state=None, action=None): the defaults of "
    "the test's rl_replay fixture: replay the candidate (default: rl_agent) open loop on the "
    "recorded dataset; fails when a limit is exceeded (mode point, confident or not_worse).",
    "rl_attribute(groups=None): when an observation scenario of the test fails its "
    "threshold, attribute the failure to observation groups (as --rl-attribute does); "
    "groups maps names to slices, indices or Dict keys, or is a LeRobot dataset folder whose "
    "state names are the observation's (default: from the env and agent).",
)

#: How a replay limit is judged (verdicts.replays.MODES, kept here as text: light).
REPLAY_MODES = ("point", "confident", "not_worse")


def _rl_threshold(min_ratio: float | None = None, min_rating: str | None = None,
                  mode: str = "point") -> dict[str, Any]:
    return {"min_ratio": min_ratio, "min_rating": min_rating, "mode": mode}


def _rl_episodes(n: int, max_n: int | None = None,
                 target_ci_width: float | None = None) -> dict[str, Any]:
    return {"n": n, "max_n": max_n, "target_ci_width": target_ci_width}


def _rl_tolerance(param: str | None = None, values: Any = None) -> dict[str, Any]:
    return {"param": param, "values": values}


def _rl_replay(dataset: Any, *, candidate: Any = None, max_disagreement: float | None = None,
               max_divergence: float | None = None, mode: str = "point",
               tolerance: float | None = None, episodes: Any = None, state: str | None = None,
               action: str | None = None) -> dict[str, Any]:
    return {"dataset": dataset, "candidate": candidate, "max_disagreement": max_disagreement,
            "max_divergence": max_divergence, "mode": mode, "tolerance": tolerance,
            "episodes": episodes, "state": state, "action": action}


def _rl_attribute(groups: Any = None) -> dict[str, Any]:
    return {"groups": groups}


class MarkerError(Exception):
    """A marker with arguments it does not take, or values out of range."""


def _bind(marker: pytest.Mark, signature_of: Callable[..., Any], name: str) -> dict[str, Any]:
    try:
        return signature_of(*marker.args, **marker.kwargs)
    except TypeError as exc:
        text = str(exc).replace(signature_of.__name__ + "()", name)
        raise MarkerError(f"@pytest.mark.{name}{_plain_signature(signature_of)}: {text}") from None


def _plain_signature(function: Callable[..., Any]) -> inspect.Signature:
    """The signature as ``pytest --markers`` shows it: no annotations, no return type."""
    signature = inspect.signature(function)
    return signature.replace(
        parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
        return_annotation=inspect.Signature.empty)


def threshold_marker(marker: pytest.Mark | None) -> dict[str, Any] | None:
    """The validated kwargs of an ``rl_threshold`` marker (None without one)."""
    if marker is None:
        return None
    values = _bind(marker, _rl_threshold, "rl_threshold")
    if values["min_ratio"] is not None:
        try:
            values["min_ratio"] = parse_ratio(values["min_ratio"])
        except argparse.ArgumentTypeError as exc:
            raise MarkerError(f"@pytest.mark.rl_threshold: min_ratio {exc}") from None
    if values["min_rating"] is not None:
        try:
            values["min_rating"] = parse_rating(values["min_rating"])
        except argparse.ArgumentTypeError as exc:
            raise MarkerError(f"@pytest.mark.rl_threshold: min_rating {exc}") from None
    try:
        values["mode"] = parse_mode(values["mode"])
    except argparse.ArgumentTypeError as exc:
        raise MarkerError(f"@pytest.mark.rl_threshold: mode {exc}") from None
    return values


def episodes_marker(marker: pytest.Mark | None) -> dict[str, Any] | None:
    """The validated kwargs of an ``rl_episodes`` marker (None without one)."""
    if marker is None:
        return None
    values = _bind(marker, _rl_episodes, "rl_episodes")
    for key in ("n", "max_n"):
        if values[key] is not None:
            if isinstance(values[key], bool) or not isinstance(values[key], int):
                raise MarkerError(f"@pytest.mark.rl_episodes: {key} must be an integer >= 2, "
                                  f"got {values[key]!r}")
            try:
                parse_episodes(values[key])
            except argparse.ArgumentTypeError as exc:
                raise MarkerError(f"@pytest.mark.rl_episodes: {key} {exc}") from None
    if values["max_n"] is not None and values["max_n"] < values["n"]:
        raise MarkerError(f"@pytest.mark.rl_episodes: max_n ({values['max_n']}) must be >= n "
                          f"({values['n']})")
    width = values["target_ci_width"]
    if width is not None:
        if values["max_n"] is None:
            raise MarkerError("@pytest.mark.rl_episodes: target_ci_width needs max_n, the most "
                              "episodes to spend reaching it")
        if isinstance(width, bool) or not isinstance(width, (int, float)) or not width > 0:
            raise MarkerError(f"@pytest.mark.rl_episodes: target_ci_width must be a positive "
                              f"number, got {width!r}")
    return values


def tolerance_marker(marker: pytest.Mark | None, scenario: Any = None) -> dict[str, Any] | None:
    """The validated kwargs of an ``rl_tolerance`` marker (None without one); with
    ``scenario`` (a Scenario), checked against its parameters too."""
    if marker is None:
        return None
    values = _bind(marker, _rl_tolerance, "rl_tolerance")
    if values["param"] is not None and not isinstance(values["param"], str):
        raise MarkerError(f"@pytest.mark.rl_tolerance: param must be a parameter name (a "
                          f"string), got {values['param']!r}")
    if values["values"] is not None and (isinstance(values["values"], (str, bytes, dict))
                                         or not hasattr(values["values"], "__iter__")):
        raise MarkerError(f"@pytest.mark.rl_tolerance: values must be a list of numbers, "
                          f"mildest first (e.g. values=[1, 2, 4]), got {values['values']!r}")
    if values["values"] is not None:
        values["values"] = list(values["values"])
    if scenario is not None:
        from ..auditing.ladders import ladder  # light: standard library only

        try:
            ladder(scenario, values["param"], values["values"])
        except ValueError as exc:
            raise MarkerError(f"@pytest.mark.rl_tolerance: {exc}") from None
    return values


def replay_marker(marker: pytest.Mark | None) -> dict[str, Any] | None:
    """The validated kwargs of an ``rl_replay`` marker (None without one)."""
    if marker is None:
        return None
    values = _bind(marker, _rl_replay, "rl_replay")
    if values["dataset"] is None:
        raise MarkerError("@pytest.mark.rl_replay: dataset names the recording (a Minari "
                          "folder or id, a LeRobot folder, an .npz)")
    for key in ("max_disagreement", "max_divergence", "tolerance"):
        value = values[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not value >= 0 or value == float("inf")):
            raise MarkerError(f"@pytest.mark.rl_replay: {key} must be a finite number >= 0, "
                              f"got {value!r}")
    if values["mode"] not in REPLAY_MODES:
        raise MarkerError(f"@pytest.mark.rl_replay: mode must be one of "
                          f"{', '.join(REPLAY_MODES)}, got {values['mode']!r}")
    episodes = values["episodes"]
    if episodes is not None and (isinstance(episodes, (bool, str, bytes, float))
                                 or (isinstance(episodes, int) and episodes < 1)
                                 or (not isinstance(episodes, int)
                                     and not hasattr(episodes, "__iter__"))):
        raise MarkerError(f"@pytest.mark.rl_replay: episodes must be a count >= 1 or a list of "
                          f"episode positions, got {episodes!r}")
    for key in ("state", "action"):
        if values[key] is not None and not isinstance(values[key], str):
            raise MarkerError(f"@pytest.mark.rl_replay: {key} must be a column name (a "
                              f"string), got {values[key]!r}")
    return values


def attribute_marker(marker: pytest.Mark | None) -> dict[str, Any] | None:
    """The validated kwargs of an ``rl_attribute`` marker (None without one); the groups
    themselves are checked against the env's observations when the attribution runs."""
    if marker is None:
        return None
    values = _bind(marker, _rl_attribute, "rl_attribute")
    groups = values["groups"]
    if groups is not None and not isinstance(groups, str) and not (
            isinstance(groups, dict) and len(groups) >= 2
            and all(isinstance(k, str) for k in groups)):
        raise MarkerError("@pytest.mark.rl_attribute: groups must map two or more names to "
                          "parts of the observation (slices, indices or Dict keys), e.g. "
                          "groups={'qpos': slice(0, 8), 'qvel': slice(8, 17)}, or name a "
                          f"LeRobot dataset folder; got {groups!r}")
    return values


def scenario_marker(marker: pytest.Mark) -> list[Any]:
    """The Scenarios an ``rl_scenario`` marker names, with its params applied to each."""
    from ..errors import InvalidArgumentError, PerturbationError, UnknownScenarioError
    from ..world import scenarios as registry  # the registry imports gymnasium: only when used

    if not marker.args:
        raise MarkerError("@pytest.mark.rl_scenario(*names, **params) needs at least one "
                          f"scenario name, e.g. rl_scenario('jitter', 'delay'); known: "
                          f"{', '.join(registry.names())}")
    out = []
    for name in marker.args:
        try:
            scenario = registry.as_scenario(name)
            out.append(scenario.with_params(**marker.kwargs) if marker.kwargs else scenario)
        except (UnknownScenarioError, PerturbationError, TypeError) as exc:
            raise MarkerError(f"@pytest.mark.rl_scenario: {exc}") from None
        if out[-1].noop is not None:  # it would pass measuring nothing
            raise MarkerError(f"@pytest.mark.rl_scenario: {registry.noop_message(out[-1])}")
    try:
        return list(registry.check_unique(out))
    except InvalidArgumentError as exc:  # two items with one id would audit it twice
        raise MarkerError(f"@pytest.mark.rl_scenario: {exc}") from None


def parametrize(metafunc: pytest.Metafunc, enabled: bool) -> None:
    """Validate a test's rl markers and parametrize ``rl_scenario`` from ``rl_scenario``;
    scenario names are resolved only when audits run (``enabled``), since the registry
    imports gymnasium."""
    definition = metafunc.definition
    error: str | None
    try:
        threshold = threshold_marker(definition.get_closest_marker("rl_threshold"))
        episodes = episodes_marker(definition.get_closest_marker("rl_episodes"))
        curve = definition.get_closest_marker("rl_tolerance")
        tolerance_marker(curve)
        attribute_marker(definition.get_closest_marker("rl_attribute"))
        if replay_marker(definition.get_closest_marker("rl_replay")) is not None and (
                "rl_replay" not in metafunc.fixturenames):
            raise MarkerError("@pytest.mark.rl_replay sets the defaults of the rl_replay "
                              "fixture: use it in the test (def test_x(rl_replay): "
                              "rl_replay())")
        marker = definition.get_closest_marker("rl_scenario")
        if curve is not None:
            _check_tolerance_test(marker, threshold, episodes)
        if marker is None:
            return
        if "rl_scenario" not in metafunc.fixturenames:
            raise MarkerError("@pytest.mark.rl_scenario parametrizes the rl_scenario fixture: "
                              "use the rl_audit (or rl_scenario) fixture in the test")
        if enabled:
            values: list[Any] = scenario_marker(marker)
            ids = [s.name for s in values]
            for scenario in values if curve is not None else ():
                tolerance_marker(curve, scenario)
        else:  # skipped anyway: keep collection light (the registry imports gymnasium)
            values = list(marker.args)
            ids = [name if isinstance(name, str) else getattr(name, "name", "schedule")
                   for name in marker.args]
    except MarkerError as exc:
        error = f"{metafunc.definition.nodeid}: {exc}"
    else:
        error = None
    if error is not None:  # outside the except block: no "During handling of ..." chain
        pytest.fail(error, pytrace=False)
    metafunc.parametrize("rl_scenario", values, ids=ids, scope="function")


def _check_tolerance_test(scenarios: pytest.Mark | None, threshold: dict[str, Any] | None,
                          episodes: dict[str, Any] | None) -> None:
    """An ``rl_tolerance`` test measures its ``rl_scenario``'s curve at a fixed number of
    episodes, judging each value's point ratio against a min_ratio."""
    if scenarios is None:
        raise MarkerError("@pytest.mark.rl_tolerance measures the tolerance curve of the "
                          "test's scenario: add @pytest.mark.rl_scenario('delay') (or another "
                          "scenario) to the test")
    if threshold is not None and threshold["mode"] != "point":
        raise MarkerError(f"@pytest.mark.rl_tolerance judges each value's ratio itself, so "
                          f"rl_threshold(mode={threshold['mode']!r}) does not apply: drop mode")
    if episodes is not None and episodes["max_n"] is not None:
        raise MarkerError("@pytest.mark.rl_tolerance runs a fixed number of episodes per "
                          "value: drop rl_episodes' max_n and target_ci_width")
