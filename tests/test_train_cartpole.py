"""examples/train_cartpole.py --seeds: one run per seed, in a folder audit_runs globs."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "train_cartpole.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("train_cartpole", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seeds_parse_as_a_comma_separated_list(script):
    assert script.parse_args(["--seeds", "0,1,2"]).seeds == [0, 1, 2]
    assert script.parse_args([]).seeds is None
    for bad in (["--seeds", "0,a"], ["--seeds", "1,1"], ["--seeds", ","],
                ["--seeds", "0,1", "--seed", "3"]):
        with pytest.raises(SystemExit):
            script.parse_args(bad)


def test_seeds_train_one_reproducible_run_per_seed(script, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(script, "evaluate", lambda model: [0.0])  # 20 episodes: seconds
    args = ["--seeds", "0,1", "--timesteps", "64", "--out"]
    assert script.main([*args, str(tmp_path / "a")]) == 0
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["seed_0.zip", "seed_1.zip"]
    assert "audit them together" in capsys.readouterr().out
    script.main(["--seeds", "0", "--timesteps", "64", "--out", str(tmp_path / "b")])

    def weights(path: Path) -> bytes:
        with zipfile.ZipFile(path) as z:
            return z.read("policy.pth")

    assert weights(tmp_path / "a" / "seed_0.zip") == weights(tmp_path / "b" / "seed_0.zip")
    assert weights(tmp_path / "a" / "seed_0.zip") != weights(tmp_path / "a" / "seed_1.zip")
