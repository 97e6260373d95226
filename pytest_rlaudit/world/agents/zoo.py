"""Saved runs: an rl-baselines3-zoo experiment folder, a Hugging Face Hub download, or a
model ``.zip`` with its statistics beside it, read the way the zoo's ``enjoy`` reads them.

Layouts (``<Env>`` is the env id the agent was trained on):

- zoo: ``logs/<algo>/<Env>_<n>/<Env>.zip`` with ``<Env>/config.yml`` (hyperparameters:
  ``normalize``, ``frame_stack``, ``env_wrapper``), ``<Env>/args.yml`` (``algo``, ``env``,
  ``env_kwargs``) and ``<Env>/vecnormalize.pkl``;
- Hub (huggingface_sb3 / ``rl_zoo3.push_to_hub``): one folder holding ``<algo>-<Env>.zip``,
  ``config.yml``, ``args.yml``, ``env_kwargs.yml`` and ``vec_normalize.pkl``;
- a bare ``.zip``, with ``vecnormalize.pkl`` (or ``vec_normalize.pkl``) beside it if it
  was trained with VecNormalize.

A folder or the ``.zip`` inside one are read alike. For example, in this repository,
``read_saved_run("tests/data/zoo/a2c/Pendulum-v1_1")`` gives algorithm ``"A2C"``, trained on
``"Pendulum-v1"``, with ``Pendulum-v1/vecnormalize.pkl``. An Atari run
(``env_wrapper: [stable_baselines3.common.atari_wrappers.AtariWrapper]``, ``frame_stack: 4``)
is read alike; :attr:`SavedRun.atari` tells it, and :mod:`..atari` what its episodes are.

The ``.yml`` files are data (:func:`read_yaml`); of what they name, only the env wrappers
are ever imported, from an allow-list by name unless the run is trusted
(:func:`read_saved_run`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._optional import require
from ...errors import PolicyError
from ..atari import looks_atari
from .missing import agent_not_found
from .needs import EnvNeeds
from .preprocess import STATS_FILES
from .sb3_load import canonical_algo

__all__ = ["SavedRun", "read_saved_run", "read_yaml"]

_NOT_MODELS = ("train_eval_metrics.zip",)  # the Hub's zipped training logs


def read_yaml(path: Path) -> dict[str, Any]:
    """A zoo ``.yml`` file as a dict. The zoo writes ``OrderedDict`` objects with a Python
    tag; this reads that tag (and tuples) and nothing else that would run code, since a
    downloaded folder is not trusted code."""
    yaml: Any = require("yaml", "reading an rl-baselines3-zoo folder")  # PyYAML ships no types

    class _ZooLoader(yaml.SafeLoader):
        pass

    def ordered_dict(loader: Any, node: Any) -> dict[Any, Any]:
        return _ordered_dict(path, loader, node, yaml)

    _ZooLoader.add_constructor(
        "tag:yaml.org,2002:python/object/apply:collections.OrderedDict", ordered_dict)
    _ZooLoader.add_constructor(
        "tag:yaml.org,2002:python/tuple",
        lambda loader, node: tuple(loader.construct_sequence(node, deep=True)))
    try:
        loaded = yaml.load(path.read_text(), Loader=_ZooLoader)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise PolicyError(f"cannot read {str(path)!r} ({exc})") from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise PolicyError(f"{str(path)!r} holds a {type(loaded).__name__}, not a mapping")
    return loaded


#: What PyYAML's mapping form of ``!!python/object/apply`` may hold for an OrderedDict.
_APPLY_KEYS = frozenset({"args", "kwds", "dictitems"})


def _ordered_dict(path: Path, loader: Any, node: Any, yaml: Any) -> dict[Any, Any]:
    """The zoo's ``!!python/object/apply:collections.OrderedDict`` as a dict, read as PyYAML
    reads it (``OrderedDict(*args, **kwds)`` with ``dictitems`` added) without calling
    anything: the zoo's list of ``[key, value]`` pairs, or PyYAML's mapping form
    (``{args: ..., kwds: ..., dictitems: ...}``). A mapping of other keys
    (``{a: 1}``) is refused: PyYAML (and so the zoo) reads it as an empty mapping, which
    is not what its author meant."""
    def refused(why: str) -> PolicyError:
        return PolicyError(
            f"cannot read {str(path)!r}: its OrderedDict tag (line {node.start_mark.line + 1}) "
            f"{why}; write the mapping as the zoo does (a list of [key, value] pairs under "
            "the tag) or as a plain YAML mapping without the tag")

    kwds: Any = {}
    items: Any = {}
    if isinstance(node, yaml.SequenceNode):
        args = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
        if not set(value) <= _APPLY_KEYS:
            raise refused(f"is over a mapping of keys {sorted(map(str, value))}, not PyYAML's "
                          "args, kwds and dictitems, so the zoo would read it as empty")
        args, kwds, items = (value.get("args") or [], value.get("kwds") or {},
                             value.get("dictitems") or {})
    if not isinstance(args, list) or len(args) > 1 or not all(
            isinstance(part, dict) for part in (kwds, items)):
        raise refused("does not hold one list of [key, value] pairs")
    out: dict[Any, Any] = {}
    first = args[0] if args else []
    pairs = first.items() if isinstance(first, dict) else first
    try:
        for pair in pairs:
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise refused(f"holds {pair!r} where a [key, value] pair belongs")
            out[pair[0]] = pair[1]
    except TypeError as exc:  # an unhashable key, or pairs that are no list
        raise refused(f"does not hold [key, value] pairs ({exc})") from None
    return {**out, **kwds, **items}


@dataclass(frozen=True)
class SavedRun:
    """One trained agent on disk: its model file, the algorithm when the folder says it,
    VecNormalize statistics, the frame stack, what it needs of its env and the
    ``policy_kwargs`` its config.yml gives."""

    model: Path
    algo: str | None = None
    vec_normalize: Path | None = None
    frame_stack: int = 0
    needs: EnvNeeds = field(default_factory=EnvNeeds)
    label: str = ""
    policy_kwargs: Any = None  # config.yml's, as written (text or mapping)

    @property
    def atari(self) -> bool:
        """Whether the run is an Atari agent (trained on an ALE id, or with SB3's
        ``AtariWrapper``): the zoo evaluates those sampling their actions."""
        trained_on = self.needs.trained_on
        return (trained_on is not None and looks_atari(trained_on)) or any(
            name.rpartition(".")[2] == "AtariWrapper" for name, _ in self.needs.wrappers)


def _config_dir(folder: Path, model: Path | None) -> Path | None:
    """Where config.yml / args.yml are: ``<Env>/`` beside the zip (zoo) or the folder."""
    if model is not None and (folder / model.stem).is_dir():
        return folder / model.stem
    subdirs = [d for d in folder.iterdir() if d.is_dir() and (d / "config.yml").is_file()]
    if model is None and len(subdirs) == 1:
        return subdirs[0]
    if (folder / "config.yml").is_file() or (folder / "args.yml").is_file():
        return folder
    return None


def _model_in(folder: Path) -> Path:
    zips = sorted(z for z in folder.glob("*.zip") if z.name not in _NOT_MODELS)
    config = _config_dir(folder, None)
    if config is not None and config != folder and (folder / f"{config.name}.zip").is_file():
        return folder / f"{config.name}.zip"  # the zoo's final model, not best_model.zip
    if len(zips) == 1:
        return zips[0]
    if not zips:
        raise PolicyError(f"agent folder {str(folder)!r} holds no model .zip; pass the model file")
    raise PolicyError(
        f"agent folder {str(folder)!r} holds several models ({', '.join(z.name for z in zips)}); "
        "pass the one to audit"
    )


def _algo_of(args: dict[str, Any], folder: Path, model: Path, zoo: bool) -> str | None:
    """The algorithm the folder names: args.yml's ``algo``, else the zoo's ``<algo>/``
    folder or the Hub's ``<algo>-<Env>.zip``; None leaves it to the model file."""
    candidates = [args.get("algo"), folder.parent.name if zoo else None,
                  model.stem.split("-")[0] if "-" in model.stem else None]
    for candidate in candidates:
        if candidate:
            try:
                return canonical_algo(str(candidate))
            except PolicyError:
                continue
    return None


def _trained_on(args: dict[str, Any], folder: Path, config: Path | None) -> str | None:
    if args.get("env"):
        env = args["env"]
        if not isinstance(env, str):
            where = str(Path(config or folder) / "args.yml")
            raise PolicyError(f"{where!r}: env {env!r} is not an env id (the zoo writes the id "
                              "it trained on, such as CartPole-v1)")
        return env
    if config is not None and config != folder:
        return config.name
    match = re.fullmatch(r"(.+-v\d+)_\d+", folder.name)
    return match.group(1) if match else None


def _wrappers(spec: Any, where: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The zoo's ``env_wrapper`` forms: a name, a {name: kwargs} dict, or a list of them."""
    if spec is None:
        return ()
    out = []
    for item in spec if isinstance(spec, list) else [spec]:
        if isinstance(item, dict) and len(item) != 1:
            raise PolicyError(f"{where}: env_wrapper entry {item!r} must name one wrapper")
        name, kwargs = next(iter(item.items())) if isinstance(item, dict) else (item, None)
        if not isinstance(name, str):
            raise PolicyError(f"{where}: env_wrapper entry {item!r} does not name a wrapper "
                              "(the zoo writes package.module.Class, or {package.module.Class: "
                              "{keyword: value}})")
        if kwargs is not None and not (isinstance(kwargs, dict)
                                       and all(isinstance(k, str) for k in kwargs)):
            raise PolicyError(f"{where}: env_wrapper {name!r} takes {kwargs!r}, not a mapping of "
                              "keyword arguments")
        out.append((name, dict(kwargs or {})))
    return tuple(out)


def _frame_stack(value: Any, where: str) -> int:
    """config.yml's ``frame_stack``: a whole number of frames; absent, null, false or 0 for
    none, as the zoo reads it (``if frame_stack: VecFrameStack(env, frame_stack)``)."""
    if value is None or value is False:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise PolicyError(f"{where}: frame_stack {value!r} is not a number of frames; the zoo "
                      "writes a whole number (4 for its Atari agents) or leaves it out: correct "
                      "the file")


def _env_kwargs(value: Any, where: str) -> dict[str, Any]:
    """``env_kwargs`` (args.yml's, or env_kwargs.yml): the keyword arguments of
    ``gymnasium.make``, a mapping of names."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise PolicyError(f"{where}: env_kwargs {value!r} is not a mapping of keyword "
                          "arguments (name: value) for gymnasium.make")
    return dict(value)


def read_saved_run(path: str | Path, *, trusted: bool = False) -> SavedRun:
    """Read the saved run at ``path`` (a folder or a model ``.zip``; see the module
    docstring for the layouts).

    ``trusted``: whether the env wrappers its ``config.yml`` names may be imported
    whatever they are, as the zoo does; by default only allow-listed ones are, and any
    other is an :class:`~pytest_rlaudit.errors.UntrustedFileError` before anything is
    imported (:func:`.needs.import_wrapper`). Nothing else the files name is imported or
    run: callbacks (``callback``) are never read, ``policy_kwargs`` is read as data."""
    path = Path(path)
    if not path.exists():
        raise agent_not_found(path, "agent path")
    model = _model_in(path) if path.is_dir() else path
    folder = model.parent
    config_dir = _config_dir(folder, model)
    config_file = config_dir / "config.yml" if config_dir else None
    hyper = read_yaml(config_file) if config_file and config_file.is_file() else {}
    args_file = config_dir / "args.yml" if config_dir else None
    args = read_yaml(args_file) if args_file and args_file.is_file() else {}
    env_kwargs = _env_kwargs(args.get("env_kwargs"), repr(str(args_file)))
    if config_dir and (config_dir / "env_kwargs.yml").is_file():
        env_kwargs = _env_kwargs(read_yaml(config_dir / "env_kwargs.yml"),
                                 repr(str(config_dir / "env_kwargs.yml"))) or env_kwargs
    where = repr(str(config_file))
    if hyper.get("vec_env_wrapper"):
        raise PolicyError(
            f"{str(model)!r} was trained with vec_env_wrapper {hyper['vec_env_wrapper']!r} (its "
            f"{where}), which pytest-rlaudit cannot apply yet; wrap the agent yourself as a Policy"
        )
    places = [d for d in (config_dir, folder) if d is not None]
    stats = next((d / name for d in places for name in STATS_FILES if (d / name).is_file()), None)
    if hyper:  # a saved config decides, as in the zoo; a bare zip takes the stats beside it
        if hyper.get("normalize") and stats is None:
            raise PolicyError(
                f"{str(model)!r} was trained with VecNormalize (normalize: {hyper['normalize']!r} "
                f"in its config.yml) but no vecnormalize.pkl is beside it in {str(config_dir)!r}; "
                "without the statistics the agent sees unscaled observations"
            )
        if not hyper.get("normalize"):
            stats = None
    zoo = config_dir is not None and config_dir != folder
    return SavedRun(
        model=model,
        algo=_algo_of(args, folder, model, zoo),
        vec_normalize=stats,
        frame_stack=_frame_stack(hyper.get("frame_stack"), where),
        needs=EnvNeeds(trained_on=_trained_on(args, folder, config_dir),
                       env_kwargs=env_kwargs, wrappers=_wrappers(hyper.get("env_wrapper"), where),
                       trusted=trusted, config=str(config_file) if config_file else None),
        label=folder.name if zoo else model.name,
        policy_kwargs=hyper.get("policy_kwargs"),
    )
