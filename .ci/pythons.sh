#!/usr/bin/env bash
# CI stage "pythons" (.ci/run): every Python pyproject.toml admits besides 3.11 (which the
# other stages run, with torch), as a user installs the plugin there. For each one found
# under pyenv (the newest patch release of each minor version), in a brand-new virtualenv:
#   1. the built wheel, with the extras that need no torch, and nothing else of the tree;
#   2. an unrelated test in a folder of its own: installing the plugin never breaks pytest,
#      and the plugin loaded (no "could not load" line);
#   3. the suite's tests that need no torch (no CPU torch wheel is at hand but for 3.11):
#      tests/torch_free.py skips the rest there. They run from a copy of the clone without
#      the package, so they import the installed wheel, never the tree.
#     .ci/pythons.sh WHEEL WORK     (WORK: a temporary folder; pyenv root: $PYENV_ROOT or ~/.pyenv)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
wheel=$1
work=$2
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
host=${PYTHON:-python3}

# The interpreters: minor versions requires-python admits, but 3.11; the newest patch of each.
mapfile -t pythons < <("$host" - "$root/pyproject.toml" "$pyenv_root/versions" <<'EOF'
import re, sys, tomllib
from pathlib import Path
spec = tomllib.loads(Path(sys.argv[1]).read_text())["project"]["requires-python"]
low = tuple(map(int, re.fullmatch(r">=\s*(\d+)\.(\d+)", spec.strip()).groups()))  # ">=3.10" only
newest = {}
for exe in Path(sys.argv[2]).glob("*/bin/python3"):
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", exe.parent.parent.name)
    if m and (v := tuple(map(int, m.groups())))[:2] >= low and v[:2] != (3, 11):
        newest[v[:2]] = max(newest.get(v[:2], v), v)
for v in sorted(newest.values()):
    print(f"{sys.argv[2]}/{'.'.join(map(str, v))}/bin/python3")
EOF
)
[ "${#pythons[@]}" -gt 0 ] || { echo "no admitted Python but 3.11 under $pyenv_root/versions"; exit 1; }

# The clone without the package: tests, their data and config, the files they read
clone="$work/clone-without-package"
mkdir -p "$clone"
cp -r "$root/tests" "$root/examples" "$root/docs" "$root/README.md" "$root/pyproject.toml" "$root/conftest.py" "$clone/"
find "$clone" -name __pycache__ -prune -exec rm -rf {} +

for py in "${pythons[@]}"; do
    start=$(date +%s)
    version=$("$py" -c 'import sys; print(".".join(map(str, sys.version_info[:3])))')
    venv="$work/python-$version"
    echo "== Python $version: venv $venv"
    "$py" -m venv "$venv"
    # hypothesis, matplotlib, tqdm, minari: the extras that need no torch (replay's minari is
    # 0.5.3 on 3.10, 0.5.4 from 3.11 on); pyyaml reads zoo folders;
    # sybil runs the docs' examples (tests/test_docs_reference.py); the neighbour plugins of
    # tests/plugin/test_neighbours.py
    "$venv/bin/python" -m pip install --quiet "pytest-rlaudit[hypothesis,plot,progress,replay] @ file://$wheel" \
        pyyaml sybil pytest-rerunfailures pytest-randomly pytest-timeout pytest-html
    if "$venv/bin/python" -c 'import torch' 2>/dev/null; then
        echo "Python $version: torch is installed, so this is not the stage without it"; exit 1
    fi
    (   # 2. a user's unrelated test
        mkdir "$work/unrelated-$version" && cd "$work/unrelated-$version"
        printf '[pytest]\n' > pytest.ini
        printf 'def test_unrelated():\n    assert 1 + 1 == 2\n' > test_unrelated.py
        "$venv/bin/pytest" -q -p no:cacheprovider > out.txt 2>&1 || { cat out.txt; exit 1; }
        cat out.txt
        if grep -q "could not load" out.txt; then exit 1; fi
        "$venv/bin/pytest" --help > help.txt  # the plugin's options: the plugin, not its stand-in
        grep -q -- "--rl-audit" help.txt
    )
    (   # 3. the tests that need no torch, against the installed wheel
        cd "$clone"
        where=$("$venv/bin/python" -c 'import pytest_rlaudit; print(pytest_rlaudit.__file__)')
        case $where in "$venv"/*) ;; *) echo "imports $where, not the wheel"; exit 1;; esac
        # Spread over the cores as the README's command does (one process is the lowest
        # stage's check; three Pythons in one process each were half of .ci/run's time), and
        # not the inner runs under xdist (the slowest third, and xdist's channel is the same
        # on every Python); the browser check of the HTML report runs in the 3.11 stages,
        # where chromium is installed.
        RLAUDIT_NO_BROWSER=1 "$venv/bin/python" -m pytest tests -q -p no:cacheprovider -n auto \
            -k "not xdist and not n2" --durations=5
    )
    echo "== Python $version: $(( $(date +%s) - start )) s"
done
