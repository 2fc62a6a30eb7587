"""Every corpus file parses and every fact of its MANIFEST.json entry holds.

A fact key without a checker fails the test: a new manifest fact must get a check here.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.buildlog import BuildRecord, Layer, read_layer_json, read_log
from pytest_trt.buildlog.calibcache import CalibrationCache, read_calibration_cache, summarize_calibration
from pytest_trt.buildlog.dialects import version_from_tag
from pytest_trt.buildlog.listings import canonical_dtype, metadata_origins
from pytest_trt.buildlog.names import split_name

CORPUS = Path(__file__).resolve().parents[1] / "data" / "trt_logs"
MANIFEST: list[dict[str, Any]] = json.loads((CORPUS / "MANIFEST.json").read_text(encoding="utf-8"))
#: facts that document a file rather than state something a parser extracts
DOC_KEYS = {"notes", "excerpt", "encoding"}
#: facts the manifest knows from outside the file; the parser must then report nothing rather than guess
NOT_IN_FILE = {
    ("log_trt10.4.0_fuzzylabs_alexnet_fp16_doc_excerpt.txt", "trt_version"):
        "the libnvinfer_builder_resource.so.10.4.0 line is in a block of the source doc that was not saved",
}


def _layer(record: BuildRecord, name: str) -> Layer:
    hits = [layer for layer in record.layers if layer.name == name]
    assert hits, f"no layer named {name!r}; layers: {[x.name for x in record.layers][:20]}"
    return hits[0]


def _count(record: BuildRecord, stage: str) -> list[int]:
    return [n for s, n in record.layer_counts if s == stage]


def _tensor_old(t: Any) -> str:
    return f"{t.name}[{t.dtype}({','.join(map(str, t.dims))})]"


def _tensor_new(t: Any) -> str:
    return f"{t.name} ({t.dtype}[{','.join(map(str, t.dims))}])"


def _close(a: float | None, b: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=1e-6)


def _last(value: Any) -> Any:
    return value[-1] if isinstance(value, list) else value


# -- checkers: (record, expected value, manifest entry) -> None -----------------------------------
Check = Callable[[Any, Any, dict[str, Any]], None]


def _fusions(r: BuildRecord, v: list[list[str]], e: dict[str, Any]) -> None:
    seen = {(f.first, f.second) for f in r.fusion_events}
    if not v:
        assert not r.fusion_events
    for a, b in v:
        assert (a, b) in seen, (a, b)


def _pass_counts(r: BuildRecord, v: dict[str, int], e: dict[str, Any]) -> None:
    assert dict(Counter(f.pass_name for f in r.fusion_events if f.pass_name)) == v


def _stage(stage: str) -> Check:
    def check(r: BuildRecord, v: Any, e: dict[str, Any]) -> None:
        got = _count(r, stage)
        assert got, f"no '{stage}' checkpoint"
        if isinstance(v, list):
            assert got == v
        else:  # single value: the file has it once, or (8.4 ..) the same value printed twice
            assert set(got) == {v}, got
    return check


def _samples(r: BuildRecord, v: list[dict[str, Any]], e: dict[str, Any]) -> None:
    for s in v:
        layer = _layer(r, s.get("name", s.get("Name")))
        assert layer.type == s.get("type", s.get("LayerType"))
        tactic = s.get("tactic", s.get("TacticValue") or s.get("TacticName"))
        if tactic is not None:
            assert layer.tactic == tactic
        if "inputs" in s:
            assert [_tensor_old(t) if "(" in x.rsplit("[", 1)[-1] else _tensor_new(t)
                    for t, x in zip(layer.inputs, s["inputs"], strict=True)] == s["inputs"]
            assert len(layer.inputs) == len(s["inputs"])
        if "outputs" in s:
            assert [_tensor_old(t) for t in layer.outputs][: len(s["outputs"])] == s["outputs"]
            assert len(layer.outputs) == len(s["outputs"])
        if "output_dtype" in s:
            assert layer.precision == canonical_dtype(s["output_dtype"])
        if "output_format" in s:
            assert layer.outputs[0].format == s["output_format"]
        if "Metadata" in s:
            assert layer.origins == metadata_origins(s["Metadata"]) and layer.origins


def _first_layer_detail(r: BuildRecord, v: dict[str, Any], e: dict[str, Any]) -> None:
    layer = r.layers[0]
    assert (layer.type, layer.name, layer.tactic) == (v["type"], v["name"], v["tactic"])
    assert _tensor_new(layer.inputs[0]) == v["input"] and _tensor_new(layer.outputs[0]) == v["output"]


def _precisions(r: BuildRecord, v: dict[str, Any], e: dict[str, Any]) -> None:
    for name, dt in v.items():
        layer = _layer(r, name)
        if isinstance(dt, list):  # every output's dtype
            assert [t.dtype for t in layer.outputs] == [canonical_dtype(x) for x in dt]
        else:
            assert layer.precision == canonical_dtype(dt)


def _memory(field: str) -> Check:
    return lambda r, v, e: _eq(getattr(r.memory, field), _last(v))


def _timing(key: str) -> Check:
    return lambda r, v, e: _truth(_close(r.timings.get(key), _last(v)), (key, r.timings.get(key), v))


def _eq(a: Any, b: Any) -> None:
    assert a == b, (a, b)


def _truth(ok: bool, detail: Any) -> None:
    assert ok, detail


def _warnings(r: BuildRecord, v: list[str], e: dict[str, Any]) -> None:
    for text in v:
        assert any(text in m.text for m in r.warnings), text


def _calib(field: str) -> Check:
    def check(r: BuildRecord, v: Any, e: dict[str, Any]) -> None:
        summary = summarize_calibration(r.calibration)
        if field == "batches":
            assert sorted(summary.batch_times_s) == v
        elif field == "batch_times":
            assert {str(k): t for k, t in summary.batch_times_s.items()} == v
        else:
            got = getattr(summary, field)
            assert (_close(got, v) if isinstance(v, float) else got == v), (field, got, v)
    return check


def _fused_origins(r: BuildRecord, v: list[list[str]], e: dict[str, Any]) -> None:
    fused = {layer.origins for layer in r.fusions}
    for origins in v:
        assert tuple(origins) in fused, origins


def _unfused_origins(r: BuildRecord, v: list[list[str]], e: dict[str, Any]) -> None:
    for origins in v:
        holders = [layer for layer in r.layers if set(origins) <= set(layer.origins)]
        assert holders and all(not layer.is_fusion for layer in holders), origins


def _subgraphs(r: BuildRecord, v: dict[str, int], e: dict[str, Any]) -> None:
    assert {s.name: len(s.origins) for s in r.subgraphs} == v
    sg = next(iter(v))
    assert all(layer.subgraph == sg for layer in r.layers), "every kernel belongs to the one ForeignNode"


def _helpers(r: BuildRecord, v: list[str], e: dict[str, Any]) -> None:
    assert [layer.name for layer in r.layers if layer.kind == "helper"] == v


LOG_CHECKS: dict[str, Check] = {
    "trt_version": lambda r, v, e: _eq(r.backend_version, v),
    "trt_version_tag": lambda r, v, e: _eq(r.backend_version, version_from_tag(v.lstrip("v"))),
    "version_line_raw": lambda r, v, e: _eq(r.backend_version, version_from_tag(v.rsplit(" ", 1)[-1])),
    "fusions": _fusions,
    "fusion_pass_counts": _pass_counts,
    "layer_count_original": _stage("Original"),
    "layer_count_after_myelin": _stage("After Myelin optimization"),
    "layer_count_after_vertical_fusions": _stage("After vertical fusions"),
    "layer_count_after_vertical_fusions_all": _stage("After vertical fusions"),
    "layer_count_after_reformat_layers": _stage("After reformat layers"),
    "layer_count_after_reformat_layers_all": _stage("After reformat layers"),
    "engine_layer_info_count": lambda r, v, e: _eq(len(r.layers), v),
    "detailed_layer_count": lambda r, v, e: _eq(len(r.layers), v),
    "engine_layers_sample": _samples,
    "layers_dump_sample": _samples,
    "first_engine_layer": _first_layer_detail,
    "precisions": _precisions,
    "peak_gpu_memory_mib": _memory("peak_gpu_mib"),
    "peak_gpu_memory_mib_all": _memory("peak_gpu_mib"),
    "peak_cpu_memory_mib": _memory("peak_cpu_mib"),
    "peak_cpu_memory_mib_all": _memory("peak_cpu_mib"),
    "total_activation_memory_bytes": _memory("activation"),
    "total_activation_memory_bytes_all": _memory("activation"),
    "engine_generation_seconds": _timing("engine_generation_s"),
    "engine_generation_seconds_all": _timing("engine_generation_s"),
    "engine_built_seconds": _timing("engine_built_s"),
    "engine_build_seconds": _timing("engine_build_s"),
    "graph_optimization_seconds": _timing("graph_optimization_s"),
    "engine_size_mib": lambda r, v, e: _truth(_close(r.engine_size_mib, v), r.engine_size_mib),
    "result": lambda r, v, e: _eq(r.result, v),
    "warnings_contains": _warnings,
    "warning_count": lambda r, v, e: _eq(len(r.warnings), v),
    "precision_flags": lambda r, v, e: _eq(r.precision_flags, v.split()[0]),
    "polygraphy_version": lambda r, v, e: _eq((r.tool, r.tool_version), ("polygraphy", v)),
    "removed_layers": lambda r, v, e: _truth(set(v) <= set(r.removed_layers), r.removed_layers),
    "calibrator": _calib("calibrator"),
    "calibration_cache_header": _calib("cache_header"),
    "calibration_batch_size": _calib("batch_size"),
    "calibrated_batches": _calib("batches"),
    "calibrated_batch_times_s": _calib("batch_times"),
    "post_processing_seconds": _calib("post_processing_s"),
    "calibration_completed_seconds": _calib("completed_s"),
    "fused_origins": _fused_origins,
    "unfused_origins": _unfused_origins,
    "subgraphs": _subgraphs,
    "helper_layers": _helpers,
    "bindings": lambda r, v, e: _eq(list(r.bindings), v),
}


def _raw_tensor_keys(e: dict[str, Any], v: list[str]) -> None:
    doc = json.loads((CORPUS / e["file"]).read_text(encoding="utf-8"))
    first = next(layer for layer in doc["Layers"] if layer.get("Inputs"))
    assert list(first["Inputs"][0]) == v


JSON_CHECKS: dict[str, Check] = {
    "format": lambda r, v, e: _eq(r.origins_exact is False and all(x.type == "Unknown" for x in r.layers),
                                  v.startswith("names_only")),
    "layer_count": lambda r, v, e: _eq(len(r.layers), v),
    "bindings": lambda r, v, e: _eq(list(r.bindings), v),
    "layer_types": lambda r, v, e: _eq(dict(Counter(x.type for x in r.layers)), v),
    "layers_sample": _samples,
    "precisions": _precisions,
    "tensor_keys": lambda r, v, e: _raw_tensor_keys(e, v),
    "first_layer": lambda r, v, e: _eq(r.layers[0].name, v),
    "second_layer": lambda r, v, e: _eq(r.layers[1].name, v),
    "last_layer": lambda r, v, e: _eq(r.layers[-1].name, v),
    "fused_layer_example": lambda r, v, e: _eq((_layer(r, v["name"]).origins, split_name(v["name"])),
                                               (tuple(v["members"]), v["members"])),
    "contains_layer": lambda r, v, e: _layer(r, v) and None,
    "reformat_layer_count": lambda r, v, e: _eq(r.reformat_count, v),
}


def _scales_float(c: CalibrationCache, v: dict[str, float], e: dict[str, Any]) -> None:
    for k, x in v.items():
        assert math.isclose(c.scales[k], x, rel_tol=1e-5, abs_tol=1e-12), (k, c.scales[k], x)


CACHE_CHECKS: dict[str, Check] = {
    "header": lambda c, v, e: _eq(c.header, v),
    "version_tag": lambda c, v, e: _eq(c.version_tag, v),
    "trt_version": lambda c, v, e: _eq(c.trt_version, v),
    "calibrator": lambda c, v, e: _eq(c.calibrator, v),
    "entry_count": lambda c, v, e: _eq((len(c.scales), c.unparsed_lines), (v, 0)),
    "scales_hex": lambda c, v, e: _eq({k: c.raw[k] for k in v}, v),
    "scales_float": _scales_float,
    "zero_value_entries": lambda c, v, e: _eq([k for k in v if c.scales[k] == 0.0], v),
    "keys_containing_colon_example": lambda c, v, e: _truth(all(k in c.scales for k in v), v),
}

READERS: dict[str, tuple[Callable[[Path], Any], dict[str, Check]]] = {
    "verbose_log": (read_log, LOG_CHECKS),
    "layer_json": (read_layer_json, JSON_CHECKS),
    "calib_cache": (read_calibration_cache, CACHE_CHECKS),
}


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["file"] for e in MANIFEST])
def test_manifest_facts(entry: dict[str, Any]) -> None:
    reader, checks = READERS[entry["kind"]]
    parsed = reader(CORPUS / entry["file"])
    missing = sorted(set(entry["expected"]) - set(checks) - DOC_KEYS)
    assert not missing, f"manifest facts without a checker: {missing}"
    failed: list[str] = []
    for key, value in entry["expected"].items():
        if key in DOC_KEYS:
            continue
        if (entry["file"], key) in NOT_IN_FILE:
            assert parsed.backend_version is None, "the parser must not invent a version the file does not state"
            continue
        try:
            checks[key](parsed, value, entry)
        except AssertionError as err:
            failed.append(f"{key}: {err}")
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("entry", [e for e in MANIFEST if e["kind"] == "verbose_log"], ids=lambda e: e["file"])
def test_logs_mostly_understood(entry: dict[str, Any]) -> None:
    """Complete logs: fewer than 1 line in 500 is not understood (the corpus has elided '...' lines)."""
    record = read_log(CORPUS / entry["file"])
    assert record.total_lines > 0
    assert record.unparsed_lines <= max(5, record.total_lines // 500), record.unparsed_lines


def test_corpus_files_all_in_manifest() -> None:
    listed = {e["file"] for e in MANIFEST}
    on_disk = {p.name for p in CORPUS.iterdir() if p.suffix in (".txt", ".json", ".cache") and p.name != "MANIFEST.json"}
    assert on_disk == listed
