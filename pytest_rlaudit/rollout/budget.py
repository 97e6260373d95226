"""What a pool of episodes will cost, checked before anything is allocated.

An audit keeps a few numbers per episode (return, lengths, seed, the rewards of recorded
episodes) and queues one job per (scenario, episode): about half a kilobyte each at the
least (measured with tracemalloc on CartPole, 2,000-8,000 episodes of 10 steps). A count
such as ``episodes=10**9`` would allocate until the machine runs out of memory (a
MemoryError after minutes, or the OOM killer ending the CI job without a word); it is
refused up front instead, with the figure.

>>> check_budget(30, 6)
>>> check_budget(10**9, 7, available=16 * 2**30)
Traceback (most recent call last):
...
pytest_rlaudit.errors.InvalidArgumentError: episodes=1000000000 over 7 scenario runs is 7,000,000,000 ...
"""

from __future__ import annotations

import os

from ..errors import InvalidArgumentError

__all__ = ["BYTES_PER_EPISODE", "check_budget", "available_memory"]

#: Memory an episode's bookkeeping takes at the least (its results and its job), rounded
#: up from the ~500 bytes measured: the estimate must not refuse what would fit.
BYTES_PER_EPISODE = 1024

#: The share of the available memory an audit's bookkeeping may take (the envs, the
#: agent and the traces of recorded episodes need the rest).
SHARE = 0.5


def available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux: MemAvailable), else the
    physical memory, else None where the OS says neither."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def check_budget(episodes: int, runs: int, *, available: int | None = None) -> None:
    """Refuse ``episodes`` per scenario over ``runs`` scenario runs when their bookkeeping
    alone would take more than half the available memory (``available`` bytes; default:
    :func:`available_memory`), naming the figure and what to do instead."""
    total = int(episodes) * max(1, int(runs))
    need = total * BYTES_PER_EPISODE
    have = available_memory() if available is None else available
    if have is None or need <= SHARE * have:
        return
    most = max(2, int(SHARE * have / BYTES_PER_EPISODE / max(1, int(runs))))
    raise InvalidArgumentError(
        f"episodes={episodes} over {runs} scenario runs is {total:,} episodes: about "
        f"{_size(need)} of memory for their results alone ({BYTES_PER_EPISODE} bytes each), "
        f"more than half of the {_size(have)} available, before a single step (at a "
        f"millisecond an episode, {total / 1000 / 3600:,.0f} hours). Audit at most "
        f"{most:,} episodes here; 30-100 paired episodes usually decide a rating, and an "
        "adaptive run spends more only where the verdict needs it: rl_episodes(n, max_n=..., "
        "target_ci_width=...) or check_robust(..., max_episodes=..., target_ci_width=...)")


def _size(nbytes: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if nbytes < 1024 or unit == "PB":
            return f"{nbytes:.0f} {unit}" if unit == "bytes" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")  # pragma: no cover
