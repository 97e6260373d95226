"""Public facade: robustness audits during stable-baselines3 training
(``pytest_rlaudit.auditing.callback``). Importing it needs stable-baselines3
(``pip install 'pytest-rlaudit[sb3]'``).

>>> from pytest_rlaudit.sb3 import RobustnessCallback
>>> RobustnessCallback("CartPole-v1", scenarios=["jitter", "delay"], audit_freq=5_000).keys()[0]
'robustness/jitter/ratio'
"""

from .auditing.callback import RATING_SCORES, RobustnessCallback

__all__ = ["RobustnessCallback", "RATING_SCORES"]
