"""The Q/DQ ONNX model made from recorded ranges, with the options TensorRT accepts.

TensorRT's explicit quantization takes symmetric INT8 Q/DQ pairs on
activations and weights and biases left in float: an int32 bias
DequantizeLinear is rejected (measured with TensorRT-RTX 1.7), hence
``QuantizeBias=False``.  The quantizer is ONNX Runtime's QDQ quantizer, the
one ``quantize_static`` uses, given the ranges instead of a data reader so the
ranges in the record are exactly the ranges in the model.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_trt.calibration.ranges import METHODS, Ranges, op_types_to_calibrate

#: What TensorRT accepts in a Q/DQ model.
TENSORRT_QDQ_OPTIONS: dict[str, Any] = {"QuantizeBias": False, "ActivationSymmetric": True, "WeightSymmetric": True}


def quantize(model: Path, ranges: Ranges, *, per_channel: bool = False, exclude_nodes: Sequence[str] = ()) -> bytes:
    """The Q/DQ ONNX bytes of ``model`` with ``ranges`` (QInt8 activations and weights).

    ``exclude_nodes``: node names the quantizer leaves in float (its ``nodes_to_exclude``).
    """
    import numpy as np
    import onnx
    from onnxruntime.quantization.calibrate import CalibrationMethod, TensorData, TensorsData
    from onnxruntime.quantization.qdq_quantizer import QDQQuantizer
    from onnxruntime.quantization.quant_utils import QuantType, load_model_with_shape_infer

    method = getattr(CalibrationMethod, METHODS[ranges.algorithm][0])
    data = {
        name: TensorData(lowest=np.array(lo, dtype=np.float32), highest=np.array(hi, dtype=np.float32))
        for name, (lo, hi) in ranges.values.items()
    }
    with contextlib.redirect_stdout(io.StringIO()):
        loaded = load_model_with_shape_infer(Path(model))
        quantizer = QDQQuantizer(
            loaded, per_channel, False, QuantType.QInt8, QuantType.QInt8, TensorsData(method, data),
            None, list(exclude_nodes) or None, op_types_to_calibrate(), dict(TENSORRT_QDQ_OPTIONS),
        )
        quantizer.quantize_model()
    with tempfile.TemporaryDirectory(prefix="pytest-trt-qdq-") as tmp:
        out = Path(tmp) / "model.qdq.onnx"
        quantizer.model.save_model_to_file(str(out), False)
        proto = onnx.load(str(out))
    # deterministic bytes: the producer fields are fixed by onnxruntime, nothing time-dependent is written
    return bytes(proto.SerializeToString())
