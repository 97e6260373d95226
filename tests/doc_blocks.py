"""The fenced code blocks of a Markdown page, for the tests that read the docs' commands
and outputs (tests/test_docs_outputs.py, tests/plugin/test_ci_gate_tutorial.py).

>>> [(m.group(1), m.group(2)) for m in BLOCK.finditer("```bash\\nls\\n```\\n")]
[('bash', 'ls\\n')]
"""

import re

#: A fenced block: its language (group 1) and its text (group 2).
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
