"""ONNX Runtime's quantization tools configured like TensorRT's: activation ranges, and the Q/DQ model made from them.

TensorRT's entropy calibrator builds a 2048-bin histogram of |x| and searches
the clipping threshold that minimises the KL divergence to a 128-level
quantization; ONNX Runtime's ``quantize_static`` defaults its entropy
calibrator to 128 bins with 128 quantized bins, where the search has nothing
to clip and entropy gives min-max's ranges (measured).  So ranges are computed
here through ``create_calibrator`` with TensorRT's settings, recorded, and the
Q/DQ model is made from them (:func:`quantize`).

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
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: algorithm -> (ORT CalibrationMethod member, extra_options); symmetric like TensorRT's INT8
METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "minmax": ("MinMax", {"symmetric": True}),
    "entropy": ("Entropy", {"symmetric": True, "num_bins": 2048, "num_quantized_bins": 128}),
    "percentile": ("Percentile", {"symmetric": True, "num_bins": 2048}),
    "distribution": ("Distribution", {"num_bins": 2048, "scenario": "same"}),
}
DEFAULT_PERCENTILE = 99.999


@dataclass(frozen=True)
class Ranges:
    """Per-tensor (low, high) activation ranges from one calibration method."""

    algorithm: str
    values: Mapping[str, tuple[float, float]]

    def amax(self, tensor: str) -> float:
        lo, hi = self.values[tensor]
        return max(abs(lo), abs(hi))

    def scales(self) -> dict[str, float]:
        """TensorRT's per-tensor INT8 scale: amax / 127."""
        return {name: float(np.float32(self.amax(name)) / np.float32(127.0)) for name in sorted(self.values)}

    def to_json(self) -> dict[str, list[float]]:
        return {k: [float(lo), float(hi)] for k, (lo, hi) in sorted(self.values.items())}


class _Reader:
    """An ONNX Runtime CalibrationDataReader over in-memory batches (duck-typed: get_next)."""

    def __init__(self, batches: Iterable[Mapping[str, np.ndarray]]) -> None:
        self._it: Iterator[Mapping[str, np.ndarray]] = iter(batches)

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self._it, None)
        return None if batch is None else dict(batch)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        while (batch := self.get_next()) is not None:
            yield batch

    def __len__(self) -> int:  # only strided calibration asks; we never stride
        raise TypeError("length unknown")


def op_types_to_calibrate() -> list[str]:
    """The op types ``quantize_static`` quantizes in QDQ format (so every tensor the Q/DQ model needs has a range)."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return sorted(set(QLinearOpsRegistry) | set(QDQRegistry))


def cpu_only(create_calibrator: Callable[..., Any]) -> dict[str, Any]:
    """The keyword that keeps ``create_calibrator`` on the CPU, where the release has it (probed, not versioned).

    Releases without a ``providers`` parameter calibrate on the CPU execution provider, the
    calibrators' own default, so they need no keyword.
    """
    try:
        takes = "providers" in inspect.signature(create_calibrator).parameters
    except (TypeError, ValueError):  # no introspectable signature: the default is the CPU
        takes = False
    return {"providers": ["CPUExecutionProvider"]} if takes else {}


def compute_ranges(
    model: Path,
    batches: Iterable[Mapping[str, np.ndarray]],
    algorithm: str,
    *,
    percentile: float | None = None,
) -> Ranges:
    """Feed ``batches`` through ``model`` with the ``algorithm`` calibrator; return the ranges it computes."""
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator

    if algorithm not in METHODS:
        raise ValueError(f"no explicit calibration method {algorithm!r}; choose one of {', '.join(METHODS)}")
    member, options = METHODS[algorithm]
    options = dict(options)
    if algorithm == "percentile":
        options["percentile"] = DEFAULT_PERCENTILE if percentile is None else percentile
    with tempfile.TemporaryDirectory(prefix="pytest-trt-calib-") as tmp:
        calibrator = create_calibrator(
            Path(model),
            op_types_to_calibrate(),
            augmented_model_path=str(Path(tmp) / "augmented.onnx"),
            calibrate_method=getattr(CalibrationMethod, member),
            extra_options=options,
            **cpu_only(create_calibrator),
        )
        calibrator.collect_data(_Reader(batches))
        with warnings.catch_warnings():  # the distribution calibrator's std of an all-zero histogram is NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            data = calibrator.compute_data()
        del calibrator
    values: dict[str, tuple[float, float]] = {}
    for name, td in data.data.items():
        values[name] = _range(td)
    return Ranges(algorithm, values)


def _range(td: Any) -> tuple[float, float]:
    if isinstance(td, tuple):
        lo, hi = td
    elif hasattr(td, "lowest") and hasattr(td, "highest"):
        lo, hi = td.lowest, td.highest
    else:  # the distribution calibrator: mean and standard deviation
        avg, std = td.avg_std
        lo, hi = np.asarray(avg) - 3 * np.asarray(std), np.asarray(avg) + 3 * np.asarray(std)
    return float(np.min(lo)), float(np.max(hi))


#: What TensorRT accepts in a Q/DQ model.
TENSORRT_QDQ_OPTIONS: dict[str, Any] = {"QuantizeBias": False, "ActivationSymmetric": True, "WeightSymmetric": True}


def quantize(model: Path, ranges: Ranges, *, per_channel: bool = False, exclude_nodes: Sequence[str] = ()) -> bytes:
    """The Q/DQ ONNX bytes of ``model`` with ``ranges`` (QInt8 activations and weights).

    ``exclude_nodes``: node names the quantizer leaves in float (its ``nodes_to_exclude``).
    """
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
