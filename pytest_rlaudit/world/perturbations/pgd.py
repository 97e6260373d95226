"""The PGD of ``adversarial_obs``, batched: many observations attacked with one forward
and one backward pass per PGD step, each row exactly as if it were attacked alone.

:class:`~.adversarial.AdversarialObservation` turns each step observation into a
:class:`Pending` attack (its random start drawn from the wrapper's own generator, its
ball and bounds); :func:`attack_all` runs the pending attacks of many envs together
(the audit runner: every env slot of a decision step) or of one (the wrapper alone).

Why a row's result does not depend on its batch:

- the rows are independent (the loss is a sum over rows of each row's own loss, so a
  row's gradient is that of its own loss alone), and each row keeps its own ball,
  bounds, step size and number of steps;
- every network call is padded to a multiple of
  :data:`~pytest_rlaudit.world.agents.MIN_TORCH_ROWS` rows, as the agents' own policy
  calls are: torch's CPU kernels round a row the same way in any such call (see
  :mod:`pytest_rlaudit.world.agents`);
- Discrete actions: a row whose action flipped leaves the batch (its observation stops
  changing, as the single-row attack stops), the others go on.

A step moves each element by ``step`` times the sign of its gradient, in float32, then
clips it into the ball and the bounds; the attacked observation depends on the network's
float rounding only through those signs and the argmax tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

    from ..agents.gradients import ActionScores

__all__ = ["Pending", "attack_all", "pgd_rows"]


@dataclass(frozen=True)
class Pending:
    """One observation waiting for its attack: the true one as the env gave it (``seen``)
    and in float64 (``clean``), the random ``start`` (inside the ball and the bounds), the
    box ``[low, high]`` (the ball within the observation space's bounds), the ball's
    ``radius``, the per-element ``step`` and the number of ``steps``. ``key``: attacks
    with equal keys go through the same network (:func:`attack_all` batches them)."""

    scores: ActionScores
    key: Any
    seen: np.ndarray
    clean: np.ndarray
    start: np.ndarray
    low: np.ndarray
    high: np.ndarray
    radius: np.ndarray
    step: np.ndarray
    steps: int

    def finish(self, worst: np.ndarray) -> np.ndarray:
        """``worst`` (float64) as the observation: the env's dtype, inside the ball and the
        bounds; integers rounded to the nearest value within ``floor(radius)`` of the
        clean one."""
        obs, low, high = self.seen, self.low, self.high
        out: np.ndarray
        if not np.issubdtype(obs.dtype, np.integer):
            out = np.clip(worst, low, high).astype(obs.dtype)
        else:
            reach = np.floor(self.radius)
            shifted = self.clean + np.clip(np.rint(worst - self.clean), -reach, reach)
            out = np.clip(shifted, np.ceil(low), np.floor(high)).astype(obs.dtype)
        return out


def attack_all(pending: Sequence[Pending]) -> list[np.ndarray]:
    """The attacked observations of ``pending``, in its order: one batched PGD per group
    of attacks on the same network and of the same shape, each row as if alone."""
    out: list[np.ndarray] = [np.empty(0)] * len(pending)
    groups: dict[Any, list[int]] = {}
    for i, p in enumerate(pending):
        groups.setdefault((p.key, p.clean.shape), []).append(i)
    for rows in groups.values():
        first = pending[rows[0]]
        worst = pgd_rows(first.scores, *(np.stack([getattr(pending[i], name) for i in rows])
                                         for name in ("clean", "start", "low", "high", "step")),
                         steps=np.array([pending[i].steps for i in rows]))
        for i, w in zip(rows, worst, strict=True):
            out[i] = pending[i].finish(w)
    return out


def pgd_rows(scores: ActionScores, clean: np.ndarray, start: np.ndarray, low: np.ndarray,
             high: np.ndarray, step: np.ndarray, *, steps: np.ndarray) -> np.ndarray:
    """Row ``i``: ``steps[i]`` signed-gradient ascent steps of ``step[i]`` from ``start[i]``
    on the distance of ``scores`` from their value at ``clean[i]``, each projected into
    ``[low[i], high[i]]``; Discrete scores stop at the first step whose argmax differs
    from the one at ``clean[i]``. Returns float64 rows of ``start``'s shape."""
    worst = np.array(start, dtype=np.float64)
    todo = np.flatnonzero(steps > 0)  # steps=0 is the random start itself: no network call
    if todo.size == 0:
        return worst
    import torch

    def f32(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(a[todo], dtype=np.float32))

    # The rows still ascending: their places in worst, steps left, and their tensors, cut
    # down whenever rows stop (no gathering and scattering while none does).
    rows, left = todo, steps[todo]
    x, lo, hi, size = f32(start), f32(low), f32(high), f32(step)
    with scores.session():
        with torch.no_grad():
            nominal = _padded(scores, f32(clean))
        ref = nominal.argmax(dim=1) if scores.discrete else nominal
        for t in range(int(left.max())):
            if (left <= t).any():  # these rows took all their steps
                rows, left, (x, lo, hi, size, ref) = _stop(left > t, worst, rows, left,
                                                           x, lo, hi, size, ref)
            xa = x.requires_grad_(True)
            out = _padded(scores, xa)
            keep = None  # the rows of xa that take this step (None: all)
            if scores.discrete:
                going = (out.argmax(dim=1) == ref).numpy()
                if not going.all():  # those rows' actions changed: they stop here
                    keep = torch.as_tensor(np.flatnonzero(going))
                    out = out[keep]
                    rows, left, (x, lo, hi, size, ref) = _stop(going, worst, rows, left,
                                                               x.detach(), lo, hi, size, ref)
                    if rows.size == 0:
                        break
                # a sum, not cross_entropy's mean: each row's gradient is its own loss's
                loss = torch.nn.functional.cross_entropy(out, ref, reduction="sum")
            else:
                loss = (out - ref).square().sum()
            # autograd.grad, not backward: no gradient accumulates in the network's weights
            (grad,) = torch.autograd.grad(loss, xa)
            if keep is not None:
                grad = grad[keep]
            x = torch.minimum(torch.maximum(x.detach() + size * grad.sign(), lo), hi)
    _stop(np.zeros(rows.size, dtype=bool), worst, rows, left, x.detach())
    return worst


def _stop(going: np.ndarray, worst: np.ndarray, rows: np.ndarray, left: np.ndarray,
          x: torch.Tensor, *more: torch.Tensor) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """Rows not ``going`` stop: their ``x`` goes to ``worst``; the rest of ``rows``,
    ``left``, ``x`` and ``more`` stay."""
    import torch

    worst[rows[~going]] = x[torch.as_tensor(~going)].numpy()
    kept = torch.as_tensor(going)
    return rows[going], left[going], [x[kept], *(m[kept] for m in more)]


def _padded(scores: ActionScores, x: torch.Tensor) -> torch.Tensor:
    """``scores(x)`` on ``x`` padded with copies of its first row to a multiple of
    MIN_TORCH_ROWS rows (batch invariance, as the policy calls), the padding cut off."""
    import torch

    from ..agents.torch import MIN_TORCH_ROWS

    n = x.shape[0]
    extra = -n % MIN_TORCH_ROWS
    if extra:
        x = torch.cat([x, x[:1].expand(extra, *x.shape[1:])])
    out: torch.Tensor = scores(x)[:n]
    return out
