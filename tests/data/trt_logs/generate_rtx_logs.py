"""Regenerate the TensorRT-RTX build logs of the example MobileNetV2 kept as test data.

Run with the interpreter of the TensorRT-RTX version whose log you want::

    /tmp/venv/bin/python tests/data/trt_logs/generate_rtx_logs.py      # tensorrt-rtx 1.7.1.116
    /tmp/venv14/bin/python tests/data/trt_logs/generate_rtx_logs.py    # tensorrt-rtx 1.4.0.76

It builds ``examples.models.mobilenet_v2()`` (dynamic batch, 32x32 input,
profile 1/8/32) with ProfilingVerbosity.DETAILED on the CPU (TensorRT-RTX
builds ahead of time without a GPU) and writes every logger message, VERBOSE
included, in the ``build.log`` form (``[SEVERITY] text``; a multi-line message
continues on unprefixed lines) to ``log_rtx<version>_mobilenet_v2_detailed.txt``
next to this script, then prints the facts pytest-trt reads from it, for MANIFEST.json
(``--facts-only`` prints them for the existing log without building: a rebuild changes the
timings recorded in the manifest).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository root, for examples.models

import tensorrt_rtx as trt  # noqa: E402

from examples.models import mobilenet_v2  # noqa: E402

_SEVERITY = {
    trt.ILogger.Severity.INTERNAL_ERROR: "INTERNAL_ERROR",
    trt.ILogger.Severity.ERROR: "ERROR",
    trt.ILogger.Severity.WARNING: "WARNING",
    trt.ILogger.Severity.INFO: "INFO",
    trt.ILogger.Severity.VERBOSE: "VERBOSE",
}


class _Capture(trt.ILogger):
    # TensorRT keeps one process-global logger; one instance serves every build here.
    def __init__(self) -> None:
        trt.ILogger.__init__(self)
        self.messages: list[tuple[str, str]] = []

    def log(self, severity: trt.ILogger.Severity, msg: str) -> None:
        self.messages.append((_SEVERITY.get(severity, "INFO"), msg))


def build_log(logger: _Capture) -> str:
    model = mobilenet_v2()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(model.SerializeToString()):
        raise SystemExit("\n".join(str(parser.get_error(i)) for i in range(parser.num_errors)))
    config = builder.create_builder_config()
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    profile = builder.create_optimization_profile()
    profile.set_shape("input", (1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32))
    config.add_optimization_profile(profile)
    if builder.build_serialized_network(network, config) is None:
        raise SystemExit("build failed")
    return "".join(f"[{sev}] {text}\n" for sev, text in logger.messages)


def facts(path: Path) -> dict[str, object]:
    from pytest_trt.buildlog import read_log

    record = read_log(path)
    return {
        "detailed_layer_count": len(record.layers),
        "fused_origins": [list(layer.origins) for layer in record.fusions],
        "helper_layers": [layer.name for layer in record.layers if layer.kind == "helper"],
        "subgraphs": {s.name: len(s.origins) for s in record.subgraphs},
        "layer_counts": record.layer_counts,
        "total_activation_memory_bytes": record.memory.activation,
        "engine_generation_seconds": record.timings.get("engine_generation_s"),
        "warnings": [m.text for m in record.warnings],
        "bindings": list(record.bindings),
        "unparsed_lines": record.unparsed_lines,
    }


def main() -> None:
    version = ".".join(trt.__version__.split(".")[:3])
    out = HERE / f"log_rtx{version}_mobilenet_v2_detailed.txt"
    if "--facts-only" not in sys.argv:
        out.write_text(build_log(_Capture()), encoding="utf-8", newline="\n")
        print(f"wrote {out}")
    print(json.dumps(facts(out), indent=1))


if __name__ == "__main__":
    main()
