"""The catalog row of one verified bundle: every field read from the bundle's own members.

A bundle holds no clock time (its bytes are a pure function of the build): the
build's start and finish times come from the SLSA provenance beside it
(``<bundle>.intoto.jsonl``), and ``created`` is the finish time, or the bundle
file's modification time when no attestation of this bundle is there (UTC).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pytest_trt.common.backend_version import backend_version_of

if TYPE_CHECKING:
    from pytest_trt.audit.verify import VerifiedBundle

#: keys of a golden verdict that describe it; every other number in it is a metric
_VERDICT_KEYS = frozenset({"config_hash", "verdict", "message", "test", "golden", "generation", "metrics",
                           "approver", "reason", "approval"})


@dataclass(frozen=True)
class Verdict:
    test: str
    verdict: str
    golden: str | None
    generation: int | None
    message: str | None
    metrics: dict[str, float]


@dataclass(frozen=True)
class ApprovalRef:
    """A golden refresh made from this bundle's engine (verdict ``updated``)."""

    test: str
    golden: str | None
    generation: int | None
    approver: str | None
    reason: str | None


@dataclass(frozen=True)
class CatalogEntry:
    sha256: str
    path: str
    size: int
    config_name: str | None
    config_version: str | None
    backend: str | None
    backend_version: str | None
    cuda_runtime: str | None
    cuda_driver: str | None
    device: str | None
    device_json: str
    engine_sha256: str
    engine_included: bool
    onnx_sha256: str | None
    config_hash: str | None
    config_sha256: str | None
    calibration_algorithm: str | None
    calibration_cache_sha256: str | None
    git_commit: str | None
    git_dirty: bool | None
    created: str
    signer_key_sha256: str | None
    signature_checked: bool
    build_started: str | None = None  # from the provenance beside the bundle (RFC 3339, UTC)
    build_finished: str | None = None
    attestations: str | None = None  # <bundle>.intoto.jsonl's text
    verdicts: tuple[Verdict, ...] = field(default=())
    approvals: tuple[ApprovalRef, ...] = field(default=())

    def columns(self) -> dict[str, Any]:
        """The ``bundles`` table columns (verdicts and approvals have their own tables)."""
        out = {k: v for k, v in vars(self).items() if k not in ("verdicts", "approvals")}
        out["engine_included"] = int(self.engine_included)
        out["signature_checked"] = int(self.signature_checked)
        out["git_dirty"] = None if self.git_dirty is None else int(self.git_dirty)
        return out


def iso_utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_seconds(rfc3339: str) -> str | None:
    """``2026-03-01T12:00:00.123456Z`` as the catalog's ``created`` spelling (seconds); None when not that form."""
    try:
        when = datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S.%fZ")
    except (TypeError, ValueError):
        return None
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _device(build: dict[str, Any], environment: dict[str, Any]) -> str | None:
    device = build.get("device") or {}
    if device.get("name"):
        return str(device["name"])
    gpus = environment.get("gpus") or []
    if device.get("kind") == "gpu" and gpus:
        return _str(gpus[0].get("name"))
    return _str(device.get("kind"))


def _calibration(config: dict[str, Any], calib_doc: dict[str, Any] | None,
                 member_sha256: dict[str, str]) -> tuple[str | None, str | None]:
    algorithm = None
    for section in (config.get("effective") or {}, config.get("pinned") or {}):
        calib = section.get("calibration")
        if isinstance(calib, dict) and calib.get("algorithm"):
            algorithm = str(calib["algorithm"])
            break
        if isinstance(calib, str) and calib:
            algorithm = calib
            break
    cache = (calib_doc or {}).get("cache_sha256") or member_sha256.get("calibration.cache")
    return algorithm, _str(cache)


def _metrics(verdict: dict[str, Any]) -> dict[str, float]:
    found: dict[str, float] = {}
    nested = verdict.get("metrics")
    items = list(nested.items()) if isinstance(nested, dict) else []
    items += [(k, v) for k, v in verdict.items() if k not in _VERDICT_KEYS]
    for key, value in items:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found[str(key)] = float(value)
    return found or _output_metrics(verdict)


def _output_metrics(verdict: dict[str, Any]) -> dict[str, float]:
    """The plugin's golden.json keeps metrics per output (``outputs.outputs.<output>.metrics``): ``<output>/<metric>``,
    drift as ``<output>/drift_sd:<statistic>``."""
    summary = verdict.get("outputs")
    per_output = summary.get("outputs") if isinstance(summary, dict) else None
    found: dict[str, float] = {}
    for output, figures in sorted(per_output.items()) if isinstance(per_output, dict) else []:
        metrics = figures.get("metrics") if isinstance(figures, dict) else None
        for key, value in sorted(metrics.items()) if isinstance(metrics, dict) else []:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                found[f"{output}/{key}"] = float(value)
            elif key == "drift" and isinstance(value, dict):
                for stat, drift in sorted(value.items()):
                    sd = drift.get("drift_sd") if isinstance(drift, dict) else None
                    if isinstance(sd, (int, float)) and not isinstance(sd, bool):
                        found[f"{output}/drift_sd:{stat}"] = float(sd)
    return found


def _golden_of(verdict: dict[str, Any]) -> str | None:
    """A failed check's verdict names its golden file only in its outputs summary."""
    summary = verdict.get("outputs")
    return _str(verdict.get("golden")) or (_str(summary.get("golden_file")) if isinstance(summary, dict) else None)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def verdicts_of(golden: dict[str, Any] | None) -> tuple[tuple[Verdict, ...], tuple[ApprovalRef, ...]]:
    verdicts, approvals = [], []
    for test, v in sorted((golden or {}).items()):
        if not isinstance(v, dict):
            continue
        verdict = Verdict(test=test, verdict=str(v.get("verdict") or "unknown"), golden=_golden_of(v),
                          generation=_int(v.get("generation")), message=_str(v.get("message")), metrics=_metrics(v))
        verdicts.append(verdict)
        if verdict.verdict == "updated":
            nested = v.get("approval")
            approval: dict[str, Any] = nested if isinstance(nested, dict) else v
            approvals.append(ApprovalRef(test=test, golden=verdict.golden, generation=verdict.generation,
                                         approver=_str(approval.get("approver")), reason=_str(approval.get("reason"))))
    return tuple(verdicts), tuple(approvals)


def entry_from_bundle(vb: VerifiedBundle, *, created: str, build_started: str | None = None,
                      build_finished: str | None = None, attestations: str | None = None) -> CatalogEntry:
    """Every catalog field of ``vb``; ``created`` and the attested times are the caller's (ISO UTC)."""
    from pytest_trt.audit import bundle as b
    from pytest_trt.audit.sign import SIGNATURE

    doc = vb.build
    build = dict(doc.get("build") or {})
    config, env = vb.config, vb.environment
    pinned = config.get("pinned") or {}
    cuda = env.get("cuda") or {}
    git = env.get("git") or {}
    signer = vb.signer
    if signer is None and SIGNATURE in vb.members:
        signer = _str(json.loads(vb.members[SIGNATURE].decode("ascii")).get("public_key_sha256"))
    algorithm, cache_sha = _calibration(config, vb.docs.get(b.CALIBRATION), dict(vb.member_sha256))
    verdicts, approvals = verdicts_of(vb.golden)
    dirty = git.get("dirty")
    return CatalogEntry(
        sha256=vb.sha256,
        path=str(vb.path.resolve()),
        size=vb.path.stat().st_size,
        config_name=_str(pinned.get("name")),
        config_version=_str(pinned.get("version")),
        backend=_str(build.get("backend")),
        backend_version=_str(backend_version_of(build)),
        cuda_runtime=_str(cuda.get("runtime")),
        cuda_driver=_str(cuda.get("driver")),
        device=_device(build, env),
        device_json=json.dumps(build.get("device") or {}, sort_keys=True, separators=(",", ":")),
        engine_sha256=vb.engine_sha256,
        engine_included=bool(doc.get("engine_included", b.ENGINE in vb.member_sha256)),
        onnx_sha256=_str(config.get("onnx_sha256")),
        config_hash=_str(config.get("config_hash")),
        config_sha256=vb.member_sha256.get(b.CONFIG),
        calibration_algorithm=algorithm,
        calibration_cache_sha256=cache_sha,
        git_commit=_str(git.get("commit")),
        git_dirty=None if dirty is None else bool(dirty),
        created=created,
        signer_key_sha256=signer,
        signature_checked=vb.signer is not None,
        build_started=build_started,
        build_finished=build_finished,
        attestations=attestations,
        verdicts=verdicts,
        approvals=approvals,
    )
