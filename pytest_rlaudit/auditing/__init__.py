"""Audits and their results: ``audit()``, diagnoses, records, baselines, comparisons.

Imports nothing: name the module you need (so a light one stays light).
"""
