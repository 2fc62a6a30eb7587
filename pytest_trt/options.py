"""Option and ini names, declared once and used by the plugin, the CLI, tests and help texts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_trt.backends import registry

ENGINE_BUILD = "--trt-engine-build"
BACKEND = "--trt-backend"
REBUILD = "--trt-rebuild"
CACHE_DIR = "--trt-cache-dir"

#: options that take a path: in ``--opt VALUE`` form pytest may count VALUE when choosing the rootdir
PATH_OPTIONS = (CACHE_DIR, "--trt-golden-dir", "--trt-bundle-dir", "--trt-sign-key", "--trt-pins")

INI_ENGINE_BUILD = "trt_engine_build"
INI_BACKEND = "trt_backend"
INI_CACHE_DIR = "trt_cache_dir"

BACKEND_CHOICES = registry.choices()  # ("auto", "tensorrt", "tensorrt-rtx", "onnxruntime")
DEFAULT_CACHE_DIR = ".trt_cache"
MARKER = "trt"
MARKER_HELP = (
    "trt(config): the BuildConfig whose engine the test's trt_engine fixture provides; "
    "built with --trt-engine-build, else taken from the engine cache"
)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Options:
    """The plugin's settings after command line and ini are merged (command line wins)."""

    engine_build: bool
    backend: str
    rebuild: bool
    cache_dir: Path

    @classmethod
    def from_pytest(cls, config: Any) -> Options:
        backend = config.getoption("trt_backend") or config.getini(INI_BACKEND) or "auto"
        if backend not in BACKEND_CHOICES:
            import pytest

            raise pytest.UsageError(
                f"{INI_BACKEND} = {backend!r} is not a backend; choose one of {', '.join(BACKEND_CHOICES)}"
            )
        cache = config.getoption("trt_cache_dir") or config.getini(INI_CACHE_DIR) or DEFAULT_CACHE_DIR
        cache_dir = Path(cache)
        if not cache_dir.is_absolute():
            cache_dir = Path(config.rootpath) / cache_dir
        return cls(
            engine_build=bool(config.getoption("trt_engine_build")) or _bool(config.getini(INI_ENGINE_BUILD)),
            backend=backend,
            rebuild=bool(config.getoption("trt_rebuild")),
            cache_dir=cache_dir,
        )

#: one GPU per pytest-xdist worker (pytest_trt.devices)
DEVICES = "--trt-devices"
INI_DEVICES = "trt_devices"

# audit archive (pytest_trt.catalog): index written bundles, push them to MLflow
CATALOG = "--trt-catalog"
MLFLOW_URI = "--trt-mlflow-uri"
MLFLOW_REGISTER = "--trt-mlflow-register"
INI_CATALOG = "trt_catalog"
INI_MLFLOW_URI = "trt_mlflow_uri"
INI_MLFLOW_REGISTER = "trt_mlflow_register"
