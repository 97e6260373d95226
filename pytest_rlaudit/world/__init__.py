"""The world the agent acts in: envs, agents, perturbation wrappers, scenarios, schedules.

No pytest, no scipy.

Imports nothing: name the module you need (so a light one stays light).
"""
