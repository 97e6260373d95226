"""The audits of the run's items: what the ``rl_audit`` fixture and the zero-config items
ask for.

:class:`ItemAudits` loads each agent once, merges an item's thresholds (marker over
command line over ini), turns the run's options into the engine's
:class:`~pytest_rlaudit.auditing.settings.AuditSettings`, has the engine measure the
scenario (one cache per process: the nominal and reference rollouts of an agent run once
for all its scenarios), has :mod:`pytest_rlaudit.verdicts` judge it, and leaves the
item's record in its stash for the session's hooks to report. It wires; the engine
measures and the verdicts judge.

Loading it imports nothing heavy; the engine is imported when an audit first runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .options import Settings
from .stash_keys import RECORD_KEY, SAME_AS_KEY

if TYPE_CHECKING:
    from ..auditing.records import Gate
    from ..auditing.settings import AuditSettings
    from ..world.scenarios import Scenario
    from .runs import RunsAudit

__all__ = ["ItemAudits", "RECORD_KEY", "SAME_AS_KEY"]



class ItemAudits:
    """This process's audits of the run's items (see the module)."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.cache: dict[Any, Any] = {}  # nominal and reference rollouts, per process
        self._policies: dict[Any, tuple[Any, Any]] = {}
        self._default_env: Any = None
        self._raised: dict[tuple[type, str], str] = {}  # errors of run(): the first item
        self.runs: RunsAudit | None = None  # --rl-agent a glob of 2+ training runs (.runs)

    # ---------------------------------------------------------------- what is audited

    def default_agent(self) -> Any:
        """--rl-agent, loaded once (a usage failure without one)."""
        if not self.settings.agent:
            pytest.fail("no agent to audit: pass --rl-agent PATH_OR_IMPORT (or set rl_agent "
                        "in the ini file), or override the rl_agent fixture in conftest.py",
                        pytrace=False)
        if self.runs is not None:  # one agent asked for, and --rl-agent is several runs
            self.runs.refuse()
        return self.policy_for(self.settings.agent, env=self.settings.env)

    def check_agent(self) -> None:
        """--rl-agent naming a path that does not exist: a usage error now (exit 4), not
        one failed test per scenario (a CI job that forgot to fetch its model)."""
        if not self.settings.agent or self.runs is not None:
            return
        from ..errors import AgentNotFoundError
        from ..world.agents.adapt import check_agent_path

        try:
            check_agent_path(self.settings.agent)
        except AgentNotFoundError as exc:
            raise pytest.UsageError(f"--rl-agent: {exc}") from None

    def env_problem(self) -> str | None:
        """Why --rl-env cannot be made (an id gymnasium does not know, a missing
        dependency), or None. Asked at collection, once the repo's conftests and test
        modules have registered their ids; another error making the env is left to the
        tests that use it, which report it."""
        if not self.settings.env or self._default_env is not None:
            return None
        from ..errors import UnknownEnvError

        try:
            self.default_env()
        except UnknownEnvError as exc:
            return f"--rl-env: {exc}"
        except Exception:  # raised again, with its test, where the env is used
            return None
        return None

    def default_env(self) -> Any:
        """--rl-env as an AuditEnv (what an agent needs of it is applied when it is run)."""
        if not self.settings.env:
            needs = self.default_agent().env_needs if self.settings.agent else None
            trained_on = getattr(needs, "trained_on", None)
            pytest.fail("no env to audit on: pass --rl-env ID (or set rl_env in the ini "
                        "file), or override the rl_env fixture in conftest.py"
                        + (f"; the agent was trained on {trained_on}" if trained_on else ""),
                        pytrace=False)
        if self._default_env is None:
            from ..world.envs import env_spec

            self._default_env = env_spec(self.settings.env)
        return self._default_env

    def policy_for(self, agent: Any, env: Any = None) -> Any:
        """One policy adapter per agent object for the whole run (the nominal cache keys on
        it); agents given by path or import string are loaded once, with --rl-algo,
        --rl-vec-normalize, --rl-stochastic, --rl-deterministic, --rl-agent-name and
        --rl-trusted when they are --rl-agent."""
        key = agent if isinstance(agent, str) else id(agent)
        if key not in self._policies:
            from ..errors import PolicyError
            from ..world.agents import as_policy

            options: dict[str, Any] = {}
            if isinstance(agent, str) and agent == self.settings.agent:
                given = self.settings.vec_normalize
                options = {"algo": self.settings.algo,
                           # neither flag: the saved run's convention (as_policy's None)
                           "deterministic": (False if self.settings.stochastic else
                                             True if self.settings.deterministic else None),
                           "name": self.settings.agent_name,
                           "trusted": self.settings.trusted,
                           "vec_normalize": "auto" if given is None else (
                               None if given.lower() == "none" else given)}
            try:
                self._policies[key] = (agent, as_policy(agent, env=env, **options))
            except PolicyError as exc:
                # an agent that does not load (a damaged or refused file, a config it cannot
                # read) could not be audited: pytest's ERROR, never a robustness FAILED
                exc.could_not_audit = True  # type: ignore[attr-defined]
                raise
        return self._policies[key][1]

    def gate(self, item: pytest.Item, scenario: Scenario) -> Gate | None:
        """Thresholds for ``item``: marker > command line > ini; MILD when none is set.
        Stress scenarios are only reported unless --rl-fail-stress or a marker gates them."""
        from .markers import threshold_marker

        marker = item.get_closest_marker("rl_threshold")
        explicit = threshold_marker(marker) if marker is not None else None
        if explicit is None and scenario.category == "stress" and not self.settings.fail_stress:
            return None
        gate: Gate = {"min_ratio": self.settings.min_ratio,
                      "min_rating": self.settings.min_rating, "mode": self.settings.mode}
        if marker is not None and explicit is not None:
            given = dict(zip(("min_ratio", "min_rating", "mode"), marker.args, strict=False))
            given.update(marker.kwargs)
            gate.update({k: explicit[k] for k in given})  # type: ignore[typeddict-item]
        if gate["min_ratio"] is None and gate["min_rating"] is None:
            gate["min_rating"] = "MILD"
        return gate

    def audit_settings(self, episodes: int) -> AuditSettings:
        """The run's options as the engine's settings, for ``episodes`` per round."""
        from ..auditing.settings import AuditSettings

        s = self.settings
        return AuditSettings(episodes=episodes, seed=s.seed, reference=s.reference,
                             batch_size=s.batch_size, workers=s.workers, backend=s.backend,
                             timeout=s.timeout, call_timeout=s.call_timeout)

    def attribute(self, item: pytest.Item, scenario: Scenario, policy: Any, spec: Any,
                  settings: AuditSettings, result: Any) -> Any:
        """The :class:`~pytest_rlaudit.auditing.attribution.Attribution` of ``scenario``'s
        failure on ``item`` (its audit's ``result``), when --rl-attribute or an
        ``rl_attribute`` marker asks for it and the scenario acts on observations only;
        else None. On the audit's own engine cache and episodes: neither its nominal
        episodes nor the failing scenario's are run again."""
        from .markers import attribute_marker

        marker = attribute_marker(item.get_closest_marker("rl_attribute"))
        if marker is None and not self.settings.attribute:
            return None
        from ..auditing.attribution import attribute_with, observation_only
        from ..auditing.engine import Engine

        if not observation_only(scenario):
            return None
        engine = Engine(policy, spec, settings, cache=self.cache)
        with settings.limits():
            return attribute_with(engine, scenario, (marker or {}).get("groups"), known=result)

    # ---------------------------------------------------------------------- running

    def run(self, item: pytest.Item, scenario: Scenario, agent: Any = None,
            env: Any = None) -> Any:
        """Audit ``scenario`` for ``item`` and record it; raise RobustnessError on a miss.
        Returns the ScenarioResult, or for an ``rl_tolerance`` item (:mod:`.curves`) the
        ToleranceCurve.

        An error this process already raised for another item, word for word (an agent
        that does not load, an env that breaks its contract: the same for every scenario),
        is raised again as a :class:`~pytest_rlaudit.errors.RepeatedError` that names the
        item whose failure says it: a configuration error is read once."""
        __tracebackhide__ = True
        try:
            return self._run(item, scenario, agent, env)
        except Exception as exc:
            from ..errors import RepeatedError, RobustnessError
            from .items import could_not_audit

            if isinstance(exc, (RobustnessError, RepeatedError)):
                raise
            first = self._raised.setdefault((type(exc), str(exc)), item.nodeid)
            if first == item.nodeid:
                raise
            item.stash[SAME_AS_KEY] = first
            repeated = RepeatedError(f"the same {type(exc).__name__} as {first}: its failure "
                                     "says what went wrong and what to do")
            repeated.could_not_audit = could_not_audit(exc)
            raise repeated from None

    def _run(self, item: pytest.Item, scenario: Scenario, agent: Any, env: Any) -> Any:
        __tracebackhide__ = True
        from ..errors import ReferenceScoreError, RLAuditError, RobustnessError
        from ..stats.ratings import INCONCLUSIVE
        from .items import ScenarioItem
        from .markers import episodes_marker

        if self.runs is not None and isinstance(item, ScenarioItem):
            session: Any = self.config.pluginmanager.get_plugin("rlaudit-session")
            return self.runs.run(self, item, scenario, session.default_scenarios())
        policy = self.default_agent() if agent is None else self.policy_for(agent)
        spec = self.default_env() if env is None else env  # the engine applies env_needs
        episodes = episodes_marker(item.get_closest_marker("rl_episodes")) or {
            "n": self.settings.episodes, "max_n": None, "target_ci_width": None}
        gate = self.gate(item, scenario)
        settings = self.audit_settings(episodes["n"])
        outcome: Any  # the ScenarioResult, or a tolerance item's ToleranceCurve
        failure: Exception | None
        try:
            if item.get_closest_marker("rl_tolerance") is not None:
                from .curves import measure_curve

                record, failure, outcome = measure_curve(item, scenario, policy, spec, gate,
                                                         settings)
            else:
                from ..auditing.records import record_of
                from ..verdicts.assertions import robustness_check

                progress = self.config.pluginmanager.get_plugin("rlaudit-progress")
                if progress is not None:  # the episodes to come, for the progress line
                    progress.expect(policy, spec, episodes, self.settings.reference)
                check = robustness_check(policy, spec, scenario, settings, gate=gate,
                                         max_episodes=episodes["max_n"],
                                         target_ci_width=episodes["target_ci_width"],
                                         cache=self.cache,
                                         shown_as=self.settings.agent if agent is None else agent)
                record, outcome = record_of(item.nodeid, check, gate), check.result
                message = check.message
                if not check.passed and record["rating"] != INCONCLUSIVE:
                    try:
                        said = self.attribute(item, scenario, policy, spec, settings,
                                             check.result)
                    except RLAuditError as exc:  # the failure stays the robustness one
                        message += f"\n  which sensor: not attributed: {exc}"
                    else:
                        if said is not None:
                            record["attribution"] = said.to_dict()
                            message += f"\n  which sensor: {said.diagnosis}"
                failure = None if check.passed else RobustnessError(message, check.result)
        except ReferenceScoreError as exc:
            # The reference is a number here (below "random", the agent-beats-random check
            # speaks first): name the option that sets it.
            raise ReferenceScoreError(
                f"{exc} From pytest: --rl-reference random (or rl_reference = random in the "
                "ini file), or a --rl-reference below the nominal return.") from None
        if self.settings.videos and self.settings.report and not record["passed"]:
            from .videos import film  # (--rl-videos without --rl-report is a usage error)

            record["video"] = film(self.settings.report, record, policy, spec, scenario)
        item.stash[RECORD_KEY] = record
        if failure is not None:
            raise failure
        return outcome
