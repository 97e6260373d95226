"""Verdicts on agents: ``assert_robust``, regressions, determinism, collapse, falsification.

Imports nothing: name the module you need (so a light one stays light).
"""
