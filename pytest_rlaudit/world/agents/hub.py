"""Agents on the Hugging Face Hub: ``hf://<org>/<repo>`` in the huggingface_sb3 layout
(``<algo>-<Env>.zip``, ``config.yml``, ``env_kwargs.yml``, ``vec_normalize.pkl``, as
``rl_zoo3.push_to_hub`` writes them), downloaded with ``huggingface_hub`` into its cache.

The cache and offline mode are ``huggingface_hub``'s own: ``HF_HOME`` / ``HF_HUB_CACHE``
say where files are kept, and with ``HF_HUB_OFFLINE=1`` a repository is read from the
cache without any network call. Only the files an agent needs are fetched (not the
replay video or the training logs).
"""

from __future__ import annotations

from pathlib import Path

from ..._optional import require
from ...errors import PolicyError

__all__ = ["download", "AGENT_FILES"]

#: What an agent needs from a repository; its training logs and videos stay behind.
AGENT_FILES = ["*.zip", "*.yml", "*.pkl"]
_SKIPPED = ["train_eval_metrics.zip"]


def download(repo_id: str) -> Path:
    """The local folder holding ``repo_id``'s agent files, downloaded into the Hugging
    Face cache when they are not there yet (``repo_id`` is ``<org>/<repo>``)."""
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise PolicyError(f"hf://{repo_id} is not a Hub model: write hf://<org>/<repo>, "
                          "for example hf://sb3/ppo-CartPole-v1")
    hub = require("huggingface_hub", "hf:// agents")
    try:
        folder = hub.snapshot_download(repo_id, allow_patterns=AGENT_FILES,
                                       ignore_patterns=_SKIPPED)
    except Exception as exc:  # offline without a cached copy, unknown repo, no network
        raise PolicyError(
            f"cannot get hf://{repo_id} from the Hugging Face Hub ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); check the repository name, the "
            "network, or, offline (HF_HUB_OFFLINE=1), that it is in the cache (HF_HUB_CACHE)"
        ) from exc
    return Path(folder)
