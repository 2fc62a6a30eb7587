"""The audit archive at the end of a session: ``--trt-catalog``, ``--trt-mlflow-uri``, ``--trt-mlflow-register``.

Runs in the process that sees every bundle (the xdist controller, or the only
process) once every bundle is final; :mod:`pytest_trt.catalog.archiving` indexes
and pushes, and never raises for a catalog or network problem.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_trt import options as opt

if TYPE_CHECKING:
    from pytest_trt.catalog.archiving import ArchiveOutcome

SECTION = "pytest-trt audit archive"


@dataclass(frozen=True)
class ArchiveRequest:
    """A session that archives its bundles: (MLflow URI or None, register)."""

    mlflow_uri: str | None
    register: bool

    @classmethod
    def from_config(cls, config: pytest.Config) -> ArchiveRequest | None:
        uri = opt.value(config, opt.MLFLOW_URI_OPT) or None
        register = opt.flag_value(config, opt.MLFLOW_REGISTER_OPT)
        on = opt.flag_value(config, opt.CATALOG_OPT) or uri is not None
        if register and uri is None:
            raise pytest.UsageError(f"{opt.MLFLOW_REGISTER} registers engines in MLflow and so needs {opt.MLFLOW_URI}")
        if uri is not None and importlib.util.find_spec("mlflow") is None:
            raise pytest.UsageError(f"{opt.MLFLOW_URI} needs mlflow, which is not installed: "
                                    "pip install 'pytest-trt[mlflow]'")
        return cls(str(uri) if uri else None, register) if on else None

    def run(self, paths: Sequence[Path], bundle_dir: Path, invocation_dir: Path) -> ArchiveOutcome:
        from pytest_trt.catalog import DEFAULT_DB_NAME
        from pytest_trt.catalog.archiving import ArchiveSettings, archive_bundles

        settings = ArchiveSettings(db=Path(bundle_dir) / DEFAULT_DB_NAME, mlflow_uri=self.mlflow_uri,
                                   register=self.register, invocation_dir=invocation_dir)
        return archive_bundles(paths, settings)
