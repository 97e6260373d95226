"""Exceptions and warnings of pytest-rlaudit.

Each error says what went wrong and how to fix it; most also subclass the builtin
a user would expect (``ValueError`` for bad input, ``LookupError`` for unknown names),
so ``except ValueError`` keeps working.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "RLAuditError",
    "InvalidArgumentError",
    "UnknownEnvError",
    "UnknownScenarioError",
    "PerturbationError",
    "BaselineError",
    "PolicyError",
    "ReferenceScoreError",
    "RolloutError",
    "RolloutTimeoutError",
    "RolloutCapWarning",
    "AgentWarning",
    "MisloadedAgentError",
    "NonReproducibleError",
    "EnvContractError",
    "RepeatedError",
    "RobustnessError",
]


class RLAuditError(Exception):
    """Base class of every pytest-rlaudit error."""


class InvalidArgumentError(RLAuditError, ValueError):
    """An argument of the wrong type or out of range (a seed, a confidence, an episode
    count, a scenario listed twice); the message names the argument, what it takes and
    what was given."""


class UnknownEnvError(RLAuditError, LookupError):
    """A Gymnasium id that is not registered."""


class UnknownScenarioError(RLAuditError, LookupError):
    """A scenario name that is not in the registry."""


class PerturbationError(RLAuditError, ValueError):
    """A perturbation wrapper was given arguments it cannot honour, or a custom
    perturbation did not return a wrapped env."""


class NonReproducibleError(RLAuditError, ValueError):
    """Episodes do not replay under their seeds: the env ignores ``reset(seed=...)`` or
    the agent draws randomness outside the audit's seeds, so paired episodes would not
    be paired and two identical audits would give different ratios. The message names
    which of the two and how to seed it."""


class EnvContractError(RLAuditError, ValueError):
    """The env breaks the Gymnasium contract the audit relies on: observations of
    another shape than its observation space, or far outside its bounds; an
    observation space the runner cannot batch (``Tuple``); the old gym API
    (``step`` returning 4 values, ``reset`` the observation alone)."""


class PolicyError(RLAuditError, TypeError):
    """An agent that cannot be adapted to the batched policy protocol."""


class ReferenceScoreError(RLAuditError, ValueError):
    """The nominal return does not exceed the reference score, so no ratio is meaningful."""


class MisloadedAgentError(RLAuditError, ValueError):
    """The agent's nominal return is no better than a random policy's on the same seeds:
    most likely it was loaded without something it was trained with."""


class BaselineError(RLAuditError, ValueError):
    """A baseline file is missing, corrupt, of a newer schema, or cannot be paired."""


class RolloutError(RLAuditError, RuntimeError):
    """The agent or the env failed during a rollout.

    ``scenario``, ``episode`` and ``step`` say where; ``__cause__`` holds the original
    exception when there was one.
    """

    def __init__(
        self, message: str, *, scenario: str | None = None, episode: int | None = None,
        step: int | None = None,
    ) -> None:
        super().__init__(message)
        self.scenario = scenario
        self.episode = episode
        self.step = step


class RolloutTimeoutError(RolloutError, TimeoutError):
    """An audit ran past its ``timeout`` (``--rl-timeout``), or one env step, reset or
    policy call ran past the bound on one call (``call_timeout``, ``--rl-call-timeout``,
    60 s by default, even with no ``timeout``; the message then begins with the call:
    ``env.step``, ``env.reset`` or ``the policy call``, and says how to change the bound).

    ``scenario``, ``episode`` and ``step`` say where it was stuck (None where that could
    not be told, e.g. a Ray actor that did not answer), ``timeout`` the limit in seconds.
    A :class:`RolloutError` and a builtin ``TimeoutError``, so either ``except`` catches it.
    """

    def __init__(
        self, message: str, *, scenario: str | None = None, episode: int | None = None,
        step: int | None = None, timeout: float | None = None,
    ) -> None:
        super().__init__(message, scenario=scenario, episode=episode, step=step)
        self.timeout = timeout


class RolloutCapWarning(RuntimeWarning):
    """Episodes were cut at the cap on agent steps per episode."""


class AgentWarning(UserWarning):
    """Something about the agent worth a look that does not stop the audit: an env other
    than the one it was trained on, a saved setting that could not be applied."""


class RepeatedError(RLAuditError):
    """An error the plugin already reported for another test of the run, word for word
    (an agent that does not load fails every scenario alike): it names that test, whose
    failure says what went wrong and what to do."""


class RobustnessError(AssertionError):
    """An agent missed a robustness threshold (an ``AssertionError``: a failed test, not
    a broken one). ``result`` holds the scenario's numbers (a
    :class:`~pytest_rlaudit.auditing.results.ScenarioResult`), when there are some."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result
