"""Audit archive: a queryable SQLite catalog of audit bundles, MLflow push, retention.

Modules, one idea each: :mod:`.schema` (connection, WAL, busy retries,
versioned migrations), :mod:`.fields` (the catalog row of one verified
bundle), :mod:`.store` (add, look up, supersede), :mod:`.query` (filters),
:mod:`.render` (tables), :mod:`.prune` (retention that keeps referenced
evidence), :mod:`.mlflow_push` (MLflow tracking and model registry),
:mod:`.cli` (``pytest-trt catalog ...``) and :mod:`.session` (what a pytest session archives).  Nothing
heavy is imported here; mlflow only inside :mod:`.mlflow_push`'s functions.
"""

from __future__ import annotations

#: the catalog's file name, in the bundle folder by default
DEFAULT_DB_NAME = "catalog.sqlite"
