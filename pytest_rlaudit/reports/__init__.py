"""Renderers of audit records, without pytest: terminal rows, Markdown, JSON, chart.

Imports nothing: name the module you need (so a light one stays light).
"""
