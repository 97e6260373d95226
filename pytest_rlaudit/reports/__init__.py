"""Renderers of audit records, without pytest: terminal rows, Markdown, JSON, charts,
the HTML page, badges and failure GIFs.

Imports nothing: name the module you need (so a light one stays light).
"""
