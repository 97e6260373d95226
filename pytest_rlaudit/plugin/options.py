"""The plugin's options and their ini keys, parsed into one typed :class:`Settings`.

Every option has an ini key of the same name in snake_case (``--rl-episodes`` and
``rl_episodes``). Values are parsed by the same function in both places, so a bad value
is the same clear error either way (markers use these parsers too, see :mod:`.markers`).
Precedence: marker > command line > ini > default.

This module is part of the pytest face but imports nothing heavy: it is loaded with the
plugin on every pytest run.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import pytest

from .._checks import integer, number, seed, workers
from ..auditing.tolerances import Tolerance, parse_tolerance  # light: no numpy
from ..stats.ratings import MODES, RATINGS  # light: standard library only

# ----------------------------------------------------------------------- parsers


def _integer(minimum: int, why: str = "") -> Callable[[str], int]:
    """A parser of integers >= ``minimum`` (the wording of :func:`.._checks.integer`)."""

    def parse(text: str) -> int:
        try:
            value: Any = int(text)
        except (TypeError, ValueError):
            value = text
        return integer("", value, minimum=minimum, why=why, error=argparse.ArgumentTypeError)

    return parse


parse_episodes = _integer(2, " (paired episodes)")


def _seed(text: str) -> int:
    try:
        value: Any = int(text)
    except (TypeError, ValueError):
        value = text
    return seed(value, name="", error=argparse.ArgumentTypeError)


_batch_size = _integer(1)


def _reference(text: str) -> float | str:
    if str(text).strip() == "random":
        return "random"
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"must be a number or 'random', got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number or 'random', got {text!r}")
    return value


def parse_ratio(text: str) -> float:
    try:
        value: Any = float(text)
    except (TypeError, ValueError):
        value = text
    return number("", value, low=0, high=2, low_open=True, error=argparse.ArgumentTypeError)


def parse_rating(text: str) -> str:
    value = str(text).strip().upper()
    if value not in RATINGS:
        raise argparse.ArgumentTypeError(
            f"must be one of {', '.join(RATINGS)}, got {text!r}")
    return value


def parse_mode(text: str) -> str:
    value = str(text).strip()
    if value not in MODES:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(MODES)}, got {text!r}")
    return value


#: The severity levels of scenarios.preset (kept here as text: the plugin parses options
#: without importing the engine; a test checks they match).
SEVERITIES = ("mild", "moderate", "severe")


def _severity(text: str) -> str:
    value = str(text).strip()
    if value not in SEVERITIES:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(SEVERITIES)}, got {text!r}")
    return value


#: Where episodes run (kept here as text, as SEVERITIES; a test checks they match).
BACKENDS = ("local", "ray")


def _workers(text: str) -> int | str:
    return workers(str(text).strip().lower(), error=argparse.ArgumentTypeError)


def _backend(text: str) -> str:
    value = str(text).strip().lower()
    if value not in BACKENDS:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(BACKENDS)}, got {text!r}")
    return value


def _seconds(text: str) -> Any:
    try:
        return float(text)
    except (TypeError, ValueError):
        return text


def _timeout(text: str) -> float | None:
    from ..rollout.deadline import check_timeout

    return check_timeout(_seconds(text), "", error=argparse.ArgumentTypeError,
                         off="leave the option out for no limit")


def _call_timeout(text: str) -> float:
    """Seconds, or 0.0 for no bound (None would read as "not given")."""
    from ..rollout.calls import check_call_timeout

    value = str(text).strip().lower()
    bound = check_call_timeout(value if value == "none" else _seconds(value), name="",
                               error=argparse.ArgumentTypeError, off="0 or none for no bound")
    return 0.0 if bound is None else bound


#: The values of --rl-progress (what each does: :mod:`.progress`).
PROGRESS = ("auto", "yes", "no")


def _progress(text: str) -> str:
    value = str(text).strip().lower()
    value = {"true": "yes", "on": "yes", "1": "yes", "false": "no", "off": "no", "0": "no"}.get(
        value, value)
    if value not in PROGRESS:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(PROGRESS)}, got {text!r}")
    return value


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in str(text).replace(",", " ").split() if n.strip())
    if not names:
        raise argparse.ArgumentTypeError("must name at least one scenario, e.g. jitter,delay")
    return names


def _text(text: str) -> str:
    return str(text)


def _tolerances(text: str) -> tuple[Tolerance, ...]:
    parts = [p for p in str(text).replace(",", " ").split() if p]
    try:
        return tuple(parse_tolerance(p) for p in parts)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _dataset(text: str) -> tuple[str, ...]:
    value = str(text).strip()
    if not value:
        raise argparse.ArgumentTypeError("must name a dataset (a folder, a Minari id or an .npz)")
    return (value,)


def _share(text: str) -> float:
    try:
        value: Any = float(text)
    except (TypeError, ValueError):
        value = text
    return number("", value, low=0, error=argparse.ArgumentTypeError)


def _flag(text: str) -> bool:
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"must be true or false, got {text!r}")


@dataclass(frozen=True)
class Option:
    flag: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    metavar: str | None = None
    repeat: bool = False  # repeatable on the command line; values add up

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


OPTIONS: tuple[Option, ...] = (
    Option("--rl-audit", _flag, False, "run RL robustness audit tests (marked rl_audit / "
           "rl_scenario, or using the rl_audit fixture); without it they are skipped, and "
           "counted in one summary line. --rl-agent, --rl-save, --rl-history, --rl-report or "
           "--rl-videos on the command line turn it on."),
    Option("--rl-agent", _text, None, "the agent to audit: a path to an SB3 .zip, an "
           "rl-baselines3-zoo folder or a deployed .onnx or TorchScript .pt file, "
           "hf://ORG/REPO (Hugging Face Hub), or "
           "package.module:attribute naming a model, policy, callable or zero-argument "
           "factory. The default of the rl_agent fixture; on the command line it turns "
           "auditing on, and a path that does not exist is a usage error. A glob "
           "('logs/ppo/CartPole-v1_*': quote it) matching 2 or more agents is a recipe's "
           "training runs: the zero-config audit rates each scenario on their IQM ratio "
           "(audit_runs); one match is that agent. A path that exists is taken as it is "
           "('agent[1].zip'), never as a glob.", "AGENT"),
    Option("--rl-algo", _text, None, "the SB3 algorithm of --rl-agent's .zip when neither "
           "the file nor its folder tells (PPO, A2C, DQN, SAC, TD3, DDPG, QRDQN, TQC, TRPO, ARS, "
           "CrossQ, RecurrentPPO, MaskablePPO).", "ALGO"),
    Option("--rl-vec-normalize", _text, None, "VecNormalize statistics for --rl-agent (a "
           "vecnormalize.pkl); by default those in the agent's zoo folder or beside its .zip "
           "are used, 'none' turns them off.", "PATH"),
    Option("--rl-stochastic", _flag, False, "sample --rl-agent's actions instead of taking "
           "the most likely one (each episode from its own seeded stream). A zoo folder's "
           "Atari agent is sampled without it, as the zoo evaluates those."),
    Option("--rl-deterministic", _flag, False, "take --rl-agent's most likely action even "
           "where its saved run samples by default (a zoo folder's Atari agent)."),
    Option("--rl-agent-name", _text, None, "the name --rl-agent is reported under (default: "
           "its algorithm and file or folder).", "NAME"),
    Option("--rl-trusted", _flag, False, "load --rl-agent's SB3 .zip (zoo folder, hf:// "
           "download) and VecNormalize statistics in full, the way SB3 and the zoo do, running "
           "the code pickled in them and importing any env wrapper its config.yml names: for "
           "files you trust whose own classes need it. By default nothing pickled in them runs "
           "(weights-only load) and config.yml's env wrappers come from an allow-list."),
    Option("--rl-env", _text, None, "the Gymnasium id to audit on (or module:Id-v0). The "
           "default of the rl_env fixture.", "ID"),
    Option("--rl-episodes", parse_episodes, 30, "paired episodes per scenario (>= 2; default 30).",
           "N"),
    Option("--rl-seed", _seed, 0, "audit seed: episode i resets with seed + i (default 0).",
           "SEED"),
    Option("--rl-scenarios", _names, None, "comma-separated scenarios for zero-config audits "
           "(default: the deployment and stress suites).", "NAMES"),
    Option("--rl-severity", _severity, None, "size the zero-config suite's disturbances: "
           "mild (the default suite), moderate or severe (after the real-world RL suite's "
           "combined challenges; see scenarios.preset).", "LEVEL"),
    Option("--rl-reference", _reference, 0.0, "the score ratios are measured from: a number "
           "or 'random' (default 0).", "REF"),
    Option("--rl-min-ratio", parse_ratio, None, "default threshold: fail a scenario whose ratio is "
           "below this (0, 2].", "RATIO"),
    Option("--rl-min-rating", parse_rating, None, "default threshold: fail a scenario rated below "
           "this (PASS, MILD, DEGRADED, FAIL; default MILD when no threshold is set).",
           "RATING"),
    Option("--rl-mode", parse_mode, "point", "verdict mode of default thresholds: point, confident "
           "or not_worse (default point).", "MODE"),
    Option("--rl-fail-stress", _flag, False, "apply the default thresholds to stress "
           "scenarios too (by default they are reported, never failed)."),
    Option("--rl-report", _text, None, "write the report to DIR: index.html (one offline "
           "page), summary.json, summary.md, badges and, with matplotlib, charts (PNG, SVG).",
           "DIR"),
    Option("--rl-videos", _flag, False, "film each failing scenario for --rl-report: an "
           "animated GIF (DIR/videos/) of its worst episode beside its nominal twin, around "
           "the step where they part; for envs that render rgb_array (needs Pillow)."),
    Option("--rl-attribute", _flag, False, "attribute each observation scenario that fails "
           "its threshold (noise, delay, dropped frames) to observation groups: the scenario "
           "on each group alone and on all but it, Shapley shares and the culprit groups, "
           "with intervals. Costs runs of the audit's episodes beyond its own nominal and "
           "scenario ones: 2G for G groups (up to 8 groups every coalition, 2^G - 2), the "
           "culprit search's (up to 40 a pass) and 2 on fresh seeds."),
    Option("--rl-batch-size", _batch_size, None, "env slots stepped together per policy call "
           "(default 128).", "N"),
    Option("--rl-workers", _workers, None, "run the episodes in N processes (or auto: one per "
           "core), each with its own copy of the agent. With --rl-backend ray: the number of "
           "Ray actors. Never changes a number.", "N"),
    Option("--rl-backend", _backend, "local", "where episodes run: local (this machine) or "
           "ray (shards of episodes on Ray actors; RAY_ADDRESS selects a cluster; pip install "
           "'pytest-rlaudit[ray]'). Never changes a number.", "BACKEND"),
    Option("--rl-timeout", _timeout, None, "stop an audit that runs longer than SECONDS "
           "with RolloutTimeoutError naming the scenario, episode and step it was stuck in "
           "(an env step that never returns; worker processes are killed). Default: no "
           "limit.", "SECONDS"),
    Option("--rl-call-timeout", _call_timeout, 60.0, "stop an audit when one env step, reset "
           "or policy call runs longer than SECONDS (a deadlocked simulator), with "
           "RolloutTimeoutError naming the call, scenario, episode and step; past 10 s the "
           "progress line names the call it waits on. 0 or none: no bound. Default: 60.",
           "SECONDS"),
    Option("--rl-save", _text, None, "save this run's audit results (per-episode returns with "
           "their seeds, ratios, intervals, ratings; agent, env, options, machine) to PATH, a "
           "baseline for --rl-compare.", "PATH"),
    Option("--rl-compare", _text, None, "compare this run with the baseline at PATH, paired "
           "episode by episode on the same seeds; reports regressions and improvements. With "
           "--rl-history: also last (the newest run there with this run's settings), a run "
           "number, or a commit prefix.", "PATH"),
    Option("--rl-history", _text, None, "keep every auditing run's results in DIR, one "
           "numbered file per run named by its commit (NNNN_<commit>[_dirty].json), for "
           "--rl-compare last|N|<commit prefix>.", "DIR"),
    Option("--rl-history-show", _flag, False, "print each audited test's trend over the "
           "--rl-history runs with this run's settings (the latest 10): ratio, interval and "
           "rating by run, the first significant paired drop marked with its commit. With "
           "--rl-report, DIR/history.html charts every run."),
    Option("--rl-compare-fail", _tolerances, (), "fail the run when a mean return or a ratio "
           "drops significantly and beyond EXPR (return:5%%, return:10, ratio:0.05, ratio:5%%); "
           "repeatable.", "EXPR", repeat=True),
    Option("--rl-progress", _progress, "auto", "show a running audit's episodes done of total "
           "and the time left on the terminal line, once it has run about 2 s: auto (when the "
           "output is a terminal, not under -qq or -s), yes or no. Never under xdist workers.",
           "WHEN"),
    Option("--rl-replay", _dataset, (), "replay --rl-agent open loop on the recorded episodes "
           "of DATASET (a Minari dataset folder or local id, a LeRobot dataset folder, an "
           ".npz): one test per dataset, failed when --rl-replay-max-disagreement or "
           "--rl-replay-max-divergence is exceeded or the agent raises on an episode. "
           "Measures action agreement only, never the agent's return; repeatable.",
           "DATASET", repeat=True),
    Option("--rl-replay-max-disagreement", _share, None, "--rl-replay's limit on the share "
           "of steps whose action differs from the recorded one beyond the tolerance "
           "(0.1 = 10%%).", "SHARE"),
    Option("--rl-replay-max-divergence", _share, None, "--rl-replay's limit on the mean "
           "per-step action distance, as a share of the action range (Discrete: the share "
           "of steps whose action differs).", "SHARE"),
    Option("--rl-replay-state", _text, None, "the observation column of a LeRobot "
           "--rl-replay dataset (default observation.state).", "COLUMN"),
    Option("--rl-replay-action", _text, None, "the action column of a LeRobot --rl-replay "
           "dataset (default action).", "COLUMN"),
    Option("--rl-record", _text, None, "after each audited scenario, also write its episodes "
           "as a Minari dataset in DIR/<scenario> (the nominal episodes once, DIR/nominal), "
           "for --rl-replay to replay later checkpoints on. The episodes are seeded (episode "
           "i resets with --rl-seed + i), so these are exactly the audited episodes; needs "
           "the [replay] extra.", "DIR"),
)
_BY_DEST = {o.dest: o for o in OPTIONS}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("rlaudit", "RL robustness audits (pytest-rlaudit)")
    for option in OPTIONS:
        if option.parse is _flag:
            group.addoption(option.flag, action="store_true", default=None, dest=option.dest,
                            help=option.help)
            parser.addini(option.dest, type="bool", default=None,
                          help=f"as {option.flag}.")
        else:
            group.addoption(option.flag, type=option.parse, default=None, dest=option.dest,
                            metavar=option.metavar, help=option.help,
                            action="append" if option.repeat else "store")
            parser.addini(option.dest, type="string", default=None, help=f"as {option.flag}.")


def option_value(config: pytest.Config, dest: str) -> Any:
    """Command line, else ini (parsed with the option's own parser), else the default."""
    option = _BY_DEST[dest]
    value = config.getoption(dest)
    if value is not None:
        return tuple(v for part in value for v in part) if option.repeat else value
    try:
        raw = config.getini(dest)
    except (ValueError, TypeError, pytest.UsageError) as exc:
        # A bool key pytest cannot read: pytest < 9.2 raises ValueError, 9.2 a UsageError
        # that does not name the key.
        raise pytest.UsageError(f"ini option {dest}: {exc}; use true or false") from None
    if raw is None or raw == "" or raw == []:
        return option.default
    if isinstance(raw, bool):
        return raw
    try:
        return option.parse(str(raw))
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option {dest} = {raw!r}: {exc}") from None



@dataclass(frozen=True)
class Settings:
    """One run's options, each from the command line, else the ini file, else its default
    (a field per :data:`OPTIONS` entry, named without the ``rl_`` prefix)."""

    audit: bool
    agent: str | None
    algo: str | None
    vec_normalize: str | None
    stochastic: bool
    deterministic: bool
    agent_name: str | None
    trusted: bool
    env: str | None
    episodes: int
    seed: int
    scenarios: tuple[str, ...] | None
    severity: str | None
    reference: float | str
    min_ratio: float | None
    min_rating: str | None
    mode: str
    fail_stress: bool
    report: str | None
    videos: bool
    attribute: bool
    batch_size: int | None
    workers: int | str | None
    backend: str
    timeout: float | None
    call_timeout: float  # 0.0: no bound
    save: str | None
    compare: str | None
    history: str | None
    history_show: bool
    compare_fail: tuple[Tolerance, ...]
    progress: str
    replay: tuple[str, ...]
    replay_max_disagreement: float | None
    replay_max_divergence: float | None
    replay_state: str | None
    replay_action: str | None
    record: str | None

    @classmethod
    def read(cls, config: pytest.Config) -> Settings:
        settings = cls(**{f.name: option_value(config, f"rl_{f.name}") for f in fields(cls)})
        if settings.stochastic and settings.deterministic:
            raise pytest.UsageError("--rl-stochastic and --rl-deterministic contradict each "
                                    "other (rl_stochastic, rl_deterministic): give one")
        if settings.history_show and not settings.history:
            raise pytest.UsageError(
                "--rl-history-show shows the runs kept in a history folder, and no "
                "--rl-history is given: add --rl-history DIR (or rl_history = DIR in the ini "
                "file)")
        if settings.videos and not settings.report:
            raise pytest.UsageError(
                "--rl-videos writes its GIFs into the report folder, and no --rl-report is "
                "given: add --rl-report DIR (or rl_report = DIR in the ini file), or drop "
                "--rl-videos (rl_videos)")
        return settings

    def as_options(self) -> dict[str, Any]:
        """JSON-ready, keyed by option (``rl_seed``, ...): what a baseline records."""
        return {f"rl_{f.name}": (list(map(str, value)) if isinstance(value, tuple) else value)
                for f in fields(self) for value in [getattr(self, f.name)]}
