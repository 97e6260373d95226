"""The batched lock-step runner of paired episodes.

Imports nothing: name the module you need (so a light one stays light).
"""
