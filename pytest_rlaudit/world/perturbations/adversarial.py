"""Worst-case sensing: the observation within a small ball that most moves the agent's
action (projected gradient descent on the agent's own network)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .base import Param, Perturbation, _require_box_obs, check_scale, ranges
from .pgd import Pending, attack_all, pgd_rows

if TYPE_CHECKING:
    from ..agents.base import Policy
    from ..agents.gradients import ActionScores

__all__ = ["AdversarialObservation"]

_OWNER = "AdversarialObservation"


class AdversarialObservation(Perturbation, gym.Wrapper):
    """Every step observation replaced by the worst one within an L-infinity ball of
    radius ``epsilon`` around it: the one that pushes the agent's action furthest from
    its choice at the true observation.

    The attack is PGD (Madry et al., 2018): from a uniformly random start inside the ball
    (drawn from this wrapper's generator, so an episode's attack is fixed by its seed),
    ``steps`` signed-gradient steps of ``step_size`` (default ``2.5 * epsilon / steps``),
    each projected back into the ball and into the observation space's finite bounds.
    It ascends, through the agent's network (:mod:`~pytest_rlaudit.world.agents.gradients`):

    - Discrete actions: the cross-entropy of the action scores (logits, Q-values) with
      the nominal action, the argmax at the true observation (pushes the agent off it),
      stopping as soon as the argmax differs (a deterministic agent's action then
      cannot change more);
    - Box actions: the squared distance of the deterministic action from the nominal one
      (the random start gives it a gradient: at the true observation it has none).

    Units: ``epsilon`` is measured as ``obs_noise``'s sigma is (see
    :class:`~.observation.ObservationNoise`), so the two compare at one size:

    - ``scale="absolute"`` (the wrapper's default): raw observation units, the same
      radius in every element;
    - ``scale="relative"``: a fraction of each element's ``spread`` (one value per
      element: its standard deviation over the audit's nominal observations, which
      audits calibrate and pass in; the ``adversarial_obs`` scenario uses it). An element
      constant in the nominal episodes is not perturbed.

    Integer observations (images) take ``epsilon`` x the space's range in either scale,
    and the result is rounded to the nearest integer inside the ball; the dtype is kept.
    ``steps=0`` is uniform random noise in the same ball, the baseline the attack beats.

    The reset observation is clean, as under ``obs_noise``. The wrapper needs the policy
    it attacks: audits attach theirs (:meth:`attach_policy`); unattached, observations
    pass through clean with a warning. Only torch-backed agents (SB3 models, torch
    modules) have the gradients; any other agent is a ``PolicyError`` at attach time.
    Each step costs up to ``steps`` forward and backward passes. Alone, the wrapper
    attacks its one observation; in an audit the runner attacks the observations of all
    its env slots of a decision step together (:meth:`defer_attacks`), one pass of the
    whole batch per PGD step, each row exactly as if attacked alone (:mod:`.pgd`).

    The attack is per step (myopic): it changes the action wherever a change is within
    reach, which is where the agent is least sure. A closed loop may absorb that, so at
    small epsilon unbounded Gaussian noise of std epsilon can hurt more (the bundled
    fragile PPO on CartPole, raw units: at 0.1 it keeps 100% under the attack and 45%
    under noise; at 0.15, 2% and 11%); uniform noise in the same ball never hurts more.

    >>> import gymnasium as gym, torch
    >>> from pytest_rlaudit.world.agents import TorchPolicy
    >>> env = AdversarialObservation(gym.make("CartPole-v1"), epsilon=0.05)
    >>> env.attach_policy(TorchPolicy(torch.nn.Linear(4, 2)))
    >>> obs, _ = env.reset(seed=0)
    >>> attacked = env.attack(obs)
    >>> bool(abs(attacked - obs).max() <= 0.05 + 1e-6)
    True
    """

    PARAMS = ranges(epsilon=Param("number"), steps=Param("integer", low=0),
              step_size=Param("number", optional=True))
    NOOP = ({"epsilon": 0},)

    def __init__(self, env: gym.Env, epsilon: float = 0.1, steps: int = 10,
                 step_size: float | None = None, scale: str = "absolute",
                 spread: Sequence[float] | None = None) -> None:
        self.epsilon = self._argument("epsilon", epsilon)
        self.steps = self._argument("steps", steps)
        # Madry et al.'s rule: the steps together can cross the ball 1.25 times.
        self.step_size = (2.5 * self.epsilon / max(self.steps, 1) if step_size is None
                          else self._argument("step_size", step_size))
        box = _require_box_obs(_OWNER, env)
        self.scale, self.spread = check_scale(_OWNER, scale, spread, box)
        self._init_perturbation(epsilon=self.epsilon, steps=self.steps, step_size=step_size,
                                scale=self.scale, spread=self.spread)
        gym.Wrapper.__init__(self, env)
        #: The unit of epsilon in each element (see "Units").
        self.unit = _unit(box, self.spread)
        self._scores: ActionScores | None = None
        self._key: Any = None
        self._deferred = False
        self._warned = False

    def attach_policy(self, policy: Policy) -> None:
        """Attack ``policy`` from now on (the audit runner calls this with its agent).

        Raises :class:`~pytest_rlaudit.errors.PolicyError` for an agent without
        gradients, and checks the agent's scores on one observation right away.
        """
        from ..agents.gradients import action_scores

        scores = action_scores(policy, self.observation_space, self.action_space)
        probe = _some_observation(cast(spaces.Box, self.observation_space))  # __init__ checked
        pgd_rows(scores, *(probe[None],) * 4, np.zeros_like(probe)[None], steps=np.ones(1, int))
        self._scores = scores
        # Wrappers of one policy and one env's spaces attack through the same network:
        # attack_all batches their rows together.
        self._key = (id(policy), str(self.observation_space), str(self.action_space))

    def defer_attacks(self, deferred: bool = True) -> None:
        """From now on, ``step`` returns each observation as a :class:`~.pgd.Pending`
        attack, for the caller to run with those of other envs in one batch
        (:func:`~.pgd.attack_all`): the audit runner does, over all its env slots.
        Only for a caller that gets the observation straight from this wrapper."""
        self._deferred = deferred

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        pending = self.pending(obs)
        if not self._deferred and isinstance(pending, Pending):
            pending = attack_all([pending])[0]
        return pending, reward, terminated, truncated, info

    def attack(self, obs: Any) -> np.ndarray:
        """The worst observation near ``obs`` (one draw of the random start)."""
        pending = self.pending(obs)
        return attack_all([pending])[0] if isinstance(pending, Pending) else pending

    def pending(self, obs: Any) -> Pending | np.ndarray:
        """The attack on ``obs``, to run (:func:`~.pgd.attack_all`): it draws the random
        start. ``obs`` itself, clean, with a warning, when no policy is attached."""
        seen = np.asarray(obs)
        # Drawn whatever the parameters, so the stream does not depend on them.
        start = self.rng.uniform(-1.0, 1.0, seen.shape)
        if self._scores is None:
            self._warn_unattached()
            return seen
        space = cast(spaces.Box, self.observation_space)  # __init__ checked
        clean = seen.astype(np.float64)
        radius = self.epsilon * self.unit
        low = np.maximum(clean - radius, space.low)
        high = np.minimum(clean + radius, space.high)
        return Pending(self._scores, self._key, seen, clean, np.clip(clean + start * radius, low, high),
                       low, high, radius, self.step_size * self.unit, self.steps)

    def _warn_unattached(self) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                "AdversarialObservation has no policy to attack, so observations pass through "
                "clean: call env.attach_policy(agent) first (audits attach their agent)",
                UserWarning, stacklevel=4,
            )


def _unit(space: spaces.Box, spread: tuple[float, ...] | None) -> np.ndarray:
    """The unit of epsilon per element: the range for integers (images: 0.1 is about 25
    grey levels, as obs_noise), else 1 (absolute) or the element's spread (relative)."""
    if np.issubdtype(space.dtype, np.integer):
        return space.high.astype(np.float64) - space.low.astype(np.float64)
    if spread is None:
        return np.ones(space.shape)
    return np.asarray(spread, dtype=np.float64).reshape(space.shape)


def _some_observation(space: spaces.Box) -> np.ndarray:
    """A point of ``space`` to probe the agent with: its lower bound, else its upper
    bound, else zero, element by element."""
    low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    return np.where(np.isfinite(low), low, np.where(np.isfinite(high), high, 0.0))
