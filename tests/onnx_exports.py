"""Small torch modules the ONNX export tests write to files (import after
``pytest.importorskip("torch")``)."""

from __future__ import annotations

import torch


class Balance(torch.nn.Module):
    """CartPole's lean controller as a linear layer: scores [-(theta + omega), theta +
    omega]."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 2, bias=False)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.weight[0, 2:] = -1.0
            self.linear.weight[1, 2:] = 1.0

    def forward(self, obs):
        return self.linear(obs)
