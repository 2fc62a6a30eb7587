"""Read the bundles (and build-failure notes) of two runs and pair them by config name and version."""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.audit.failures import FAILED_SUFFIX
from pytest_trt.common.backend_version import backend_version_of
from pytest_trt.errors import PairingError

if TYPE_CHECKING:
    from pytest_trt.audit.facts import FactsReader, Verified
    from pytest_trt.audit.verify import VerifiedBundle


def backend_of(build: Mapping[str, Any]) -> tuple[str, str]:
    """The backend name and version of a bundle's ``build.json`` ``build`` object, of any release."""
    return str(build.get("backend") or "unknown"), backend_version_of(build) or "unknown"


@dataclass(frozen=True)
class Side:
    """One config of one run: its verified bundle, or the note of its failed build."""

    path: str
    name: str
    version: str
    backend: str
    backend_version: str
    bundle: VerifiedBundle | None = None
    failure: Mapping[str, Any] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.version

    @property
    def file(self) -> str:
        """The bundle's (or note's) path as the report shows it: relative to the OLD or NEW folder given, that is its
        file name (folders are read one level deep), so no machine's absolute path leaks into a shared report."""
        return Path(self.path).name


#: the failure stage of a bundle that cannot be used (it fails verification or cannot be read)
VERIFY_STAGE = "verify"
#: ``<name>-v<version>-<backend><major.minor>-<device>.tar.gz`` (``pytest_trt.audit.bundle.bundle_name``)
_BUNDLE_NAME = re.compile(r"^(?P<name>.+)-v(?P<version>[A-Za-z0-9_.+-]+?)-[A-Za-z][A-Za-z_-]*\d+\.\d+-.+\.tar\.gz$")

#: ``<name>-v<version>-<backend>.build-failed.json`` (``pytest_trt.audit.failures.write_failure_note``)
_NOTE_NAME = re.compile(r"^(?P<name>.+)-v(?P<version>[A-Za-z0-9_.+-]+?)-[A-Za-z][A-Za-z0-9_-]*"
                        + re.escape(FAILED_SUFFIX) + "$")


def _unverified_side(path: Path, why: str, named: re.Pattern[str] = _BUNDLE_NAME) -> Side:
    """A bundle (or failure note) that cannot be used: named by its file (``named``: the file name's pattern; its
    contents are not trusted), compared as a failure."""
    match = named.match(path.name)
    name, version = (match["name"], match["version"]) if match else (path.name, "?")
    return Side(str(path), name, version, "unknown", "unknown", failure={"stage": VERIFY_STAGE, "message": why})


def catalog_lookup(db: Path) -> Callable[[Path], Verified | None]:
    """What the catalog at ``db`` recorded of a bundle file when it verified it (opened read-only, once)."""
    from pytest_trt.audit.facts import Verified
    from pytest_trt.catalog.store import Catalog

    catalog = Catalog(db, read_only=True)

    def lookup(path: Path) -> Verified | None:
        row = catalog.conn.execute("SELECT sha256, size, mtime_ns, ctime_ns, inode, members_sha256 FROM bundles "
                                   "WHERE path = ? AND superseded_by IS NULL", (str(path.resolve()),)).fetchone()
        if row is None or row["members_sha256"] is None:
            return None
        return Verified(row["sha256"], (row["size"], row["mtime_ns"], row["ctime_ns"], row["inode"]),
                        row["members_sha256"])

    return lookup


def _bundle_side(path: Path, reader: FactsReader | None = None) -> Side:
    from pytest_trt.audit.facts import FactsReader
    from pytest_trt.errors import BundleIntegrityError

    try:
        vb = (reader or FactsReader()).read(path)
    except BundleIntegrityError as exc:
        return _unverified_side(path, f"the bundle fails verification ({exc.message}); "
                                "check it with `pytest-trt bundle verify`")
    except OSError as exc:
        return _unverified_side(path, f"the bundle cannot be read ({exc.strerror or exc})")
    pinned = vb.config.get("pinned", {})
    backend, version = backend_of(vb.build["build"])
    return Side(str(path), str(pinned.get("name")), str(pinned.get("version")), backend, version, bundle=vb)


def _failure_side(path: Path) -> Side:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        config = doc["config"]
        return Side(str(path), str(config["name"]), str(config.get("version")), str(doc.get("backend")),
                    str(doc.get("backend_version")), failure=doc)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return _unverified_side(path, f"not a readable pytest-trt build-failure note ({exc})", _NOTE_NAME)


def _files(spec: str) -> list[Path]:
    out: list[Path] = []
    for part in (p for p in spec.split(",") if p):
        path = Path(part)
        if path.is_dir():
            out += sorted(path.glob("*.tar.gz")) + sorted(path.glob("*" + FAILED_SUFFIX))
        elif path.is_file():
            out.append(path)
        else:
            raise PairingError(f"{path}: no such bundle or folder")
    return out


def load_run(spec: str, reader: FactsReader | None = None) -> list[Side]:
    """Every config of a run: ``spec`` is a folder, a bundle, or several joined by commas.

    ``reader``: how bundles are read (verified facts of unchanged files, each file once; see
    :class:`~pytest_trt.audit.facts.FactsReader`); by default a reader of this run's sidecars.
    """
    from pytest_trt.audit.facts import FactsReader

    files = _files(spec)
    if not files:
        raise PairingError(f"{spec}: holds no bundles (*.tar.gz) and no build-failure notes; "
                           "run the suite with --trt-bundle-dir pointing there first")
    reader = reader or FactsReader()
    with collector_paused():
        return [_failure_side(f) if f.name.endswith(FAILED_SUFFIX) else _bundle_side(f, reader) for f in files]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while bundles are read (and, in the command, reviewed).

    Each bundle's parsed documents are tens of thousands of objects that live until the report is made; with the
    collector on, its passes over them cost more than reading them (measured: 2.5x the whole report of 40
    MobileNetV2 pairs).  JSON documents hold no reference cycles, so nothing is left for it to find here.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class Pairing:
    pairs: tuple[tuple[Side, Side], ...]
    only_old: tuple[Side, ...]
    only_new: tuple[Side, ...]


def pair_runs(old: list[Side], new: list[Side]) -> Pairing:
    """Pair by (config name, version); a bundle wins over a failure note of the same key."""

    def index(sides: list[Side]) -> dict[tuple[str, str], Side]:
        out: dict[tuple[str, str], Side] = {}
        for side in sides:
            if side.key not in out or out[side.key].bundle is None:
                out[side.key] = side
        return out

    a, b = index(old), index(new)
    pairs = tuple((a[k], b[k]) for k in sorted(set(a) & set(b)))
    return Pairing(pairs, tuple(a[k] for k in sorted(set(a) - set(b))), tuple(b[k] for k in sorted(set(b) - set(a))))
