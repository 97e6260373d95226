"""Non-finite outputs are errors for every agent kind (issue 43 point 3), and deployed
files that misbehave say so (point 5): an ONNX model whose scores are NaN on about half
of CartPole's states, a TorchScript file giving inf, a callable's NaN Box actions and a
torch module's NaN logits each stop the audit with a RolloutError naming the step and
showing the observation (never a rated audit); an ONNX input without a declared shape
runs; a scripted forward that raises mid-episode names the file, the step and the
model's own message."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pytest_rlaudit import audit  # noqa: E402
from pytest_rlaudit.errors import NonFiniteOutputError, RolloutError  # noqa: E402


class Balance(torch.nn.Module):
    """A CartPole controller that keeps the pole up (push towards where it falls), as
    per-action scores; ``nan_when_rising``: NaN scores where the pole's angular velocity
    is positive (about half the states); ``inf``: an infinite score there instead."""

    def __init__(self, bad: str | None = None):
        super().__init__()
        self.bad = bad

    def forward(self, obs):
        lean = obs[:, 2:3] + obs[:, 3:4]
        scores = torch.cat([-lean, lean], dim=1)
        if self.bad is None:
            return scores
        fill = float("nan") if self.bad == "nan" else float("inf")
        return torch.where(obs[:, 3:4] > 0, torch.full_like(scores, fill), scores)


def _onnx(module, path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter (on purpose) and tracer notes
        torch.onnx.export(module.eval(), torch.zeros(1, 4), str(path), dynamo=False,
                          input_names=["obs"], dynamic_axes={"obs": {0: "batch"}})
    return str(path)


def _script(module, path, *, trace=True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch 2.13 deprecates TorchScript; tracer notes
        made = torch.jit.trace(module.eval(), torch.zeros(1, 4)) if trace else torch.jit.script(module)
        torch.jit.save(made, str(path))
    return str(path)


def _stopped(agent, env="CartPole-v1", size=4):
    """The error an audit of ``agent`` stops with (it must not return a rated audit),
    checked to name the step and show an observation of ``size`` numbers."""
    with pytest.raises(RolloutError) as caught:
        audit(agent, env, scenarios=["nominal"], episodes=2)
    err = caught.value
    text = str(err)
    assert "non-finite (NaN or infinite)" in text
    assert err.step is not None and f"agent step {err.step}" in text
    number = r"-?\d+(\.\d+)?(e-?\d+)?"
    assert re.search(r"on the observation \[" + ", ".join([number] * size) + r"\]", text), text
    return err


def test_an_onnx_model_with_nan_scores_on_half_the_states_is_an_error(tmp_path):
    err = _stopped(_onnx(Balance("nan"), tmp_path / "nan.onnx"))
    assert "[nan, nan]" in str(err)
    assert isinstance(err.__cause__, NonFiniteOutputError)


def test_the_same_controller_without_nan_audits(tmp_path):
    """The control: the model of the test above is a good one where it is finite."""
    result = audit(_onnx(Balance(), tmp_path / "ok.onnx"), "CartPole-v1",
                   scenarios=["nominal"], episodes=2)
    assert result.nominal.returns.mean() > 100


def test_a_torchscript_file_giving_inf_is_an_error(tmp_path):
    err = _stopped(_script(Balance("inf"), tmp_path / "inf.pt"))
    assert "inf" in str(err)


def test_a_callable_returning_nan_box_actions_is_an_error():
    def policy(obs):  # Pendulum: NaN torque where cos(theta) < 0 (hanging down)
        torque = np.clip(-obs[:, 2:3], -2.0, 2.0)
        return np.where(obs[:, :1] < 0, np.nan, torque).astype(np.float32)

    err = _stopped(policy, "Pendulum-v1", size=3)
    assert "[nan]" in str(err)


def test_a_torch_module_giving_nan_logits_is_an_error():
    net = Balance("nan")
    err = _stopped(net)
    assert isinstance(err.__cause__, NonFiniteOutputError)


def test_an_onnx_input_without_a_declared_shape_runs_as_given(tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    # scores = obs @ W: [-(theta + omega), theta + omega], the controller above
    weights = np.zeros((4, 2), dtype=np.float32)
    weights[2:, 0], weights[2:, 1] = -1.0, 1.0
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["scores"])], "undeclared",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, None)],  # no shape at all
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)],
        [helper.make_tensor("W", TensorProto.FLOAT, [4, 2], weights.ravel().tolist())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "undeclared.onnx"
    onnx.save(model, str(path))
    result = audit(str(path), "CartPole-v1", scenarios=["nominal"], episodes=2)
    assert result.nominal.returns.mean() > 100


class RaisesWhenFar(torch.nn.Module):
    """The controller above, whose forward raises once the cart is off centre: after the
    probe on a zero observation, mid-episode."""

    def forward(self, obs):
        if bool((obs[:, 0].abs() > 0.05).any()):
            raise RuntimeError("cart off centre: refusing to act")
        lean = obs[:, 2:3] + obs[:, 3:4]
        return torch.cat([-lean, lean], dim=1)


def test_a_scripted_forward_that_raises_names_the_file_the_step_and_the_model(tmp_path):
    path = _script(RaisesWhenFar(), tmp_path / "raises.pt", trace=False)
    with pytest.raises(RolloutError) as caught:
        audit(path, "CartPole-v1", scenarios=["nominal"], episodes=2)
    text = str(caught.value)
    assert path in text and "raised on the env's observations" in text
    assert caught.value.step and f"agent step {caught.value.step}" in text
    assert "cart off centre: refusing to act" in text
    assert "Is it the model for this env?" not in text


def test_an_onnx_model_failing_mid_episode_names_the_file_the_step_and_onnxruntime(tmp_path):
    """onnxruntime's own exception (a Gather index out of bounds once the cart is off
    centre), after the model ran on the probe: the file, the step and the message."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    weights = np.zeros((4, 2), dtype=np.float32)
    weights[2:, 0], weights[2:, 1] = -1.0, 1.0
    nodes = [
        helper.make_node("MatMul", ["obs", "W"], ["scores"]),
        helper.make_node("Slice", ["obs", "zero", "one", "one"], ["x"]),  # the cart position
        helper.make_node("Abs", ["x"], ["far"]),
        helper.make_node("Greater", ["far", "limit"], ["off"]),
        helper.make_node("Cast", ["off"], ["index"], to=TensorProto.INT64),
        helper.make_node("Mul", ["index", "five"], ["beyond"]),  # 0, or 5: out of bounds
        helper.make_node("Gather", ["table", "beyond"], ["shift"]),
        helper.make_node("Add", ["scores", "shift"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "fails_off_centre",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [helper.make_tensor("W", TensorProto.FLOAT, [4, 2], weights.ravel().tolist()),
         helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
         helper.make_tensor("one", TensorProto.INT64, [1], [1]),
         helper.make_tensor("limit", TensorProto.FLOAT, [], [0.05]),
         helper.make_tensor("five", TensorProto.INT64, [], [5]),
         helper.make_tensor("table", TensorProto.FLOAT, [2], [0.0, 0.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = str(tmp_path / "fails.onnx")
    onnx.save(model, path)
    with pytest.raises(RolloutError) as caught:
        audit(path, "CartPole-v1", scenarios=["nominal"], episodes=2)
    text = str(caught.value)
    assert path in text and "raised on the env's observations" in text
    assert caught.value.step and f"agent step {caught.value.step}" in text
    assert "Gather" in text or "out of" in text  # onnxruntime's own words kept
    assert "Is it the model for this env?" not in text


def test_an_sb3_dqn_with_nan_q_values_is_an_error():
    """SB3's DQN takes the argmax of its Q-values: NaN ones would be action 0, silently."""
    from stable_baselines3 import DQN

    model = DQN("MlpPolicy", "CartPole-v1", device="cpu", seed=0,
                policy_kwargs={"net_arch": [8]})
    with torch.no_grad():
        model.policy.q_net.q_net[-1].bias[1] = float("nan")
    err = _stopped(model)
    assert ", nan], which is non-finite" in str(err)  # the Q-values, the second NaN
    assert isinstance(err.__cause__, NonFiniteOutputError)


@pytest.mark.parametrize("algo", ["PPO", "SAC"])
def test_an_sb3_model_with_an_infinite_mean_action_is_an_error(algo):
    """An infinite mean would be clipped (PPO) or squashed by tanh (SAC) to the action's
    bound: a finite action that says nothing of the agent."""
    import stable_baselines3

    model = getattr(stable_baselines3, algo)("MlpPolicy", "Pendulum-v1", device="cpu", seed=0,
                                             policy_kwargs={"net_arch": [8]})
    last = model.policy.action_net if algo == "PPO" else model.policy.actor.mu
    with torch.no_grad():
        last.bias[0] = float("inf")
    err = _stopped(model, "Pendulum-v1", size=3)
    assert "[inf], which is non-finite" in str(err)
    assert isinstance(err.__cause__, NonFiniteOutputError)


def test_an_sb3_model_with_nan_logits_names_the_observation():
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", "CartPole-v1", device="cpu", seed=0, policy_kwargs={"net_arch": [8]})
    with torch.no_grad():
        model.policy.action_net.bias[0] = float("nan")
    assert isinstance(_stopped(model).__cause__, NonFiniteOutputError)
