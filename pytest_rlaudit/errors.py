"""Exceptions and warnings of pytest-rlaudit.

Each error says what went wrong and how to fix it; most also subclass the builtin
a user would expect (``ValueError`` for bad input, ``LookupError`` for unknown names),
so ``except ValueError`` keeps working.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "RLAuditError",
    "CouldNotAuditError",
    "AgentNotFoundError",
    "SpacesMismatchError",
    "AgentFileError",
    "UntrustedFileError",
    "InvalidArgumentError",
    "UnknownEnvError",
    "UnknownScenarioError",
    "PerturbationError",
    "BaselineError",
    "PolicyError",
    "NonFiniteOutputError",
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
    "DatasetError",
    "ReplayError",
]


class RLAuditError(Exception):
    """Base class of every pytest-rlaudit error."""


class CouldNotAuditError(RLAuditError):
    """The audit could not run at all: its agent file is missing, its env id unknown, or
    the agent was made for another env's spaces. A configuration error, not a finding
    about robustness: the plugin reports it as a usage or collection error (pytest's
    ERROR, exit 4 or 2), never as a failed robustness test (exit 1)."""


class InvalidArgumentError(RLAuditError, ValueError):
    """An argument of the wrong type or out of range (a seed, a confidence, an episode
    count, a scenario listed twice); the message names the argument, what it takes and
    what was given."""


class UnknownEnvError(CouldNotAuditError, LookupError):
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
    which of the two and how to seed it. Checked on nominal episode 0, run whole by the
    seed-replay check (on a batch: its first 16 steps before the audit, the whole of it
    in a row of the audit's batch) and compared with the audit's own run of it before
    anything is rated; randomness drawn only in later episodes, on a branch episode 0 never takes, or
    that changes no action of it, is not seen."""


class EnvContractError(RLAuditError, ValueError):
    """The env breaks the Gymnasium contract the audit relies on: observations of
    another shape than its observation space, or far outside its bounds; an
    observation space the runner cannot batch (``Tuple``); the old gym API
    (``step`` returning 4 values, ``reset`` the observation alone)."""


class PolicyError(RLAuditError, TypeError):
    """An agent that cannot be adapted to the batched policy protocol."""


class NonFiniteOutputError(RLAuditError, ValueError):
    """A policy's output (per-action scores, logits, actions) holds NaN or an infinite
    value: raised by ``act`` of the policies :func:`~pytest_rlaudit.as_policy` makes of
    torch modules and deployed files (an argmax would quietly turn NaN scores into action
    0). ``row`` is the first row of the batch with such an output, ``output`` that row's
    output. In an audit it is the ``__cause__`` of a :class:`RolloutError` that names the
    step and shows the observation."""

    def __init__(self, message: str, *, row: int, output: Any) -> None:
        super().__init__(message)
        self.row = row
        self.output = output

    def __reduce__(self) -> tuple[Any, ...]:  # raised in a worker process, pickled back
        return _non_finite, (str(self), self.row, self.output)


class AgentNotFoundError(CouldNotAuditError, PolicyError):
    """An agent path (a model ``.zip``, a zoo folder, a deployed file) that does not
    exist; the message names the folder a relative path was resolved against and the
    close matches in it."""


class SpacesMismatchError(CouldNotAuditError, PolicyError):
    """An agent made for other observation or action spaces than the env's: most likely
    audited on another env than the one it was trained on."""


class AgentFileError(CouldNotAuditError, PolicyError):
    """An agent's file that is not what it claims to be: a model zip that is damaged or
    not as SB3's ``save`` writes one, a member over its size limit
    (``RLAUDIT_MAX_MEMBER_MB``), a zoo ``config.yml`` that cannot be read. The message names
    the file, what is wrong with it and what to do."""


class UntrustedFileError(AgentFileError):
    """A shared file that would have code run or imported to load it (a zoo folder's
    ``config.yml`` naming an env wrapper that is not on the allow-list, a model whose own
    classes are pickled in it): a default load runs none of it. The message names the
    file, what was refused and ``trusted=True`` / ``--rl-trusted``, the full load, for
    files one trusts."""


class ReferenceScoreError(RLAuditError, ValueError):
    """The nominal return does not exceed the reference score, so no ratio is meaningful."""


class MisloadedAgentError(RLAuditError, ValueError):
    """The agent's nominal return is no better than a random policy's on the same seeds:
    most likely it was loaded without something it was trained with."""


class BaselineError(RLAuditError, ValueError):
    """A baseline file is missing, corrupt, of a newer schema, or cannot be paired."""


class RolloutError(RLAuditError, RuntimeError):
    """The agent or the env failed during a rollout.

    ``scenario``, ``episode`` and ``step`` say where; ``phase`` in which part of the audit
    (``"the seed-replay check"``, ``"calibration"``, ``"the random-policy reference"``...;
    None outside an audit), which the message then starts with; ``__cause__`` holds the
    original exception when there was one (raised in another process, it carries the
    traceback there as text in its own ``__cause__``).
    """

    def __init__(
        self, message: str, *, scenario: str | None = None, episode: int | None = None,
        step: int | None = None, phase: str | None = None,
    ) -> None:
        super().__init__(message)
        self.scenario = scenario
        self.episode = episode
        self.step = step
        self.phase = phase

    def during(self, phase: str) -> RolloutError:
        """Say the audit's ``phase`` it happened in, unless one is said already (the
        innermost phase wins); returns the error itself, to re-raise."""
        if self.phase is None:
            self.phase = phase
        return self

    def __str__(self) -> str:
        said = super().__str__()
        phase = getattr(self, "phase", None)  # unpickled errors get it back after __init__
        return f"during {phase}: {said}" if phase else said


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
        step: int | None = None, timeout: float | None = None, phase: str | None = None,
    ) -> None:
        super().__init__(message, scenario=scenario, episode=episode, step=step, phase=phase)
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

    #: Whether the error it repeats is a :class:`CouldNotAuditError` (reported as such).
    could_not_audit: bool = False


class RobustnessError(AssertionError):
    """An agent missed a robustness threshold (an ``AssertionError``: a failed test, not
    a broken one). ``result`` holds the scenario's numbers (a
    :class:`~pytest_rlaudit.auditing.results.ScenarioResult`), when there are some."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class DatasetError(CouldNotAuditError, ValueError):
    """A recording that cannot be replayed: a missing or truncated file, no episodes, a
    column or key it lacks, NaN in its observations, or observations or actions that do
    not fit the candidate's spaces. A finding about the files, not about the agent: the
    plugin reports it as an error, never as a failed replay. The message names the file
    and what to do."""


class ReplayError(RLAuditError, AssertionError):
    """A candidate acted further from a recording than a replay test allows
    (:func:`~pytest_rlaudit.verdicts.replays.assert_replay_close`): a failed test, with
    the numbers in ``result`` (a :class:`~pytest_rlaudit.auditing.replays.ReplayResult`)."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


def _non_finite(message: str, row: int, output: Any) -> NonFiniteOutputError:
    return NonFiniteOutputError(message, row=row, output=output)
