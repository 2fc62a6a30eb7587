"""The ONNX model a bundle's engine was actually built from, found from the bundle alone.

A plain config's engine is built from the pinned ONNX (checked against ``onnx_sha256``).  A
calibrated config's engine is built from its Q/DQ model, which is rebuilt here from the float model
and the ranges the bundle recorded (``build.json`` ``extra.calibration``), then checked against the
recorded ``qdq_model_sha256``; when the rebuild differs (another ONNX Runtime quantizer), the stored
Q/DQ model is looked up by digest under a cache folder (``<cache>/calibration/*/model.qdq.onnx``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_trt.upgrade.pairing import Side

#: the explicit-calibration facts in build.json's ``build.extra``
CALIBRATION = "calibration"


@dataclass(frozen=True)
class BuiltModel:
    """The model bytes an engine was built from, with the float model it came from."""

    data: bytes
    kind: str  # "float" or "qdq"
    float_path: Path
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # recorded ranges (Q/DQ only)

    def load(self) -> Any:
        import onnx

        return onnx.load_from_string(self.data)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def calibration_of(side: Side) -> Mapping[str, Any] | None:
    """The bundle's recorded calibration facts, or None for a config without one."""
    if side.bundle is None:
        return None
    extra = side.bundle.build["build"].get("extra") or {}
    cal = extra.get(CALIBRATION)
    return cal if isinstance(cal, Mapping) and cal.get("ranges") else None


def _float_model(side: Side) -> tuple[Path, bytes] | str:
    assert side.bundle is not None
    conf = side.bundle.config
    path = Path(str(conf["pinned"]["onnx"]))
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"the {side.name} model {path} cannot be read ({exc.strerror or exc})"
    want = conf.get("onnx_sha256")
    if want and _sha(data) != want:
        return f"the model file {path} changed since the run (sha256 {_sha(data)[:12]}, the bundle's {str(want)[:12]})"
    return path, data


def _stored_qdq(cache_dir: Path | None, digest: str) -> bytes | None:
    if cache_dir is None:
        return None
    for candidate in sorted((cache_dir / "calibration").glob("*/model.qdq.onnx")):
        data = candidate.read_bytes()
        if _sha(data) == digest:
            return data
    return None


def built_model(side: Side, *, cache_dir: Path | None = None) -> BuiltModel | str:
    """The model ``side``'s engine was built from, or why it cannot be had (a sentence for the report)."""
    if side.bundle is None:
        return f"{side.file} is no usable bundle"
    found = _float_model(side)
    if isinstance(found, str):
        return found
    path, data = found
    cal = calibration_of(side)
    if cal is None:
        return BuiltModel(data, "float", path)
    ranges = {str(k): (float(v[0]), float(v[1])) for k, v in dict(cal["ranges"]).items()}
    want = str(cal.get("qdq_model_sha256") or "")
    try:
        import onnxruntime

        from pytest_trt.calibration.ranges import Ranges, quantize

        pinned = side.bundle.config["pinned"].get("calibration") or {}
        qdq = quantize(path, Ranges(str(cal.get("algorithm")), ranges), per_channel=bool(pinned.get("per_channel")),
                       exclude_nodes=list(cal.get("exclude_nodes") or ()))
        here = f"onnxruntime {onnxruntime.__version__}"
    except (ImportError, OSError, ValueError, KeyError) as exc:
        qdq, here = b"", f"the quantizer failed ({exc})"
    if want and _sha(qdq) != want:
        stored = _stored_qdq(cache_dir, want)
        if stored is None:
            return (f"the Q/DQ model cannot be rebuilt ({here} here, {cal.get('quantizer')} in the bundle; "
                    f"sha256 {_sha(qdq)[:12]} is not the bundle's {want[:12]}); give --cache-dir with the run's "
                    "engine cache to use the stored one")
        qdq = stored
    return BuiltModel(qdq, "qdq", path, ranges)
