"""Torchvision-size models for the benchmarks: MobileNetV2 (width 1.0, 224x224, 1000 classes, ~3.5 M parameters)
and ResNet-50 (224x224, 1000 classes, ~25.6 M parameters, a ~100 MB FP32 engine).

Made with ``onnx.helper`` and a fixed seed, without torch.  MobileNetV2: the
standard layout (stem conv 3->32 stride 2, the 17 inverted residual blocks of
the paper's table 2, 1x1 conv to 1280, global average pool, 1000-way Gemm),
with BatchNormalization and ReLU6 (Clip) as the torchvision export has them.
ResNet-50: torchvision's ``resnet50`` (7x7 stem conv stride 2, 3x3 max pool,
bottleneck stages of 3, 4, 6 and 3 blocks at widths 64-512 expanded 4x to
256-2048, stride on the 3x3 conv, 1x1 projection shortcuts, global average
pool, 1000-way Gemm), with BatchNormalization and ReLU.
``python benchmarks/models.py OUT.onnx [resnet50]`` writes one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import TensorProto, helper

from examples.models import OPSET, _Graph, save
from pytest_trt.config import BuildConfig, Profile

if TYPE_CHECKING:
    from pytest_trt.backends.base import Backend
    from pytest_trt.engines.engine import Engine

#: (expansion t, output channels c, repeats n, first stride s), MobileNetV2 table 2
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2_224(*, batch: int | str = "N", seed: int = 0, num_classes: int = 1000) -> onnx.ModelProto:
    g = _Graph(seed)
    x = g.relu6("stem/relu6", g.bn("stem/bn", g.conv("stem/conv", "input", 3, 32, 3, stride=2), 32))
    cin, index = 32, 0
    for t, cout, n, s in SETTINGS:
        for r in range(n):
            index += 1
            x, cin = g.inverted_residual(f"block{index}", x, cin, t, cout, s if r == 0 else 1), cout
    x = g.relu6("head/relu6", g.bn("head/bn", g.conv("head/conv", x, cin, 1280, 1), 1280))
    return _classifier_head(g, x, 1280, "classifier", "mobilenet_v2_224", batch, num_classes)


#: (bottleneck width, blocks, first stride) of ResNet-50's four stages
RESNET50_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))


def _bottleneck(g: _Graph, p: str, x: str, cin: int, width: int, stride: int) -> str:
    """1x1 reduce, 3x3 (stride here, as torchvision's V1.5), 1x1 expand to 4x width, plus the shortcut."""
    cout = 4 * width
    y = g.relu(f"{p}/relu1", g.bn(f"{p}/bn1", g.conv(f"{p}/conv1", x, cin, width, 1), width))
    y = g.relu(f"{p}/relu2", g.bn(f"{p}/bn2", g.conv(f"{p}/conv2", y, width, width, 3, stride=stride), width))
    y = g.bn(f"{p}/bn3", g.conv(f"{p}/conv3", y, width, cout, 1), cout)
    shortcut = x
    if stride != 1 or cin != cout:
        shortcut = g.bn(f"{p}/downsample/bn", g.conv(f"{p}/downsample/conv", x, cin, cout, 1, stride=stride), cout)
    g.nodes.append(helper.make_node("Add", [y, shortcut], [f"{p}/add:out"], name=f"{p}/add"))
    return g.relu(f"{p}/relu3", f"{p}/add:out")


def resnet50_224(*, batch: int | str = "N", seed: int = 0, num_classes: int = 1000) -> onnx.ModelProto:
    g = _Graph(seed)
    x = g.relu("stem/relu", g.bn("stem/bn", g.conv("stem/conv", "input", 3, 64, 7, stride=2), 64))
    g.nodes.append(helper.make_node("MaxPool", [x], ["stem/pool:out"], name="stem/pool", kernel_shape=[3, 3],
                                    strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = "stem/pool:out", 64
    for stage, (width, blocks, stride) in enumerate(RESNET50_STAGES, start=1):
        for b in range(blocks):
            x = _bottleneck(g, f"layer{stage}.{b}", x, cin, width, stride if b == 0 else 1)
            cin = 4 * width
    return _classifier_head(g, x, cin, "fc", "resnet50_224", batch, num_classes)


def parameters(model: onnx.ModelProto) -> int:
    """Trainable parameters (conv/Gemm weights, BN scale and bias), as torchvision counts them."""
    skip = (".mean", ".var", ".min", ".max")
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer if not t.name.endswith(skip))


def write(path: str | Path, **kwargs: object) -> Path:
    return save(mobilenet_v2_224(**kwargs), path)  # type: ignore[arg-type]


def write_resnet50(path: str | Path, **kwargs: object) -> Path:
    return save(resnet50_224(**kwargs), path)  # type: ignore[arg-type]


def _classifier_head(g: _Graph, x: str, cin: int, fc: str, name: str, batch: int | str,
                     num_classes: int) -> onnx.ModelProto:
    """Global average pool, flatten and a ``num_classes``-way Gemm named ``fc`` on ``x``; the checked model."""
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool:out"], name="pool"))
    g.nodes.append(helper.make_node("Flatten", ["pool:out"], ["flatten:out"], name="flatten", axis=1))
    w = g.weight(f"{fc}.weight", (num_classes, cin), scale=0.01)
    b = g.const(f"{fc}.bias", np.zeros(num_classes, dtype=np.float32))
    g.nodes.append(helper.make_node("Gemm", ["flatten:out", w, b], ["logits"], name=fc, transB=1))
    graph = helper.make_graph(
        g.nodes, name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, num_classes])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="pytest-trt-bench")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def bench_config(model: str, folder: Path) -> BuildConfig:
    """The benchmarks' pinned config of ``model`` ("example": the example MobileNetV2 at 32x32; "mnv2_224";
    "resnet50"), its ONNX written into ``folder``."""
    from examples.models import mobilenet_v2

    if model == "example":
        onnx_path = save(mobilenet_v2(), folder / "mobilenet_v2.onnx")
        shapes = ((1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32))
    else:
        made = resnet50_224() if model == "resnet50" else mobilenet_v2_224()
        onnx_path = save(made, folder / f"{made.graph.name}.onnx")
        shapes = ((1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))
    return BuildConfig(name="mobilenet_v2", version="1.2.3", onnx=onnx_path, precision="typed",
                       profiles=[Profile(input=shapes)])


def timed_miss(backend: Backend, config: BuildConfig, cache_dir: Path) -> tuple[Engine, float]:
    """A cache miss as ``--trt-engine-build --trt-rebuild`` runs it (a session's provider, the build, the cache entry
    on disk): the Engine and its seconds."""
    import time

    from pytest_trt.engines.provider import EngineProvider

    provider = EngineProvider(backend.name, cache_dir=cache_dir, build=True, rebuild=True, backend=backend)
    t = time.perf_counter()
    engine = provider.get(config)
    provider.flush()  # the cache entry is on disk: part of a cache miss
    return engine, time.perf_counter() - t


if __name__ == "__main__":
    m = resnet50_224() if sys.argv[2:] == ["resnet50"] else mobilenet_v2_224()
    print(f"{parameters(m):,} parameters, {len(m.graph.node)} nodes")
    if len(sys.argv) > 1:
        print(save(m, sys.argv[1]))
