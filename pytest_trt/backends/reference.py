"""The reference runner: the config's ONNX model with every optimization disabled.

What Polygraphy users compare TensorRT against with ``--trt --onnxrt``: the
plain ONNX semantics, executed by ONNX Runtime on the CPU with no graph
transformer applied, one thread and deterministic kernels.  It is the same
for every backend, so ``Engine.reference()`` works for TensorRT and ONNX
Runtime engines alike; it needs ``onnxruntime`` installed, nothing else.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from pytest_trt.config import OrtOptions
from pytest_trt.errors import BackendUnavailable, BuildFailed

if TYPE_CHECKING:
    from pytest_trt.backends.onnxruntime import OrtRunner
    from pytest_trt.config import BuildConfig

__all__ = ["REFERENCE_OPTIONS", "reference_runner"]

#: the reference's pinned session: no optimization, CPU only, deterministic, single-threaded
REFERENCE_OPTIONS = OrtOptions(
    graph_optimization_level="disabled",
    execution_providers=("CPUExecutionProvider",),
    intra_op_threads=1,
    inter_op_threads=1,
    deterministic=True,
)


def reference_runner(config: BuildConfig) -> OrtRunner:
    """A runner for ``config.onnx`` with all optimizations disabled on the CPU provider.

    Precision, profiles and TensorRT/ORT tuning fields of ``config`` are
    deliberately ignored: the reference is the model as written.  Raises
    :class:`~pytest_trt.errors.BackendUnavailable` without onnxruntime and
    :class:`~pytest_trt.errors.BuildFailed` when ONNX Runtime cannot load the model.
    """
    if importlib.util.find_spec("onnxruntime") is None:
        raise BackendUnavailable(
            "the reference runner (trt_reference, Engine.reference()) executes the ONNX model with onnxruntime, "
            "which is not installed; pip install 'pytest-trt[ort]'",
            backend="onnxruntime",
        )
    from pytest_trt.backends.onnxruntime import OrtRunner, load_session

    try:
        session = load_session(config.onnx, REFERENCE_OPTIONS)
    except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated types for bad models
        raise BuildFailed(
            f"BuildConfig {config.name!r}: the reference runner (ONNX Runtime, optimizations disabled) "
            f"could not load {str(config.onnx)!r}: {exc}",
            config_name=config.name, stage="reference",
        ) from None
    return OrtRunner(session)
