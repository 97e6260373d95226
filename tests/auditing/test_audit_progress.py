"""``audit(progress=...)`` (pytest_rlaudit.auditing.progress): a tqdm bar of episodes done of
total and the time left, a plain line without tqdm, nothing when off; no number changes."""

from __future__ import annotations

import pytest

from pytest_rlaudit import audit
from pytest_rlaudit.auditing import progress as shown_module
from pytest_rlaudit.rollout import progress as progress_module
from pytest_rlaudit.rollout.progress import Snapshot


@pytest.fixture
def at_once(monkeypatch):
    """Progress from the first step, every step (not after 2 s, a few times a second)."""
    monkeypatch.setattr(progress_module, "DELAY", 0.0)
    monkeypatch.setattr(progress_module, "INTERVAL", 0.0)
    monkeypatch.setattr(shown_module, "_told", set())


def numbers(result):
    out = result.to_dict()
    del out["seconds"]
    return out


def test_progress_true_drives_a_tqdm_bar_and_changes_no_number(controller, at_once, capsys):
    pytest.importorskip("tqdm")
    with_bar = audit(controller, "CartPole-v1", scenarios=["delay"], episodes=4, progress=True)
    err = capsys.readouterr().err
    frames = [f for f in err.replace("\r", "\n").splitlines() if f.startswith("rl audit:")]
    assert len(frames) >= 3, err
    assert "/12 episodes" in frames[0]  # nominal, delay and the random reference: 3 x 4
    assert "12/12 episodes" in frames[-1]
    assert any("left" in f for f in frames)
    without = audit(controller, "CartPole-v1", scenarios=["delay"], episodes=4, progress=False)
    assert capsys.readouterr().err == ""
    assert numbers(with_bar) == numbers(without)


def test_by_default_no_bar_when_stderr_is_not_a_terminal(controller, at_once, capsys):
    audit(controller, "CartPole-v1", scenarios=["delay"], episodes=2)
    assert "episodes" not in capsys.readouterr().err


def test_without_tqdm_progress_true_writes_a_plain_line_and_says_how_to_get_the_bar(
        controller, at_once, capsys, monkeypatch):
    monkeypatch.setattr(shown_module, "_has_tqdm", lambda: False)
    audit(controller, "CartPole-v1", scenarios=["delay"], episodes=2, progress=True)
    audit(controller, "CartPole-v1", scenarios=["delay"], episodes=2, progress=True)
    err = capsys.readouterr().err
    assert err.count("pip install tqdm") == 1  # once per process
    assert "\rrl audit: 6/6 episodes" in err
    # and None stays off without tqdm, terminal or not
    monkeypatch.setattr(shown_module, "_interactive", lambda: True)
    audit(controller, "CartPole-v1", scenarios=["delay"], episodes=2)
    assert capsys.readouterr().err == ""


def test_progress_takes_true_false_or_none(controller):
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        audit(controller, "CartPole-v1", scenarios=["delay"], episodes=2, progress="yes")


def test_a_long_env_bound_audit_is_told_of_workers_once(at_once, capsys):
    pytest.importorskip("tqdm")
    bar = shown_module.TqdmBar()
    told = Snapshot(done=10, total=10, elapsed=95.0, left=0.0, suggest_workers=True)
    bar(Snapshot(done=5, total=10, elapsed=50.0, left=45.0, suggest_workers=True))
    bar.close(told)
    again = shown_module.TqdmBar()
    again(told)
    again.close(told)
    err = capsys.readouterr().err
    assert "one process: try workers=\"auto\"" in err
    assert err.count('audit(..., workers="auto")') == 1
    assert "this audit ran 1 min 35 s" in err
