"""What an exported robot policy says of itself (an ONNX file's batching, and mjlab's
joint names and action scale in its metadata) is shown with its audit: in the result's
text, in the terminal, in summary.json and summary.md, and on the HTML page."""

from __future__ import annotations

import json
import warnings

import pytest
from inner_runs import without_figures

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_exports import Balance  # noqa: E402

from pytest_rlaudit import as_policy, audit  # noqa: E402

#: mjlab's metadata_props (comma-separated lists), for CartPole's two joints
METADATA = {"joint_names": "slider,hinge", "action_scale": "1.0",
            "default_joint_pos": "0.0,0.0"}
SHOWN = ["joints: slider, hinge", "action scale: 1.0", "other metadata: default_joint_pos"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Balance exported as Isaac Lab and mjlab export (a fixed batch of 1), with mjlab's
    metadata; loaded once here, so the in-process runs import nothing afresh."""
    path = tmp_path_factory.mktemp("mjlab") / "policy.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's notes
        torch.onnx.export(Balance().eval(), torch.zeros(1, 4), str(path), dynamo=False,
                          input_names=["obs"])
    model = onnx.load(str(path))
    for key, value in METADATA.items():
        model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    onnx.save(model, str(path))
    as_policy(path)
    return path


def test_the_result_carries_what_the_policy_says_of_itself(exported):
    result = audit(str(exported), "CartPole-v1", scenarios=["delay"], episodes=2)
    details = result.agent_details
    assert details[0].startswith("batches: one call per batch (fixed batch of 1 made symbolic")
    assert list(details[1:]) == SHOWN
    assert all(f"\nagent: {line}" in str(result) for line in SHOWN)
    assert result.to_dict()["agent_details"] == list(details)
    # a policy that says nothing of itself: nothing shown
    plain = audit(lambda obs: (obs[:, 2] > 0).astype(int), "CartPole-v1", ["delay"], episodes=2)
    assert plain.agent_details == () and "agent:" not in str(plain)


def test_the_reports_show_it(pytester: pytest.Pytester, exported):
    with without_figures():
        result = pytester.runpytest("--rl-audit", f"--rl-agent={exported}", "--rl-env",
                                    "CartPole-v1", "--rl-episodes", "6", "--rl-scenarios",
                                    "delay", "--rl-min-rating", "FAIL", "--rl-report=out",
                                    "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"  agent: {line}" for line in SHOWN], consecutive=True)
    out = pytester.path / "out"
    doc = json.loads((out / "summary.json").read_text())
    (record,) = doc["results"]
    assert record["agent_details"][1:] == SHOWN
    assert doc["aggregates"][0]["agent_details"] == record["agent_details"]
    markdown = (out / "summary.md").read_text()
    assert all(f"  - agent: {line}" in markdown for line in SHOWN)
    page = (out / "index.html").read_text()
    assert all(f"<li>{line}</li>" in page for line in SHOWN)
    assert '<h3>Agent</h3><ul class="agent">' in page  # under a heading of its own
