"""A torch-free CartPole agent: a hand-tuned linear controller, batched in numpy.

Push right when a weighted sum of the state is positive. The weights lean on the pole
angle and damp the angular velocity; tuned by a small grid search over audits of the
deployment and stress suites, so it keeps balancing when the control period jitters
or spikes, unlike the bundled PPO model.

>>> import numpy as np
>>> cartpole_controller(np.array([[0.0, 0.0, 0.05, 0.0], [0.0, 0.0, -0.05, 0.0]]))
array([1, 0])
"""

from __future__ import annotations

import numpy as np

#: Weights on (cart position, cart velocity, pole angle, pole angular velocity).
WEIGHTS = np.array([0.02, 0.0, 1.0, 0.2])


def cartpole_controller(obs: np.ndarray) -> np.ndarray:
    """Map a batch of CartPole observations (shape (B, 4)) to actions (shape (B,))."""
    return (np.asarray(obs) @ WEIGHTS > 0).astype(np.int64)
