"""Bad arguments to the verbs are refused before any work, each with an
InvalidArgumentError (an RLAuditError and a ValueError) that names the argument, what it
takes and what was given: never a raw OverflowError, TypeError or MemoryError."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_rlaudit import InvalidArgumentError, RLAuditError, audit, check_robust, tolerance
from pytest_rlaudit.rollout.budget import BYTES_PER_EPISODE, check_budget
from pytest_rlaudit.stats import paired_ratio_ci


def zeros(obs: np.ndarray) -> np.ndarray:
    return np.zeros(len(obs), dtype=np.int64)


@pytest.mark.parametrize(("verb", "kwargs", "fragment"), [
    (audit, {"seed": 2**70}, "seed must be an integer in [0, 9223372036854775805] (episode i "
                             "resets with env seed seed + i, a 64-bit integer), got 2**70"),
    (audit, {"seed": 2**63 - 2}, "a 64-bit integer"),  # the last episode's seed overflows
    (check_robust, {"seed": 2**64}, "a 64-bit integer"),
    (audit, {"confidence": "0.9"}, "confidence must be a finite number in (0, 1), got '0.9'"),
    (check_robust, {"confidence": "0.9"}, "confidence must be a finite number in (0, 1)"),
    (audit, {"confidence": float("nan")}, "confidence must be a finite number in (0, 1), got nan"),
])
def test_a_bad_seed_or_confidence_is_refused_naming_it(verb, kwargs, fragment):
    fragment = fragment.replace("2**70", str(2**70))
    args = ("delay",) if verb is check_robust else ()
    with pytest.raises(InvalidArgumentError) as caught:
        verb(zeros, "CartPole-v1", *args, episodes=3, **kwargs)
    assert fragment in str(caught.value)
    assert isinstance(caught.value, RLAuditError) and isinstance(caught.value, ValueError)


def test_the_largest_seed_allowed_runs_and_pairs(controller):
    result = audit(controller, "CartPole-v1", scenarios="delay", episodes=3, seed=2**63 - 3)
    assert list(result.nominal.seeds) == [2**63 - 3, 2**63 - 2, 2**63 - 1]
    assert result.to_dict()["nominal"]["seeds"][-1] == 2**63 - 1


def test_the_stats_take_the_same_wording():
    with pytest.raises(InvalidArgumentError, match=r"confidence must be a finite number in \(0, 1\)"):
        paired_ratio_ci([1.0, 2.0], [1.0, 2.0], confidence="0.95")


@pytest.mark.parametrize("verb", [audit, check_robust, tolerance])
def test_an_episode_count_beyond_memory_is_refused_up_front_with_the_figure(verb):
    args = ("delay",) if verb is not audit else ()
    with pytest.raises(InvalidArgumentError) as caught:
        verb(zeros, "CartPole-v1", *args, episodes=10**12)
    message = str(caught.value)
    assert f"episodes={10**12} over " in message
    assert "of memory for their results alone" in message and "available" in message
    assert "Audit at most " in message and "target_ci_width" in message


def test_the_budget_refuses_by_the_memory_it_is_given():
    runs, have = 7, 64 * 2**20  # 64 MB: half of it holds 4681 episodes of each run
    fits = int(0.5 * have / BYTES_PER_EPISODE / runs)
    check_budget(fits, runs, available=have)
    with pytest.raises(InvalidArgumentError, match=f"Audit at most {fits:,} episodes here"):
        check_budget(fits + 1, runs, available=have)
