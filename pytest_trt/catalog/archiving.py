"""What a pytest session does with its bundles at the end: index them, push them, say what happened.

Runs once per session, in the process that sees every bundle (the xdist
controller, or the only process), after every bundle is final.  Nothing here
raises for a catalog, verification or network problem: each becomes a
summary line, and the bundles stay on disk untouched.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ArchiveSettings:
    db: Path
    mlflow_uri: str | None = None
    register: bool = False
    #: where the user ran pytest: the printed retry command names the catalog relative to it
    invocation_dir: Path | None = None


@dataclass(frozen=True)
class ArchiveOutcome:
    lines: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())


def retry_command(settings: ArchiveSettings) -> str:
    """The command that pushes what this session could not, pasteable where pytest ran."""
    db = str(settings.db)
    if settings.invocation_dir is not None:
        rel = os.path.relpath(settings.db, settings.invocation_dir)
        db = rel if not rel.startswith("..") else db
    from pytest_trt.catalog.credentials import PASSWORD_ENV, USERNAME_ENV, split_credentials

    reg = " --register" if settings.register else ""
    uri = split_credentials(str(settings.mlflow_uri))
    auth = (f" (with the URI's credentials in {USERNAME_ENV} and {PASSWORD_ENV})"
            if uri.username is not None or uri.password is not None else "")
    return f"pytest-trt catalog push --db {shlex.quote(db)} --uri {shlex.quote(uri.redacted)}{reg}{auth}"


def archive_bundles(paths: Sequence[Path], settings: ArchiveSettings) -> ArchiveOutcome:
    """Index ``paths`` into the catalog, then push those not yet pushed (when a URI is set)."""
    from pytest_trt.catalog.store import Catalog
    from pytest_trt.errors import CatalogError

    lines: list[str] = []
    warnings: list[str] = []
    try:
        with Catalog(settings.db) as catalog:
            results = catalog.add_paths(sorted(set(paths)))
            added = sum(r.status == "added" for r in results)
            known = sum(r.status == "known" for r in results)
            lines.append(f"catalog {settings.db}: {added} bundle(s) added, {known} already indexed")
            warnings += [f"catalog: {r.path} not indexed: {r.reason}" for r in results
                         if r.status not in ("added", "known")]
            if settings.mlflow_uri:
                shas = {r.sha256 for r in results if r.sha256 is not None}
                pushed, failed = _push(catalog, shas, settings)
                from pytest_trt.catalog.credentials import redact

                lines.append(f"mlflow {redact(settings.mlflow_uri)}: {pushed} bundle(s) pushed")
                if failed:
                    warnings.append(f"mlflow push failed for {len(failed)} bundle(s) ({failed[0]}); the bundles are "
                                    f"kept on disk and in the catalog; retry with: {retry_command(settings)}")
    except CatalogError as exc:
        warnings.append(f"catalog not updated: {exc.message}")
    return ArchiveOutcome(tuple(lines), tuple(warnings))


def _push(catalog: object, shas: set[str], settings: ArchiveSettings) -> tuple[int, list[str]]:
    from pytest_trt.catalog.mlflow_push import push_row, unpushed
    from pytest_trt.catalog.store import Catalog

    assert isinstance(catalog, Catalog) and settings.mlflow_uri
    rows = [r for r in unpushed(catalog, settings.mlflow_uri, register=settings.register) if r["sha256"] in shas]
    pushed, failed = 0, []
    for row in rows:
        outcome = push_row(catalog, row, uri=settings.mlflow_uri, register=settings.register)
        if outcome.ok:
            pushed += 1
        else:
            failed.append(f"{Path(outcome.path).name}: {outcome.error}")
            break  # the server is down or refusing: do not wait out the timeout once per bundle
    return pushed, failed
