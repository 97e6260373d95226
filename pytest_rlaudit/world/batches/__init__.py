"""Batches of envs stepped together: the :class:`~.protocol.BatchedEnv` protocol, the
batch kinds (:mod:`.kinds`) and the slot chains that run perturbations on them
(:mod:`.chains`). See DESIGN section 23 and the how-to "Vector envs and GPU simulators"."""

from .protocol import POLICY_KEY, BatchedEnv

__all__ = ["BatchedEnv", "POLICY_KEY"]
