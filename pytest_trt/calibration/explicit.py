"""Explicit INT8 quantization of a BuildConfig: ranges, Q/DQ model, TensorRT-format cache, stored by content.

One run per content key (ONNX bytes, the calibration pin with its data
digest, the onnxruntime version): the result lives in a store folder
``<root>/<key[:2]>/<key>/`` (``model.qdq.onnx``, ``calibration.cache``,
``calibration.json``), written to a temporary folder and renamed into place,
so a later build, record or session reads it instead of calibrating again.
The engine cache entry carries the same facts in ``build.json``'s ``extra``.

A backend builds a calibrated config through :func:`calibrate_request`, one code path for TensorRT-RTX,
TensorRT 11 and ONNX Runtime: strongly typed builders take INT8 from Q/DQ nodes, so the Q/DQ model is built
(``precision='typed'``) and the result recorded under the pinned config (same config JSON, config hash and
ONNX sha256, the calibration facts in ``extra``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_trt.buildlog.calibcache import (
    EXPLICIT_TAG,
    HEADER_ALGORITHMS,
    algorithm_of_header,
    format_calibration_cache,
    parse_calibration_cache,
    sync_cache_file,
)
from pytest_trt.calibration.building import CALIBRATION, CALIBRATION_CACHE, QDQ_SHA256
from pytest_trt.calibration.ranges import METHODS, TENSORRT_QDQ_OPTIONS, Ranges
from pytest_trt.calibration.store import set_store_root, store_root
from pytest_trt.common.filehash import sha256_file
from pytest_trt.common.fileio import replace_directory
from pytest_trt.common.progress import report
from pytest_trt.errors import BackendUnavailable, BuildFailed, ConfigError

if TYPE_CHECKING:
    from pytest_trt.artifact import BuildResult
    from pytest_trt.common.calibration import Calibration
    from pytest_trt.config import BuildConfig

STORE_SCHEMA = 1
#: the oldest onnxruntime whose Q/DQ quantizer gives the model TensorRT's calibrators describe (pyproject's int8 extra)
MIN_ONNXRUNTIME = (1, 20)
QDQ_FILE = "model.qdq.onnx"
CACHE_FILE = "calibration.cache"
INFO_FILE = "calibration.json"
#: ranges computed in this process, by the store key without exclude_nodes (a few KiB each)
_RANGES: dict[str, Ranges] = {}
__all__ = ["ExplicitCalibration", "calibrate_request", "built_onnx", "calibrate_explicit", "set_store_root",
           "store_root"]


@dataclass(frozen=True)
class ExplicitCalibration:
    """The outcome of calibrating one config: where the Q/DQ model is, what went into it, and what a build of it
    records (:class:`pytest_trt.common.build_inputs.Calibrated`): ``typed`` is built, the result keeps the pinned
    config."""

    folder: Path
    info: dict[str, Any]  # calibration.json: algorithm, quantizer, header, ranges, class counts, seconds ...
    from_store: bool
    config: BuildConfig  # the pinned config it was calibrated for
    cache_text: str  # the store's calibration.cache, as the pinned cache file was checked or written from
    typed: BuildConfig = field(init=False)  # what a strongly typed builder builds: the Q/DQ model, typed precision
    effective: dict[str, Any] = field(init=False)  # laid over the build's effective config
    extra: dict[str, Any] = field(init=False)  # the result's calibration facts
    seconds: float = field(init=False)  # 0.0 when taken from the store

    def __post_init__(self) -> None:
        info = self.info
        facts = {
            "typed": typed_config(self.config, self.qdq_model),
            "effective": {"precision": self.config.precision, "quantization": "explicit-qdq",
                          "calibration_algorithm": info["algorithm"]},
            "extra": {CALIBRATION: {**info, "from_store": self.from_store}, CALIBRATION_CACHE: self.cache_text,
                      QDQ_SHA256: info["qdq_model_sha256"]},
            "seconds": 0.0 if self.from_store else float(info.get("seconds", {}).get("total", 0.0)),
        }
        for name, value in facts.items():
            object.__setattr__(self, name, value)

    @property
    def qdq_model(self) -> Path:
        return self.folder / QDQ_FILE

    @property
    def ranges(self) -> Ranges:
        return Ranges(self.info["algorithm"], {k: (v[0], v[1]) for k, v in self.info["ranges"].items()})


class Pinned(Protocol):
    """What the explicit path reads of a build request (a :class:`~pytest_trt.backends.request.BuildRequest`)."""

    @property
    def config(self) -> BuildConfig: ...
    @property
    def onnx_sha256(self) -> str: ...
    @property
    def data_sha256(self) -> str | None: ...


def calibrate_request(request: Pinned) -> ExplicitCalibration:
    """Calibrate once for ``request`` (or take the stored calibration), with the digests the request computed.

    The backend builds the outcome's ``typed`` Q/DQ config and hands the outcome to
    :meth:`~pytest_trt.artifact.BuildResult.built_for`, which records the result under the pinned config.
    """
    return calibrate_explicit(request.config, onnx_sha256=request.onnx_sha256, data_sha256=request.data_sha256)


def built_onnx(result: BuildResult, config: BuildConfig) -> Path:
    """The ONNX file the engine was built from: the stored Q/DQ model for a calibrated build, else the config's."""
    if CALIBRATION not in result.extra or config.calibration is None:
        return config.onnx
    pinned = result.config.get("calibration") or {}  # the digest the build's request computed
    outcome = calibrate_explicit(config, onnx_sha256=result.onnx_sha256, data_sha256=pinned.get("data_sha256"))
    if outcome.info["qdq_model_sha256"] != result.extra.get(QDQ_SHA256):
        raise ValueError(f"BuildConfig {config.name!r}: the stored Q/DQ model ({outcome.info['qdq_model_sha256']}) "
                         f"is not the one the engine was built from ({result.extra.get(QDQ_SHA256)}); rebuild the "
                         "engine (--trt-engine-rebuild)")
    return outcome.qdq_model


def store_keys(config: BuildConfig, onnx_sha256: str, data_sha256: str | None) -> tuple[str, str]:
    """The store folder's key, and the key of its ranges: the same material without ``exclude_nodes`` (ranges do
    not depend on the nodes left in float, so one computation serves every exclusion set)."""
    import onnxruntime

    assert config.calibration is not None
    cache = config.calibration.cache
    pinned = config.calibration.canonical(data_sha256)
    material = {
        "schema": STORE_SCHEMA,
        "onnx_sha256": onnx_sha256,
        "calibration": pinned,
        "onnxruntime": onnxruntime.__version__,
        "calibrator_settings": METHODS.get(config.calibration.algorithm),
        "qdq_options": TENSORRT_QDQ_OPTIONS,
        # an existing cache file is the source of the ranges (as with TensorRT's calibrators), so its bytes count;
        # a calibration cache is a few KiB, read whole
        "cache_file_sha256": (hashlib.sha256(Path(cache).read_bytes()).hexdigest()
                              if cache is not None and Path(cache).is_file() else None),
    }
    unexcluded = {**material, "calibration": {k: v for k, v in pinned.items() if k != "exclude_nodes"}}
    key, ranges_key = (hashlib.sha256(json.dumps(m, sort_keys=True).encode()).hexdigest()
                       for m in (material, unexcluded))
    return key, ranges_key


def typed_config(config: BuildConfig, qdq_model: Path) -> BuildConfig:
    """The config a strongly typed builder really builds: the Q/DQ model, precision from its types."""
    return config.replace(onnx=qdq_model, precision="typed", calibration=None)


def calibrate_explicit(
    config: BuildConfig, *, onnx_sha256: str | None = None, data_sha256: str | None = None
) -> ExplicitCalibration:
    """Calibrate ``config`` (or take the stored result); write and check the pinned cache; return the outcome.

    One pass: the store key, the stored calibration or a new one (samples, ranges, Q/DQ model, cache text), the
    pinned cache file. ``onnx_sha256`` and ``data_sha256`` are the digests the build request computed (computed
    here when not given).
    """
    calib = config.calibration
    if importlib.util.find_spec("onnxruntime") is None:
        raise BackendUnavailable(
            f"BuildConfig {config.name!r}: explicit INT8 calibration computes its ranges with ONNX Runtime, which "
            "is not installed: pip install 'pytest-trt[int8]'", backend="onnxruntime")
    _refuse_old_quantizer(config)
    if calib is None or not calib.explicit:
        raise ConfigError(f"BuildConfig {config.name!r}: explicit quantization needs Calibration(algorithm=...) "
                          "one of minmax, entropy, percentile, distribution", field="calibration.algorithm")
    _refuse_unknown_nodes(config, calib)
    data_sha = data_sha256 or config.data_sha256
    key, ranges_key = store_keys(config, onnx_sha256 or config.onnx_sha256, data_sha)
    folder = store_root() / key[:2] / key
    info = _stored_info(folder)
    from_store = info is not None
    if info is None:
        report(f"calibrating {config.name!r}: {calib.algorithm} over {calib.describe_data()} ...")
        info = _store(folder, *_calibrate(config, calib, data_sha, ranges_key=ranges_key))
        report(f"calibrated {config.name!r} in {info['seconds']['total']:.2f} s ({info['samples']} samples, ranges "
               f"from the {'pinned cache' if info['ranges_source'] == 'cache' else 'calibrator'})")
    cache_text = (folder / CACHE_FILE).read_text(encoding="utf-8")
    sync_cache_file(config.name, calib.cache, cache_text, calib.cache_sha256)
    return ExplicitCalibration(folder, info, from_store, config, cache_text)


def _refuse_old_quantizer(config: BuildConfig) -> None:
    """Refuse an onnxruntime older than :data:`MIN_ONNXRUNTIME`, naming the release and the fix.

    A behaviour, not an API, so no signature can be probed: before 1.20 the QDQ quantizer scales a Conv's
    output ahead of its ReLU6 (Clip) with the Conv's own range, where newer releases, like TensorRT's
    fused Conv+ReLU6, take the activation's range; a Conv range widened by outliers then coarsens every
    activation (the incident's digits model, calibrated by min-max: 34 % top-1 with 1.16 to 1.19).
    """
    import onnxruntime

    version = str(onnxruntime.__version__)
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if numbers < MIN_ONNXRUNTIME:
        oldest = ".".join(map(str, MIN_ONNXRUNTIME))
        raise BackendUnavailable(
            f"BuildConfig {config.name!r}: INT8 calibration needs onnxruntime >= {oldest}, installed {version}: "
            "older quantizers scale a Conv's output ahead of its ReLU6 (Clip) with the Conv's own range instead of "
            "the activation's, as TensorRT's fused Conv+ReLU6 does. pip install 'onnxruntime>=1.20' "
            "(or 'pytest-trt[int8]')", backend="onnxruntime", installed=version)


def _stored_info(folder: Path) -> dict[str, Any] | None:
    """calibration.json of a complete store folder (both files as it hashes them), else None."""
    try:
        info: dict[str, Any] = json.loads((folder / INFO_FILE).read_text(encoding="utf-8"))
        ok = (sha256_file(folder / QDQ_FILE) == info["qdq_model_sha256"]
              and sha256_file(folder / CACHE_FILE) == info["cache_sha256"])
    except (OSError, ValueError, KeyError):
        return None
    return info if ok else None


def _store(folder: Path, qdq: bytes, cache_text: str, info: dict[str, Any]) -> dict[str, Any]:
    def fill(tmp: Path) -> None:
        (tmp / QDQ_FILE).write_bytes(qdq)
        (tmp / CACHE_FILE).write_text(cache_text, encoding="utf-8")
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    replace_directory(folder, fill)
    return info


def _existing_cache(config: BuildConfig, calib: Calibration) -> Ranges | None:
    """The ranges of the pinned cache file when it exists and was written for this algorithm."""
    if calib.cache is None or not Path(calib.cache).is_file():
        return None
    parsed = parse_calibration_cache(Path(calib.cache).read_text(encoding="utf-8", errors="replace"),
                                     strict=True, path=str(calib.cache))
    found = algorithm_of_header(parsed.header)
    if found != calib.algorithm:
        raise BuildFailed(
            f"BuildConfig {config.name!r}: calibration cache {str(calib.cache)!r} was written by "
            f"{parsed.calibrator or parsed.header!r} ({found or 'unknown algorithm'}), but the config pins "
            f"algorithm={calib.algorithm!r} ({HEADER_ALGORITHMS[calib.algorithm]}). Delete the cache to "
            "recalibrate with the pinned algorithm, or pin the algorithm the cache was made with.",
            config_name=config.name, stage="calibration")
    return Ranges(calib.algorithm, {k: (-s * 127.0, s * 127.0) for k, s in parsed.scales.items()})


def _refuse_unknown_nodes(config: BuildConfig, calib: Calibration) -> None:
    """Every name in ``exclude_nodes`` is a node of the model (a typo would leave the node quantized, silently)."""
    if not calib.exclude_nodes:
        return
    import difflib

    import onnx

    nodes = [n.name for n in onnx.load(str(config.onnx), load_external_data=False).graph.node]
    unknown = [n for n in calib.exclude_nodes if n not in set(nodes)]
    if unknown:
        near = difflib.get_close_matches(unknown[0], nodes, n=3)
        raise ConfigError(
            f"BuildConfig {config.name!r}: Calibration.exclude_nodes names {', '.join(map(repr, unknown))}, which "
            f"{config.onnx} has no node of" + (f" (did you mean {', '.join(map(repr, near))}?)" if near else "")
            + "; give the ONNX node names (`pytest-trt calib errors` lists them)",
            field="calibration.exclude_nodes")


def _calibrate(
    config: BuildConfig, calib: Calibration, data_sha256: str | None, *, ranges_key: str
) -> tuple[bytes, str, dict[str, Any]]:
    import onnxruntime

    from pytest_trt.calibration.ranges import compute_ranges, quantize
    from pytest_trt.common.calibration_data import model_samples

    t0 = time.perf_counter()
    ranges = _existing_cache(config, calib)  # the pinned cache, when it holds this algorithm's scales
    source = "cache" if ranges is not None else "calibrator"
    # the samples, checked against the model's inputs, are counted and recorded whichever source gives the ranges
    used, tensors = model_samples(calib, config.onnx, config_name=config.name)
    foreign = sorted(set(ranges.values) - tensors) if ranges is not None else []
    if foreign:  # a cache naming tensors the model does not have was written for another model
        shown = ", ".join(map(repr, foreign[:5])) + (f" (+{len(foreign) - 5} more)" if len(foreign) > 5 else "")
        raise BuildFailed(
            f"BuildConfig {config.name!r}: calibration cache {str(calib.cache)!r} holds scales for {shown}, "
            f"which {config.onnx} has no tensor of: it was written for another model. Delete it to recalibrate, or "
            "point cache= at this model's cache.", config_name=config.name, stage="calibration")
    if ranges is None:
        ranges = _RANGES.get(ranges_key)
        if ranges is None:
            with contextlib.redirect_stdout(io.StringIO()):
                ranges = compute_ranges(config.onnx, used.batches(calib.batch_size), calib.algorithm,
                                        percentile=calib.percentile)
            _RANGES[ranges_key] = ranges
    scales = ranges.scales()
    ranges_s = time.perf_counter() - t0
    try:
        qdq = quantize(config.onnx, ranges, per_channel=calib.per_channel, exclude_nodes=calib.exclude_nodes)
    except ValueError as exc:  # onnxruntime's quantizer: a tensor without a range
        if source != "cache":
            raise
        raise BuildFailed(
            f"BuildConfig {config.name!r}: calibration cache {str(calib.cache)!r} does not cover {config.onnx} "
            f"({exc}); it was written for another model or an older export. Delete it to recalibrate, or point "
            "cache= at this model's cache.", config_name=config.name, stage="calibration") from None
    cache_text = format_calibration_cache(calib.algorithm, scales, tag=EXPLICIT_TAG)
    info = {
        "schema": STORE_SCHEMA,
        "algorithm": calib.algorithm,
        "mode": "explicit",
        "quantizer": f"onnxruntime {onnxruntime.__version__} QDQQuantizer, "
                     f"{calib.algorithm} ranges ({'read from the cache' if source == 'cache' else 'calibrated'})",
        "ranges_source": source,
        "cache_header": cache_text.split("\n", 1)[0],
        "cache_sha256": hashlib.sha256(cache_text.encode("utf-8")).hexdigest(),
        "qdq_model_sha256": hashlib.sha256(qdq).hexdigest(),
        "ranges": ranges.to_json(),
        "exclude_nodes": list(calib.exclude_nodes),
        "samples": used.n,
        "batches": -(-used.n // calib.batch_size),
        "class_counts": {str(k): v for k, v in used.class_counts().items()},
        "data_sha256": data_sha256,
        "seconds": {"ranges": ranges_s, "total": time.perf_counter() - t0},
    }
    return qdq, cache_text, info
