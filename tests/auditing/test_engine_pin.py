"""The engine pinned: per-episode returns, ratios, intervals and p-values, bit for bit.

For a fixed set of agents, envs, scenarios and seeds, ``audit()`` must give exactly the
numbers recorded in ``tests/auditing/data/engine_pin.json``: a refactor of the engine (rollouts,
wrappers, seeding, statistics) that changes any of them, even in the last bit, fails
here. Floats are compared with ``==`` (JSON keeps a float's repr, which round-trips) on the
float stack the file records (``tests/pins.py``: versions and SIMD kernels); on any other,
within float rounding, as numpy's ``sin``/``cos`` round Pendulum's dynamics differently there.

When a change *means* to alter the numbers (a new scenario semantics, a new interval),
regenerate the file and say why in the commit::

    PYTHONPATH=tests python tests/auditing/test_engine_pin.py --write
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pins import assert_pinned, float_stack

from pytest_rlaudit import Schedule, audit, scenarios

ROOT = Path(__file__).resolve().parent
PIN = ROOT / "data" / "engine_pin.json"
PPO = str(ROOT.parents[1] / "examples" / "ppo_cartpole.zip")
W = np.array([0.02, 0.0, 1.0, 0.2])


def balance(obs: np.ndarray) -> np.ndarray:
    return (np.asarray(obs) @ W > 0).astype(np.int64)


def fragile(obs: np.ndarray) -> np.ndarray:
    obs = np.asarray(obs)
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def swing_up(obs: np.ndarray) -> np.ndarray:
    cos, sin, vel = obs[:, 0], obs[:, 1], obs[:, 2]
    return np.clip(-(6.0 * np.arctan2(sin, cos) + 1.0 * vel), -2, 2)[:, None]


EVERY_CARTPOLE_SCENARIO = ("speed_5x", "jitter", "delay", "spike", "obs_noise", "action_noise",
                           "sticky_actions", "action_delay", "dropped_obs", "dynamics")

#: id -> a zero-argument call of audit(); each covers other wrappers, agents or statistics.
CASES: dict[str, Callable[[], Any]] = {
    "controller-every-scenario": lambda: audit(
        balance, "CartPole-v1", EVERY_CARTPOLE_SCENARIO, episodes=5, seed=3),
    "fragile-schedule": lambda: audit(
        fragile, "CartPole-v1",
        [Schedule(speed=[1] * 5 + [4] * 3, obs_noise=[0.0] * 2 + [0.2] * 4, dropped=[False, True])],
        episodes=5, seed=11, batch_size=3),
    "ppo-default-suite-random-reference": lambda: audit(
        PPO, "CartPole-v1", episodes=4, seed=0, reference="random"),
    "pendulum-continuous-actions": lambda: audit(
        swing_up, "Pendulum-v1", ["jitter", "obs_noise", "action_noise", "dynamics"], episodes=4,
        seed=5, reference=-1500),
    # obs_noise in raw units, the established timing audit's semantics: the numbers this
    # case pinned before noise was sized by the spread, unchanged.
    "pendulum-absolute-noise": lambda: audit(
        swing_up, "Pendulum-v1", ["jitter", scenarios.get("obs_noise").with_params(scale="absolute"),
                                  "action_noise", "dynamics"], episodes=4, seed=5, reference=-1500),
    "random-agent-acrobot": lambda: audit(
        "random", "Acrobot-v1", ["sticky_actions", "dropped_obs", "action_delay"], episodes=3,
        seed=2, reference=-600, confidence=0.9),
}


def numbers(result: Any) -> dict[str, Any]:
    """What is pinned: per scenario, nominal included, the paired episodes and statistics."""
    out = {}
    for r in (result.nominal, *result.scenarios.values()):
        d = r.to_dict()
        out[r.name] = {k: d[k] for k in ("seeds", "returns", "env_steps", "lengths", "ratio",
                                         "ci_low", "ci_high", "p_value", "rating")}
    return out


@pytest.fixture(scope="module")
def pinned() -> dict[str, Any]:
    return json.loads(PIN.read_text(encoding="utf-8"))


def test_the_pin_covers_every_case(pinned):
    assert sorted(pinned["cases"]) == sorted(CASES)


@pytest.mark.parametrize("case", list(CASES))
def test_the_engine_gives_the_pinned_numbers_bit_for_bit(case, pinned):
    got = json.loads(json.dumps(numbers(CASES[case]())))  # the same float reprs as the file
    want = pinned["cases"][case]
    assert list(got) == list(want)
    for scenario in want:
        assert_pinned(got[scenario], want[scenario], pinned["float_stack"], f"{case}: {scenario}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: PYTHONPATH=tests python tests/auditing/test_engine_pin.py --write")
    PIN.parent.mkdir(exist_ok=True)
    cases = {case: numbers(run()) for case, run in CASES.items()}
    PIN.write_text(json.dumps({"float_stack": float_stack(), "cases": cases}, indent=1) + "\n",
                   encoding="utf-8")
    print(f"wrote {PIN}")
