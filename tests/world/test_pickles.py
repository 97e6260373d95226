"""Scenarios and schedules pickle: they travel to worker processes, SubprocVecEnv and Ray.

``Scenario`` lives in ``pytest_rlaudit.world.scenario`` since the registry was split from
it (issue 26); pickles that name it at its old home, ``pytest_rlaudit.world.scenarios``,
still load, and ``Schedule`` keeps its module and its slots (its pickled state)."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys

import pytest

from pytest_rlaudit import Scenario, Schedule, scenarios
from pytest_rlaudit.world import scenarios as world_scenarios
from pytest_rlaudit.world import schedules as world_schedules

SCHEDULES = [
    Schedule(),
    Schedule(speed=3),
    Schedule.spike(at=20, duration=20, speed=5),
    Schedule.ramp(at=5, duration=4, speed=5, obs_noise=0.2),
    Schedule.periodic(period=50, duration=5, delay=2),
    Schedule(dropped=[False] * 30 + [True] * 2, action_noise=[0.0, 0.1, ...]),
]

# Written by the code before the split: [Scenario("old", "custom", None, {}, "pickled
# before the split"), Schedule.spike(at=2, duration=3, speed=4)], pickle protocol 4.
BEFORE_THE_SPLIT = (
    b"\x80\x04\x95\xdc\x00\x00\x00\x00\x00\x00\x00]\x94(\x8c\x1epytest_rlaudit.world.scenar"
    b"ios\x94\x8c\x08Scenario\x94\x93\x94(\x8c\x03old\x94\x8c\x06custom\x94N}\x94\x8c\x18pick"
    b"led before the split\x94Nt\x94R\x94\x8c\x1epytest_rlaudit.world.schedules\x94\x8c\x08Sch"
    b"edule\x94\x93\x94)\x81\x94N}\x94(\x8c\x04_key\x94\x8c\x05speed\x94K\x01K\x02\x86\x94K\x04"
    b"K\x03\x86\x94\x86\x94\x86\x94\x85\x94N\x86\x94\x8c\x05_runs\x94}\x94h\x10h\x13s\x8c\x06p"
    b"eriod\x94Nu\x86\x94be."
)


def _scenarios() -> list[Scenario]:
    made = [scenarios.get(name) for name in scenarios.names()]
    made += [Scenario.from_schedule(s, f"schedule_{i}") for i, s in enumerate(SCHEDULES)]
    made += [scenarios.get("jitter").with_params(jitter=2),
             scenarios.get("obs_noise").calibrated((0.5, 0.3, 0.05, 0.4)),
             *scenarios.preset("severe")]
    return made


@pytest.mark.parametrize("protocol", [2, pickle.DEFAULT_PROTOCOL, pickle.HIGHEST_PROTOCOL])
def test_every_registered_and_built_scenario_survives_a_pickle_round_trip(protocol):
    for scenario in _scenarios():
        back = pickle.loads(pickle.dumps(scenario, protocol=protocol))
        assert type(back) is Scenario
        assert back == scenario and hash(back) == hash(scenario)
        assert repr(back) == repr(scenario)
        assert back.description == scenario.description
        assert back.timeline == scenario.timeline
        assert back.schedule == scenario.schedule
        assert copy.deepcopy(scenario) == scenario


@pytest.mark.parametrize("protocol", [2, pickle.DEFAULT_PROTOCOL, pickle.HIGHEST_PROTOCOL])
def test_schedules_survive_a_pickle_round_trip(protocol):
    for schedule in SCHEDULES:
        back = pickle.loads(pickle.dumps(schedule, protocol=protocol))
        assert type(back) is Schedule
        assert back == schedule and hash(back) == hash(schedule)
        assert repr(back) == repr(schedule) and back.describe() == schedule.describe()
        assert back.values("speed", 60) == schedule.values("speed", 60)


def test_the_classes_stay_importable_from_their_old_homes():
    assert world_scenarios.Scenario is Scenario
    assert world_schedules.Schedule is Schedule
    assert Schedule.__module__ == "pytest_rlaudit.world.schedules"
    assert Scenario.__module__ == "pytest_rlaudit.world.scenario"
    assert Scenario.__qualname__ == "Scenario" and Schedule.__qualname__ == "Schedule"


def test_a_pickle_written_before_the_split_still_loads():
    scenario, schedule = pickle.loads(BEFORE_THE_SPLIT)
    assert scenario == Scenario("old", "custom", None, {}, "pickled before the split")
    assert scenario.description == "pickled before the split"
    assert schedule == Schedule.spike(at=2, duration=3, speed=4)
    assert repr(schedule) == "Schedule(speed=[1]*2 + [4]*3)"


def test_a_fresh_interpreter_loads_them_importing_nothing_first():
    # a worker process unpickles before it imports anything of ours: the module a pickle
    # names must import on its own (no import cycle between scenario, schedules, registry)
    payload = pickle.dumps([scenarios.get("spike"), Scenario.from_schedule(SCHEDULES[4], "p")])
    code = ("import pickle, sys; s = pickle.loads(sys.stdin.buffer.read()); "
            "print(repr(s[0].schedule), repr(s[1].schedule), type(s[0]).__module__)")
    out = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True,
                         check=True, timeout=120).stdout.decode()
    assert out.split() == ["Schedule(speed=[1]*20", "+", "[5]*20)", "Schedule(delay=[2]*5,",
                           "period=50)", "pytest_rlaudit.world.scenario"]
