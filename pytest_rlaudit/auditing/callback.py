"""``RobustnessCallback``: audits of the model under training, every N timesteps, logged
through stable-baselines3's own logger (so TensorBoard, CSV, JSON, W&B and MLflow outputs
follow the logger's configuration). Public as ``pytest_rlaudit.sb3.RobustnessCallback``.

This module imports stable-baselines3; nothing imports it until asked for.

>>> from stable_baselines3 import PPO
>>> callback = RobustnessCallback("CartPole-v1", scenarios=["delay"], audit_freq=64, episodes=2)
>>> model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, policy_kwargs=dict(net_arch=[8]), seed=0)
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     _ = model.learn(128, callback=callback)
>>> [(steps, why.split(":")[0]) for steps, why in callback.skipped]  # untrained: near random
[(64, 'agent PPO does no better than random actions'), (128, 'agent PPO does no better than random actions')]
>>> print(caught[0].message)
RobustnessCallback: no audit of this training measured robustness; the last one, at 128
timesteps: agent PPO does no better than random actions: ... would measure nothing.
>>> RobustnessCallback("CartPole-v1", audit_freq=0)
Traceback (most recent call last):
...
pytest_rlaudit.errors.InvalidArgumentError: audit_freq must be an integer >= 1 (timesteps between audits), ...
"""

from __future__ import annotations

import contextlib
import math
import random
import sys
import warnings
from collections.abc import Iterable, Iterator
from types import FrameType
from typing import Any

import numpy as np

from .._checks import confidence as check_confidence
from .._checks import integer
from .._optional import require
from ..errors import AgentWarning, MisloadedAgentError, ReferenceScoreError
from ..rollout.runner import check_workers
from ..stats import INCONCLUSIVE, RATINGS, Thresholds
from ..world import scenarios as registry
from ..world.agents import Policy, as_policy
from ..world.envs import AuditEnv, EnvLike, env_spec
from ..world.scenarios import NOMINAL, ScenarioLike
from .reference import check_reference_arg
from .results import AuditResult, audit, check_episodes

__all__ = ["RobustnessCallback", "RATING_SCORES", "training_state_kept"]

_callbacks = require("stable_baselines3.common.callbacks", "pytest_rlaudit.sb3")
_logger = require("stable_baselines3.common.logger", "pytest_rlaudit.sb3")
_vec_env = require("stable_baselines3.common.vec_env", "pytest_rlaudit.sb3")

#: Each rating as the number logged beside it (TensorBoard plots scalars only): PASS 3,
#: MILD 2, DEGRADED 1, FAIL 0, so higher is better as with the ratio; INCONCLUSIVE (a
#: model that does not yet clearly beat the reference) NaN: no score, a gap in the plot.
RATING_SCORES: dict[str, float] = {**{name: len(RATINGS) - 1 - i for i, name in enumerate(RATINGS)},
                                   INCONCLUSIVE: float("nan")}

#: Why an audit of a model in training may have no ratio yet: it plays no better than
#: random actions, or its nominal return is not above the reference score.
UNMEASURABLE = (MisloadedAgentError, ReferenceScoreError)


class RobustnessCallback(_callbacks.BaseCallback):  # type: ignore[name-defined]
    """Audit the model being trained every ``audit_freq`` timesteps and log the results.

    - ``env``: a Gymnasium id, an ``EnvSpec`` or a zero-argument factory, as
      :func:`~pytest_rlaudit.audit` takes (the audit makes its own envs; the training env
      is never stepped). ``scenarios``, ``episodes``, ``seed``, ``reference``,
      ``thresholds``, ``workers``, ``confidence``: as :func:`~pytest_rlaudit.audit`
      takes them (default suite: deployment + stress). Every audit uses the same seed,
      so audits differ only by the model.
    - ``audit_freq`` counts timesteps (``model.num_timesteps``, summed over the envs of a
      vectorised env, as ``learn(total_timesteps)`` counts them): an audit runs at the
      first step at or past each multiple of ``audit_freq``, whatever ``n_envs``. (SB3's
      ``EvalCallback`` counts calls instead, so its ``eval_freq`` means ``n_envs`` times
      as many timesteps.)
    - ``final_audit``: audit the model ``learn()`` returns, at the end of training; a due
      audit in training's last stretch (past ``total_timesteps``, while the last rollout
      fills) is left to it, so no timestep is logged twice.
    - ``deterministic``: actions as ``model.predict(deterministic=...)``.
    - ``verbose``: 1 prints a line per audit, 2 the audit's table.

    Logged under ``log_prefix`` (``robustness``), then dumped at ``num_timesteps`` as
    ``EvalCallback`` does: ``<scenario>/ratio``, ``<scenario>/ci_low``,
    ``<scenario>/ci_high``, ``<scenario>/rating`` (a number: :data:`RATING_SCORES`),
    ``<scenario>/rating_name`` (the text; not sent to TensorBoard), ``nominal_return``,
    ``deployment_score`` and ``stress_score`` (the worst ratio of each category audited)
    with ``deployment_rating`` and ``stress_rating``, and ``measured`` (1, or 0 for an
    audit with no ratio, below).

    Early in training the model is expected to play no better than random actions, and
    :func:`~pytest_rlaudit.audit` then refuses a ratio, whatever the reference
    (``MisloadedAgentError``; or ``ReferenceScoreError``, a nominal return not above the
    reference). The callback does not stop training for that: it logs ``measured`` 0,
    keeps ``(num_timesteps, why)`` in ``skipped`` (printed when ``verbose``) and audits
    again when the next audit is due. If no audit of a training measured anything, the
    end of training warns (``AgentWarning``).

    An audit leaves training as it found it: the training env is not touched, the
    global random streams (python, numpy, torch) and the policy's train/eval modes are
    restored (:func:`training_state_kept`), and a ``VecNormalize``'s statistics are
    copied (the training one keeps updating). Two seeded trainings, with and without
    the callback, end with the same weights.

    ``history``: ``[(num_timesteps, AuditResult), ...]``; ``last_result``: the latest
    result (None before the first ratio). Bad arguments fail here, not at the first
    audit (see the module's example); an env the model does not fit, and scenario names
    too long for SB3's stdout table, fail at the start of ``learn()``.
    """

    def __init__(
        self,
        env: EnvLike,
        scenarios: ScenarioLike | Iterable[ScenarioLike] | None = None,
        audit_freq: int = 10_000,
        episodes: int = 10,
        seed: int = 0,
        reference: float | str = 0,
        thresholds: Thresholds | None = None,
        workers: int | str | None = None,
        verbose: int = 0,
        log_prefix: str = "robustness",
        *,
        confidence: float = 0.95,
        deterministic: bool = True,
        final_audit: bool = True,
    ) -> None:
        super().__init__(verbose=verbose)
        self.audit_freq = integer("audit_freq", audit_freq, minimum=1,
                                  why=" (timesteps between audits)")
        self.episodes = check_episodes(episodes)
        self.seed = integer("seed", seed, minimum=0)
        check_reference_arg(reference)
        self.reference = reference
        if thresholds is not None and not isinstance(thresholds, Thresholds):
            raise TypeError(f"thresholds must be a pytest_rlaudit.stats.Thresholds or None, "
                            f"got {type(thresholds).__name__}")
        self.thresholds = thresholds
        self.workers = check_workers(workers)
        self.confidence = check_confidence(confidence)
        if not isinstance(log_prefix, str) or not log_prefix.strip("/"):
            raise ValueError(f"log_prefix must be a non-empty string, got {log_prefix!r}")
        self.log_prefix = log_prefix.strip("/")
        self.deterministic = bool(deterministic)
        self.final_audit = bool(final_audit)
        self.env = _audit_env(env)
        self.scenarios = tuple(s for s in registry.resolve(scenarios) if s.name != NOMINAL.name)
        if not self.scenarios:
            raise ValueError("scenarios names none to audit; name at least one, or pass None "
                             "for the default suite")
        registry.check_applicable(self.scenarios, self.env.make)
        self.history: list[tuple[int, AuditResult]] = []
        self.skipped: list[tuple[int, str]] = []
        self.last_result: AuditResult | None = None
        self._last_due = 0

    def keys(self) -> list[str]:
        """Every key an audit with ratios logs.

        >>> RobustnessCallback("CartPole-v1", scenarios="delay").keys()[:5]
        ['robustness/delay/ratio', 'robustness/delay/ci_low', 'robustness/delay/ci_high',
         'robustness/delay/rating', 'robustness/delay/rating_name']
        """
        p = self.log_prefix
        per_scenario = [f"{p}/{s.name}/{k}" for s in self.scenarios
                        for k in ("ratio", "ci_low", "ci_high", "rating", "rating_name")]
        categories = sorted({s.category for s in self.scenarios} & {"deployment", "stress"})
        return [*per_scenario, f"{p}/nominal_return", f"{p}/measured",
                *(f"{p}/{c}_{k}" for c in categories for k in ("score", "rating"))]

    def _init_callback(self) -> None:
        # At the start of learn(), not at the first audit: an env the model does not fit,
        # and log keys SB3's stdout table would truncate alike (it raises at dump).
        probe = self.env.make()
        try:
            self._policy().bind(probe.observation_space, probe.action_space)
        finally:
            probe.close()
        _check_stdout_keys(self.logger, self.keys())

    def _on_training_start(self) -> None:
        self._last_due = self.num_timesteps

    def _on_step(self) -> bool:
        # An audit is due when num_timesteps crosses a multiple of audit_freq.
        if self.num_timesteps // self.audit_freq > self._last_due // self.audit_freq:
            self._last_due = self.num_timesteps
            total = getattr(self.model, "_total_timesteps", None) or math.inf
            if not (self.final_audit and self.num_timesteps >= total):
                self.run_audit()
        return True

    def _on_training_end(self) -> None:
        if self.final_audit:
            self.run_audit()
        if self.skipped and not self.history:
            steps, why = self.skipped[-1]
            warnings.warn(f"RobustnessCallback: no audit of this training measured robustness; "
                          f"the last one, at {steps} timesteps: {why}", AgentWarning,
                          stacklevel=_outside_level())

    def run_audit(self) -> AuditResult | None:
        """Audit the model now, log the results and dump them at ``num_timesteps``; the
        result, or None when the model has no ratio yet (see the class)."""
        steps = self.num_timesteps
        try:
            with training_state_kept(self.model):
                result = audit(self._policy(), self.env, self.scenarios, episodes=self.episodes,
                               seed=self.seed, reference=self.reference,
                               confidence=self.confidence, thresholds=self.thresholds,
                               workers=self.workers)
        except UNMEASURABLE as exc:
            why = _brief(exc)
            self.skipped.append((steps, why))
            if self.verbose >= 1:
                print(f"Robustness audit at {steps} timesteps: no ratio yet ({why})")
            self.logger.record(f"{self.log_prefix}/measured", 0.0)
            self._dump()
            return None
        self.history.append((steps, result))
        self.last_result = result
        self._log(result)
        if self.verbose >= 1:
            ratios = ", ".join(f"{r.name} {r.ratio:.2f} {r.rating}" for r in result)
            print(f"Robustness audit at {steps} timesteps: nominal return "
                  f"{result.nominal.mean_return:.1f}; {ratios}")
            if result.inconclusive is not None:  # a rating without its reason misleads
                print(f"  {result.inconclusive}")
        if self.verbose >= 2:
            print(result)
        self._dump()
        return result

    def _policy(self) -> Policy:
        """The model as a policy; a VecNormalize of its env comes along as a copy
        (:func:`~pytest_rlaudit.world.agents.preprocess.load_vec_normalize`), so the
        training one keeps updating."""
        return as_policy(self.model, deterministic=self.deterministic)

    def _log(self, result: AuditResult) -> None:
        p, record = self.log_prefix, self.logger.record
        for r in result:
            record(f"{p}/{r.name}/ratio", float(r.ratio))
            record(f"{p}/{r.name}/ci_low", float(r.ci[0]))
            record(f"{p}/{r.name}/ci_high", float(r.ci[1]))
            record(f"{p}/{r.name}/rating", RATING_SCORES[r.rating])
            record(f"{p}/{r.name}/rating_name", r.rating, exclude="tensorboard")
        record(f"{p}/nominal_return", result.nominal.mean_return)
        record(f"{p}/measured", 1.0)
        for category, agg in (("deployment", result.deployment), ("stress", result.stress)):
            if agg is not None:
                record(f"{p}/{category}_score", float(agg.score))
                record(f"{p}/{category}_rating", RATING_SCORES[agg.rating])

    def _dump(self) -> None:
        # As EvalCallback: the CSV and stdout outputs get the step as a column.
        self.logger.record("time/total_timesteps", self.num_timesteps, exclude="tensorboard")
        self.logger.dump(self.num_timesteps)


def _brief(exc: Exception) -> str:
    """Why an audit had no ratio, without the causes of a misloaded agent that
    ``MisloadedAgentError`` lists (a model in training was not loaded at all): its first
    sentence. A ``ReferenceScoreError`` keeps its fix (a reference to measure from)."""
    text = str(exc)
    return text if isinstance(exc, ReferenceScoreError) else text.split(". ")[0] + "."


def _outside_level() -> int:
    """The ``stacklevel`` of the first frame outside SB3 and this package: the user's
    ``learn()`` call, however deep the algorithm's own ``learn`` chain is."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith(
            ("stable_baselines3", "sb3_contrib", "pytest_rlaudit")):
        frame, level = frame.f_back, level + 1
    return level


def _audit_env(env: Any) -> AuditEnv:
    """``env`` as the audit takes it, checked now; a VecEnv is refused with the fix."""
    if isinstance(env, _vec_env.VecEnv):
        raise TypeError("env is a VecEnv; the audit makes its own envs, one per episode slot: "
                        "pass the Gymnasium id (or an EnvSpec, or a zero-argument factory) of "
                        "the env it trains on, e.g. RobustnessCallback('CartPole-v1')")
    return env_spec(env)


def _check_stdout_keys(logger: Any, keys: list[str]) -> None:
    """Raise ValueError if SB3's stdout/log table would cut two of ``keys`` to the same
    text: its ``dump`` raises then, in the middle of training.

    >>> import sys
    >>> stdout = _logger.Logger(None, [_logger.HumanOutputFormat(sys.stdout)])
    >>> _check_stdout_keys(stdout, ["robustness/" + "x" * 40 + "/ci_low",
    ...                             "robustness/" + "x" * 40 + "/ci_high"])
    Traceback (most recent call last):
    ...
    ValueError: SB3's stdout/log output shows keys up to 36 characters and would cut ...
    """
    for output in getattr(logger, "output_formats", ()):
        if not isinstance(output, _logger.HumanOutputFormat):
            continue
        width = output.max_length
        seen: dict[tuple[str, str], str] = {}
        for key in keys:
            # The table's layout: the text up to the first "/" heads a group, the rest is
            # indented by three spaces beneath it.
            tag = key[: key.find("/") + 1] if key.find("/") > 0 else ""
            shown = f"   {key[len(tag):]}" if tag else key
            cut = shown if len(shown) <= width else shown[: width - 3] + "..."
            if (tag, cut) in seen:
                raise ValueError(
                    f"SB3's stdout/log output shows keys up to {width} characters and would cut "
                    f"{seen[tag, cut]!r} and {key!r} alike (it then stops with an error): "
                    "give the scenario a shorter name (Schedule.as_scenario('short_name')), a "
                    "shorter log_prefix, or the output a larger max_length")
            seen[tag, cut] = key


@contextlib.contextmanager
def training_state_kept(model: Any) -> Iterator[None]:
    """Run the block, then restore what training reads and an audit might change: the
    python, numpy and torch global random states (CUDA ones too, once CUDA is in use)
    and the train/eval mode of each module of ``model.policy`` (or ``model``).

    >>> import torch
    >>> net = torch.nn.Linear(2, 2).train()
    >>> before = torch.get_rng_state()
    >>> with training_state_kept(net):
    ...     _ = torch.rand(3), np.random.rand(), net.eval()
    >>> net.training, torch.equal(before, torch.get_rng_state())
    (True, True)
    """
    import torch

    python_state, numpy_state = random.getstate(), np.random.get_state()
    modules = getattr(model, "policy", model).modules()
    modes = [(m, m.training) for m in modules]
    initialized = torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
    cuda = list(range(torch.cuda.device_count())) if initialized else []
    try:
        with torch.random.fork_rng(devices=cuda):
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        for module, training in modes:
            module.training = training  # each one's own flag: .train() would recurse
