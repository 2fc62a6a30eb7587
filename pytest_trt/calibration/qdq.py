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
import inspect
import io
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_trt.calibration.ranges import METHODS, Ranges, op_types_to_calibrate
from pytest_trt.errors import BackendUnavailable

#: What TensorRT accepts in a Q/DQ model.
TENSORRT_QDQ_OPTIONS: dict[str, Any] = {"QuantizeBias": False, "ActivationSymmetric": True, "WeightSymmetric": True}


def quantizer_arguments(init: Callable[..., Any], **arguments: Any) -> dict[str, Any]:
    """The ``arguments`` that ``init`` (a ``QDQQuantizer.__init__``) takes, by keyword.

    The quantizer's positional parameters differ between ONNX Runtime releases (``mode`` and
    ``static`` are gone from newer ones), so they are matched by name from its signature; a
    parameter it requires that is not given is an error naming the release.
    """
    params = inspect.signature(init).parameters
    missing = [name for name, p in params.items() if name != "self" and p.default is inspect.Parameter.empty
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name not in arguments]
    if missing:
        import onnxruntime

        raise BackendUnavailable(
            f"INT8 calibration: the QDQQuantizer of onnxruntime {onnxruntime.__version__} requires "
            f"{', '.join(missing)}, which pytest-trt does not set; install an onnxruntime release from 1.16 up to "
            "the newest pytest-trt was tested with", backend="onnxruntime")
    return {name: value for name, value in arguments.items() if name in params}


def quantize(model: Path, ranges: Ranges, *, per_channel: bool = False) -> bytes:
    """The Q/DQ ONNX bytes of ``model`` with ``ranges`` (QInt8 activations and weights)."""
    import numpy as np
    import onnx
    from onnxruntime.quantization.calibrate import CalibrationMethod, TensorData, TensorsData
    from onnxruntime.quantization.qdq_quantizer import QDQQuantizer
    from onnxruntime.quantization.quant_utils import QuantizationMode, QuantType, load_model_with_shape_infer

    method = getattr(CalibrationMethod, METHODS[ranges.algorithm][0])
    data = {
        name: TensorData(lowest=np.array(lo, dtype=np.float32), highest=np.array(hi, dtype=np.float32))
        for name, (lo, hi) in ranges.values.items()
    }
    with contextlib.redirect_stdout(io.StringIO()):
        loaded = load_model_with_shape_infer(Path(model))
        quantizer = QDQQuantizer(**quantizer_arguments(
            QDQQuantizer.__init__,
            model=loaded, per_channel=per_channel, reduce_range=False, weight_qType=QuantType.QInt8,
            activation_qType=QuantType.QInt8, tensors_range=TensorsData(method, data), nodes_to_quantize=None,
            nodes_to_exclude=None, op_types_to_quantize=op_types_to_calibrate(),
            extra_options=dict(TENSORRT_QDQ_OPTIONS),
            mode=QuantizationMode.QLinearOps, static=True,  # only releases whose quantizer still asks for them
        ))
        quantizer.quantize_model()
    with tempfile.TemporaryDirectory(prefix="pytest-trt-qdq-") as tmp:
        out = Path(tmp) / "model.qdq.onnx"
        quantizer.model.save_model_to_file(str(out), False)
        proto = onnx.load(str(out))
    # deterministic bytes: the producer fields are fixed by onnxruntime, nothing time-dependent is written
    return bytes(proto.SerializeToString())
