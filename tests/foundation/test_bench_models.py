"""The benchmarks' real-size models have torchvision's layouts (parameter counts from torchvision's model cards)."""

from __future__ import annotations

from pathlib import Path

import onnx

from benchmarks.models import mobilenet_v2_224, parameters, resnet50_224, write_resnet50


def test_resnet50_has_torchvision_resnet50s_parameters_and_checks(tmp_path: Path) -> None:
    model = resnet50_224()
    # torchvision.models.ResNet50_Weights.IMAGENET1K_V1.meta["num_params"] == 25,557,032
    assert parameters(model) == 25_557_032
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(convs) == 53  # stem + 16 bottlenecks x 3 + 4 projection shortcuts
    assert sum(n.op_type == "Add" for n in model.graph.node) == 16
    path = write_resnet50(tmp_path / "resnet50.onnx")
    onnx.checker.check_model(str(path))
    assert 100e6 < path.stat().st_size < 105e6  # 25.6 M float32 parameters plus BN statistics


def test_mobilenet_v2_has_torchvision_mobilenet_v2s_parameters() -> None:
    # torchvision.models.MobileNet_V2_Weights.IMAGENET1K_V1.meta["num_params"] == 3,504,872
    assert parameters(mobilenet_v2_224()) == 3_504_872
