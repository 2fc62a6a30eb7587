"""Models of the upgrade-review example: the example MobileNetV2 quantized to INT8 Q/DQ with ONNX Runtime.

``quantize_static`` (QDQ format, MinMax calibration over 16 seeded random images) gives the same
bytes for the same ONNX Runtime release; the Q/DQ model is what TensorRT-RTX 1.4 cannot build.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from examples.models import mobilenet_v2, save

CALIBRATION_IMAGES = 16


class _Images:
    """The ``CalibrationDataReader`` protocol of onnxruntime.quantization, over seeded random images."""

    def __init__(self) -> None:
        rng = np.random.default_rng(7)
        self._batches = iter([{"input": rng.random((1, 3, 32, 32), dtype=np.float32)}
                              for _ in range(CALIBRATION_IMAGES)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)


def write_qdq(folder: Path) -> Path:
    """The Q/DQ INT8 MobileNetV2 under ``folder`` (rewritten only when missing)."""
    out = folder / "mobilenet_v2_qdq.onnx"
    if out.is_file():
        return out
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    fp32 = save(mobilenet_v2(batch=1), folder / "mobilenet_v2_b1_for_qdq.onnx")
    tmp = folder / ".mobilenet_v2_qdq.onnx.tmp"
    quantize_static(str(fp32), str(tmp), _Images(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax,
                    # TensorRT takes only symmetric INT8 Q/DQ and no Int32 DequantizeLinear (bias)
                    extra_options={"QuantizeBias": False, "ActivationSymmetric": True, "WeightSymmetric": True})
    tmp.replace(out)
    return out
