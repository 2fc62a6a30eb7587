"""Push catalogued bundles to an MLflow tracking server and model registry.

Each bundle becomes one run in the experiment named for its config: the
bundle file is the run's artifact (under ``bundle/``, byte for byte), the
catalog fields are params, the identity hashes are tags too (searchable),
and the numbers of its golden verdicts are metrics.  With ``register`` the
engine is registered as a version of the model named for the config, tagged
with the bundle sha256, the engine sha256 and the approval.

Pushing is idempotent: a run already tagged with the bundle's sha256 is
reused, and so is a model version carrying it.  mlflow (extra
``pytest-trt[mlflow]``; ``mlflow-skinny`` is enough for the client) is
imported only here, inside the functions.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_trt.catalog.credentials import TrackingUri, redact, split_credentials
from pytest_trt.catalog.fields import iso_utc
from pytest_trt.catalog.store import Catalog
from pytest_trt.errors import MlflowUnavailable

ARTIFACT_DIR = "bundle"
ATTESTATION_DIR = "attestations"
TAG_PREFIX = "pytest_trt."
BUNDLE_TAG = TAG_PREFIX + "bundle_sha256"
#: bounded network patience (mlflow's own default retries with back-off for minutes); the user's env wins
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
#: catalog columns logged as params (identity hashes go to tags as well)
PARAMS = ("config_name", "config_version", "config_hash", "backend", "backend_version", "cuda_runtime",
          "cuda_driver", "device", "calibration_algorithm", "calibration_cache_sha256", "git_commit", "git_dirty",
          "created", "signer_key_sha256", "engine_included", "size")
#: run tag (after TAG_PREFIX) -> catalog column
TAGS = {"bundle_sha256": "sha256", "engine_sha256": "engine_sha256", "onnx_sha256": "onnx_sha256",
        "config_sha256": "config_sha256", "bundle_path": "path", "build_started": "build_started",
        "build_finished": "build_finished"}


@dataclass(frozen=True)
class PushOutcome:
    sha256: str
    path: str
    ok: bool
    run_id: str | None = None
    experiment: str | None = None
    model_version: str | None = None
    error: str | None = None


def _mlflow() -> Any:
    try:
        import mlflow
    except ImportError:
        raise MlflowUnavailable("pushing to MLflow needs mlflow: pip install 'pytest-trt[mlflow]'") from None
    return mlflow


@contextmanager
def _http_defaults(uri: TrackingUri | None = None) -> Iterator[None]:
    """Bounded network patience and the URI's credentials, for this call only; the user's environment wins."""
    wanted = dict(HTTP_DEFAULTS)
    if uri is not None:
        wanted.update(uri.env())
    added = [k for k in wanted if k not in os.environ]
    for k in added:
        os.environ[k] = wanted[k]
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def _key(text: str) -> str:
    """An MLflow metric/param key: letters, digits and ``_-./ `` only."""
    return re.sub(r"[^A-Za-z0-9_\-./ ]+", "_", text).strip("_") or "_"


def metrics_of(verdicts: list[dict[str, Any]]) -> dict[str, float]:
    """``golden/<test>/<metric>`` -> value, plus ``golden/<verdict>`` counts."""
    out: dict[str, float] = {}
    for v in verdicts:
        for name, value in v["metrics"].items():
            out[_key(f"golden/{v['test']}/{name}")] = float(value)
        count_key = _key(f"golden/{v['verdict']}")
        out[count_key] = out.get(count_key, 0.0) + 1.0
    return out


def approval_text(approvals: list[dict[str, Any]]) -> str:
    if not approvals:
        return "none"
    return "; ".join(f"{a.get('golden')} generation {a.get('generation')}"
                     f"{' by ' + a['approver'] if a.get('approver') else ''}"
                     f"{': ' + a['reason'] if a.get('reason') else ''}" for a in approvals)[:5000]


def _experiment(client: Any, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    try:
        return str(client.create_experiment(name))
    except Exception:  # noqa: BLE001 - another session created it first
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return str(exp.experiment_id)


def _run(client: Any, experiment_id: str, row: Mapping[str, Any], details: Mapping[str, Any]) -> str:
    from mlflow.entities import Metric, Param, RunTag

    found = client.search_runs([experiment_id], filter_string=f"tags.`{BUNDLE_TAG}` = '{row['sha256']}'",
                               max_results=1)
    if found:
        return str(found[0].info.run_id)
    tags = {TAG_PREFIX + tag: str(row[column]) for tag, column in TAGS.items() if row.get(column) is not None}
    tags[TAG_PREFIX + "approval"] = approval_text(details["approvals"])
    run = client.create_run(experiment_id, tags=tags,
                            run_name=f"{row['config_name']}-v{row['config_version']}-{row['sha256'][:12]}")
    run_id = str(run.info.run_id)
    now_ms = int(time.time() * 1000)
    params = [Param(k, "" if row[k] is None else str(row[k])) for k in PARAMS]
    metrics = [Metric(k, v, now_ms, 0) for k, v in sorted(metrics_of(details["verdicts"]).items())]
    client.log_batch(run_id, metrics=metrics, params=params, tags=[RunTag("mlflow.note.content", row["path"])])
    client.log_artifact(run_id, row["path"], artifact_path=ARTIFACT_DIR)
    if row.get("attestations"):  # the in-toto attestations beside the bundle, as the catalog recorded them
        client.log_text(run_id, row["attestations"],
                        f"{ATTESTATION_DIR}/{Path(row['path']).name}.intoto.jsonl")
    client.set_terminated(run_id)
    return run_id


def _register(client: Any, name: str, run_id: str, row: Mapping[str, Any], details: Mapping[str, Any]) -> str:
    try:
        client.get_registered_model(name)
    except Exception:  # noqa: BLE001 - RESOURCE_DOES_NOT_EXIST: create it (a racing session may have)
        try:
            client.create_registered_model(name, tags={TAG_PREFIX + "config": name})
        except Exception:  # noqa: BLE001
            client.get_registered_model(name)
    for mv in client.search_model_versions(f"name='{name}'"):
        if (mv.tags or {}).get("bundle_sha256") == row["sha256"]:
            return str(mv.version)
    tags = {"bundle_sha256": row["sha256"], "engine_sha256": row["engine_sha256"],
            "approval": approval_text(details["approvals"]), "config_version": str(row["config_version"]),
            "backend": f"{row['backend']} {row['backend_version']}"}
    source = f"runs:/{run_id}/{ARTIFACT_DIR}"
    mv = client.create_model_version(name, source, run_id=run_id, tags=tags,
                                     description=f"engine {row['engine_sha256']} from bundle {Path(row['path']).name}")
    return str(mv.version)


def push_row(catalog: Catalog, row: Mapping[str, Any], *, uri: str, register: bool = False) -> PushOutcome:
    """Push one catalogued bundle; never raises for network or server problems (``ok`` is False)."""
    _mlflow()
    from mlflow import MlflowClient

    details = catalog.details(row["sha256"])
    if not Path(row["path"]).is_file():
        return PushOutcome(row["sha256"], row["path"], False, error=f"{row['path']}: bundle file is missing")
    name = str(row["config_name"] or "unnamed")
    tracking = split_credentials(uri)
    try:
        # the client sees the URI without credentials (mlflow prints it: "View run at ..."); they go by env
        with _http_defaults(tracking):
            client = MlflowClient(tracking_uri=tracking.redacted, registry_uri=tracking.redacted)
            experiment_id = _experiment(client, name)
            run_id = _run(client, experiment_id, row, details)
            version = _register(client, name, run_id, row, details) if register else None
    except Exception as exc:  # noqa: BLE001 - network, HTTP and server errors all end up here
        text = tracking.scrub(" ".join(str(exc).split()))[:300]
        return PushOutcome(row["sha256"], row["path"], False, error=f"{type(exc).__name__}: {text}")
    now = iso_utc(time.time())
    catalog.record_push(row["sha256"], uri=tracking.redacted, experiment=name, run_id=run_id, when=now)
    if version is not None:
        catalog.record_registration(row["sha256"], uri=tracking.redacted, model_name=name, model_version=version,
                                    when=now)
    return PushOutcome(row["sha256"], row["path"], True, run_id, name, version)


def unpushed(catalog: Catalog, uri: str, *, register: bool) -> list[dict[str, Any]]:
    """Current bundles not yet pushed to ``uri`` (or, with ``register``, not yet registered there)."""
    table = "registrations" if register else "pushes"
    uri = redact(uri)  # the key the pushes are recorded under
    return catalog.rows(f"SELECT * FROM bundles b WHERE b.pruned IS NULL AND b.superseded_by IS NULL AND NOT EXISTS "
                        f"(SELECT 1 FROM {table} p WHERE p.bundle_sha256 = b.sha256 AND p.uri = ?) "
                        "ORDER BY b.created, b.sha256", (uri,))
