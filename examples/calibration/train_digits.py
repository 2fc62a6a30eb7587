"""Train the incident's classifier on scikit-learn's bundled 8x8 digits and export it to ONNX.

Run once, in a separate venv with torch and scikit-learn (the test suite needs neither)::

    python -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch scikit-learn onnx
    /tmp/torchenv/bin/python examples/calibration/train_digits.py

Writes ``digits_mnet.onnx`` (MobileNet-style: depthwise conv + BN + ReLU6 blocks, trained with a fixed seed)
and ``digits.npz`` (the digits, uint8 pixel values 0..16, and labels, with the split used here) next to this
file.  The digits data is scikit-learn's copy of the UCI optical digits set (BSD-3-Clause, scikit-learn).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

SEED = 12
HERE = Path(__file__).parent


def block(cin: int, cout: int, stride: int) -> nn.Sequential:
    """Depthwise 3x3 + BN + ReLU6, then pointwise 1x1 + BN + ReLU6 (MobileNet v1 style)."""
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin), nn.ReLU6(),
        nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU6(),
    )


class DigitsNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6())
        self.block1 = block(16, 32, 1)
        self.block2 = block(32, 64, 2)
        self.block3 = block(64, 64, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block3(self.block2(self.block1(self.stem(x))))
        return self.classifier(torch.flatten(self.pool(x), 1))


def main() -> None:
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    digits = load_digits()
    pixels = digits.images.astype(np.uint8)  # (1797, 8, 8), values 0..16
    labels = digits.target.astype(np.int64)
    order = rng.permutation(len(labels))
    train, test = order[:1200], order[1200:]
    x = torch.from_numpy(pixels.astype(np.float32)[:, None] / 16.0)
    y = torch.from_numpy(labels)
    model = DigitsNet()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _epoch in range(40):
        model.train()
        perm = torch.from_numpy(rng.permutation(train))
        for i in range(0, len(perm), 64):
            idx = perm[i : i + 64]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        acc = (model(x[test]).argmax(1) == y[test]).float().mean().item()
    print(f"float test accuracy: {acc:.4f} on {len(test)} samples", file=sys.stderr)
    dummy = torch.zeros(1, 1, 8, 8)
    torch.onnx.export(model, (dummy,), str(HERE / "digits_mnet.onnx"), input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17, dynamo=False)
    np.savez_compressed(HERE / "digits.npz", pixels=pixels, labels=labels, train=train, test=test)


if __name__ == "__main__":
    main()
