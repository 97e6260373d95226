"""ONNX files exported with a batch axis fixed at 1 (Isaac Lab, mjlab, rsl_rl, MuJoCo
Playground; ``torch.onnx.export`` without ``dynamic_axes``) run a whole batch in one
session call, with exactly the actions of the file run row by row; a graph that pins the
batch inside (a Reshape to [1, -1]) falls back to row-by-row calls and says so, as does a
missing ``onnx`` package; mjlab's metadata_props are read and shown; a file with a dynamic
batch axis is left as it is."""

from __future__ import annotations

import pickle
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx_exports import Balance  # noqa: E402

from pytest_rlaudit import as_policy, audit  # noqa: E402
from pytest_rlaudit.world.agents import onnx as onnx_agents  # noqa: E402
from pytest_rlaudit.world.agents.onnx import OnnxPolicy  # noqa: E402

OBS, ACT = 8, 3
OBS_SPACE = spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
ACT_SPACE = spaces.Box(-1.0, 1.0, (ACT,), np.float32)

#: mjlab's metadata_props (rl/exporter_utils.py: lists as comma-separated values)
JOINTS = [f"{leg}_{part}_joint" for leg in ("FL", "FR", "RL", "RR")
          for part in ("hip", "thigh", "calf")]
METADATA = {"joint_names": ",".join(JOINTS), "action_scale": "0.250",
            "default_joint_pos": ",".join(["0.000"] * 12), "observation_names": "base_lin_vel"}


class Mlp(torch.nn.Module):
    """A small actor as rsl_rl exports it: observations in, the action mean out."""

    def __init__(self, pinned: bool = False, mixed: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.hidden = torch.nn.Linear(OBS, 16)
        self.out = torch.nn.Linear(16, ACT)
        self.pinned, self.mixed = pinned, mixed

    def forward(self, obs):
        if self.mixed:  # rows mixed along the batch axis: runs on any batch, other outputs
            obs = obs + obs.sum(0, keepdim=True)
        hidden = torch.tanh(self.hidden(obs))
        if self.pinned:  # a batch of 1 pinned in the graph: Reshape to the constant [1, -1]
            hidden = hidden.reshape(1, -1)
        return self.out(hidden)


def _export(module, path: Path, obs_dim: int = OBS, *, dynamic: bool = False,
            metadata: dict[str, str] | None = None) -> Path:
    extra = {"dynamic_axes": {"obs": {0: "batch"}}} if dynamic else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter (on purpose) and tracer notes
        torch.onnx.export(module.eval(), torch.zeros(1, obs_dim), str(path), dynamo=False,
                          input_names=["obs"], **extra)
    if metadata:  # as mjlab's attach_metadata_to_onnx does
        model = onnx.load(str(path))
        for key, value in metadata.items():
            model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
        onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("batch-one")
    return {
        "fixed": _export(Mlp(), folder / "fixed.onnx", metadata=METADATA),
        "pinned": _export(Mlp(pinned=True), folder / "pinned.onnx"),
        "mixed": _export(Mlp(mixed=True), folder / "mixed.onnx"),
        "dynamic": _export(Mlp(), folder / "dynamic.onnx", dynamic=True),
    }


def _row_by_row(path: Path, obs: np.ndarray) -> np.ndarray:
    """The file as it is, on onnxruntime, one observation per call, clipped as a Box
    action is."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].shape == [1, OBS]  # the file keeps its fixed batch
    out = np.concatenate([session.run(None, {"obs": row[None]})[0] for row in obs])
    return np.clip(out, ACT_SPACE.low, ACT_SPACE.high)


class Counting:
    """An onnxruntime session that counts its calls (the rows of each)."""

    def __init__(self, session):
        self.session = session
        self.calls: list[int] = []

    def run(self, names, feeds, *args):
        self.calls.append(len(next(iter(feeds.values()))))
        return self.session.run(names, feeds, *args)

    def __getattr__(self, name):
        return getattr(self.session, name)


def _bound(path: Path) -> tuple[OnnxPolicy, Counting]:
    policy = as_policy(path)
    assert isinstance(policy, OnnxPolicy)
    policy.bind(OBS_SPACE, ACT_SPACE)
    spy = Counting(policy._session)
    policy._session = spy
    return policy, spy


def _observations(n: int = 64) -> np.ndarray:
    return np.random.default_rng(7).normal(0.0, 2.0, (n, OBS)).astype(np.float32)


def test_a_batch_one_export_runs_64_rows_in_one_call_with_the_row_by_row_actions(files):
    policy, spy = _bound(files["fixed"])
    obs = _observations()
    actions, _ = policy.act(obs, None)
    assert spy.calls == [64]
    assert np.array_equal(actions, _row_by_row(files["fixed"], obs))
    assert policy.batched and policy.session.get_inputs()[0].shape == ["batch", OBS]
    assert "one call per batch (fixed batch of 1 made symbolic" in policy.describe()
    assert "exactly" in policy.describe()
    odd = obs[:37]  # padded to 48 rows, still one call
    assert np.array_equal(policy.act(odd, None)[0], _row_by_row(files["fixed"], odd))
    assert spy.calls == [64, 48]


@pytest.mark.parametrize("kind", ["pinned", "mixed"])  # the batched call fails; it differs
def test_a_graph_that_pins_the_batch_runs_row_by_row_and_says_so(files, kind):
    policy, spy = _bound(files[kind])
    obs = _observations()
    actions, _ = policy.act(obs, None)
    assert spy.calls == [1] * 64
    assert np.array_equal(actions, _row_by_row(files[kind], obs))
    assert not policy.batched
    text = policy.describe()
    assert "row by row (fixed batch of 1; made symbolic, it fails or differs" in text
    assert "Reshape to [1, -1]" in text and "Reshape" in repr(policy)


def test_without_the_onnx_package_a_batch_one_export_runs_row_by_row(files, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # onnxruntime alone installed
    policy, spy = _bound(files["fixed"])
    obs = _observations(5)
    assert np.array_equal(policy.act(obs, None)[0], _row_by_row(files["fixed"], obs))
    assert spy.calls == [1] * 5 and not policy.batched
    assert "the onnx package, which would make it symbolic, is not installed" in policy.describe()
    assert "pytest-rlaudit[onnx]" in policy.describe()


def test_metadata_props_are_read_and_shown_short(files):
    policy = as_policy(files["fixed"])
    assert policy.metadata == METADATA
    text = policy.describe()
    assert "joints: FL_hip_joint, FL_thigh_joint, FL_calf_joint, FR_hip_joint, ... (12 in all)" in text
    assert "action scale: 0.250" in text
    assert "other metadata: default_joint_pos, observation_names" in text
    assert "RR_calf_joint" not in text  # cut short
    assert "joints: FL_hip_joint" in repr(policy) and "\n" not in repr(policy)
    assert as_policy(files["dynamic"]).metadata == {}


def test_a_dynamic_batch_axis_is_left_as_it_is(files, monkeypatch):
    def refuse(path):
        raise AssertionError("a dynamic batch axis needs no relaxing")

    monkeypatch.setattr(onnx_agents, "relaxed_model", refuse)
    policy, spy = _bound(files["dynamic"])
    assert policy.session.get_inputs()[0].shape == ["batch", OBS]  # the file's own axis
    assert policy.batched and policy.batching == "dynamic batch axis"
    obs = _observations()
    policy.act(obs, None)
    assert spy.calls == [64]


def test_a_copy_reopens_batched_without_checking_again(files, monkeypatch):
    policy = as_policy(files["fixed"])
    monkeypatch.setattr(onnx_agents, "agrees", lambda *args: pytest.fail("checked again"))
    copy = pickle.loads(pickle.dumps(policy))
    assert copy._session is None
    assert copy.session.get_inputs()[0].shape == ["batch", OBS] and copy.batched
    obs = _observations(16)
    copy.bind(OBS_SPACE, ACT_SPACE)
    assert np.array_equal(copy.act(obs, None)[0], _row_by_row(files["fixed"], obs))


def test_a_cartpole_audit_of_a_batch_one_export_runs_batched(tmp_path):
    fixed = _export(Balance(), tmp_path / "balance.onnx", 4)
    dynamic = _export(Balance(), tmp_path / "balance-dynamic.onnx", 4, dynamic=True)
    assert as_policy(fixed).batched
    result = audit(str(fixed), "CartPole-v1", scenarios=["nominal"], episodes=2)
    assert len(result.nominal.returns) == 2 and result.nominal.returns.mean() > 100
    same = audit(str(dynamic), "CartPole-v1", scenarios=["nominal"], episodes=2)
    assert result.nominal.returns.tolist() == same.nominal.returns.tolist()
