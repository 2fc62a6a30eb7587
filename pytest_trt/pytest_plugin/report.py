"""Text for the report header and the terminal summary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_trt.engines.provider import EngineProvider

def installed_version(backend: str) -> str:
    """The backend's version from package metadata, without importing it."""
    from pytest_trt.backends import registry

    found = registry.find(backend)
    return (registry.installed_version(backend) if found is not None else None) or "unknown version"


def header_lines(provider: EngineProvider) -> list[str]:
    from pytest_trt.common.hostprobe import gpus

    if provider.backend_name == "none":
        return [f"pytest-trt: no backend ({provider.why})"]
    found = gpus()
    device = ", ".join(f"{g.name} (sm {g.compute_capability})" for g in found) or "no GPU (CPU only)"
    mode = "build missing engines" if provider.build_enabled else "cached engines only (--trt-engine-build to build)"
    return [
        f"pytest-trt: backend {provider.backend_name} {installed_version(provider.backend_name)} ({provider.why})",
        f"pytest-trt: device {device}; cache {provider.cache.root}; {mode}",
    ]


def summary_rows(provider: EngineProvider) -> list[dict[str, Any]]:
    rows = []
    for ev in provider.events:
        e = ev.engine
        try:
            layers: Any = e.record_facts()["layers"]  # a cache hit's stored facts: no record made
        except Exception as exc:  # an unparsable record must not hide the table
            layers = f"? ({type(exc).__name__})"
        build_s, calibration_s = e.result.seconds
        rows.append(
            {
                "name": e.config.name,
                "version": e.config.version,
                "config_hash": e.result.config_hash[:12],
                "status": ev.status,
                "build_s": build_s,  # the calibration included
                "calibration_s": calibration_s,
                "layers": layers,
                "backend": f"{e.backend_name} {e.result.backend_version}",
            }
        )
    return rows


def engine_table(rows: list[dict[str, Any]]) -> list[str]:
    unique: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:  # one row per engine, also when several xdist workers used it
        key = (row["name"], row["config_hash"])
        if key not in unique or row["status"] != "cached":
            unique[key] = row
    head = ("engine", "config hash", "status", "build s", "calibration s", "layers", "backend")
    body = [
        (
            f"{r['name']} v{r['version']}",
            r["config_hash"],
            r["status"],
            f"{r['build_s']:.2f}",
            f"{r['calibration_s']:.2f}" if r.get("calibration_s") else "-",
            str(r["layers"]),
            r["backend"],
        )
        for r in unique.values()
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*head), *(fmt.format(*row) for row in body)]
