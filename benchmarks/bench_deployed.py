"""Benchmark of the non-finite check on the policy call of deployed, torch and SB3 agents.

What it measures. Every call of ``act`` of an ONNX, TorchScript or torch ``nn.Module``
agent checks the raw output (per-action scores, before the argmax that would hide a NaN)
with one ``np.isfinite(out).all()`` per batch (issue 43), and so does SB3's fast path on
the logits of a PPO and the mean of a SAC actor (``sb3_fast.finite_outputs``), untrained
models of SB3's default nets on CartPole-v1 (64x64) and Pendulum-v1 (256x256). This is the hot path of every
audit of such an agent, so its cost is measured against the same call without the check:
the policy's ``act`` with :func:`pytest_rlaudit.world.agents.base.check_finite` as it is
(``checked``) and replaced by a no-op (``unchecked``), on the agents people deploy for the
most common env: CartPole-sized (4 observations, 2 scores) MLPs of SB3's default size
(64x64), exported to ONNX (onnxruntime, one thread) and TorchScript, and the module itself.
Small nets are the worst case for the check's share of a call.

For batches of 16, 64 and 256 rows (seeded observations), each way is timed as the median
over ``--repeats`` rounds of the mean time of ``--calls`` back-to-back calls (rounds
interleave the two ways, alternating their order, to spread the noise of a shared
machine), in microseconds per call. Printed: one line per agent and batch size with both
medians, their difference and their ratio checked/unchecked. Target: the check adds at
most 5 microseconds per call (one ``isfinite`` pass over a few hundred floats costs about
1.5; the rest is the call). On these smallest nets that is up to a tenth of a bare policy
call, and a few percent of an audit's decision step, whose env steps (16 CartPole steps
and more) cost several times the call.

Run (from the repository root; about half a minute)::

    python benchmarks/bench_deployed.py
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from gymnasium import spaces

from pytest_rlaudit import as_policy
from pytest_rlaudit.world.agents import base, exported, sb3_fast
from pytest_rlaudit.world.agents import sb3 as sb3_agents
from pytest_rlaudit.world.agents import torch as torch_agents

_FINITE_OUTPUTS = sb3_fast.finite_outputs


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                               torch.nn.Tanh(), torch.nn.Linear(64, 2)).eval()


def _agents(folder: Path) -> dict[str, tuple[object, int]]:
    net = _net()
    onnx_path, script_path = folder / "policy.onnx", folder / "policy.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, torch.zeros(1, 4), str(onnx_path), dynamo=False,
                          input_names=["obs"], dynamic_axes={"obs": {0: "batch"}})
        torch.jit.save(torch.jit.trace(net, torch.zeros(1, 4)), str(script_path))
    agents = {"onnx": as_policy(str(onnx_path)), "torchscript": as_policy(str(script_path)),
              "nn.Module": as_policy(net)}
    for policy in agents.values():
        policy.bind(spaces.Box(-5, 5, (4,)), spaces.Discrete(2))
    out: dict[str, tuple[object, int]] = {name: (policy, 4) for name, policy in agents.items()}
    from stable_baselines3 import PPO, SAC

    for name, algo, env in (("SB3 PPO", PPO, "CartPole-v1"), ("SB3 SAC", SAC, "Pendulum-v1")):
        model = algo("MlpPolicy", env, device="cpu", seed=0)
        policy = as_policy(model)
        policy.bind(model.observation_space, model.action_space)
        out[name] = (policy, model.observation_space.shape[0])
    return out


def _set_check(on: bool) -> None:
    check = base.check_finite if on else (lambda out, name: None)
    exported.check_finite = check
    torch_agents.check_finite = check
    tensors = _FINITE_OUTPUTS if on else (lambda out, name: None)
    sb3_agents.finite_outputs = tensors
    sb3_fast.finite_outputs = tensors


def _time(policy, obs: np.ndarray, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        policy.act(obs, None)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        agents = _agents(Path(folder))
        ratios, added = [], []
        for name, (policy, size) in agents.items():
            for rows in (16, 64, 256):
                obs = rng.normal(size=(rows, size)).astype(np.float32)
                times: dict[bool, list[float]] = {True: [], False: []}
                for r in range(args.repeats):
                    for on in ((True, False) if r % 2 else (False, True)):
                        _set_check(on)
                        times[on].append(_time(policy, obs, args.calls))
                _set_check(True)
                checked, unchecked = statistics.median(times[True]), statistics.median(times[False])
                ratios.append(checked / unchecked)
                added.append(checked - unchecked)
                print(f"{name:12s} {rows:4d} rows: checked {checked:8.1f} us  unchecked "
                      f"{unchecked:8.1f} us  added {checked - unchecked:5.1f} us  "
                      f"ratio {checked / unchecked:.3f}")
        print(f"median ratio checked/unchecked over all: {statistics.median(ratios):.3f} "
              f"(max {max(ratios):.3f}); median added {statistics.median(added):.1f} us per "
              f"call (max {max(added):.1f}; target <= 5)")


if __name__ == "__main__":
    main()
