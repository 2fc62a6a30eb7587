"""What a build produces: :class:`LogEntry` and :class:`BuildResult`, and their artifact folder.

Artifact folder layout (also the engine-cache entry and the core of a bundle)::

    engine.plan    serialized engine (or the optimized ONNX for onnxruntime)
    build.log      one line per message, ``[SEVERITY] text``, UTF-8, nothing dropped;
                   a multi-line message continues on unprefixed lines, as trtexec prints it
    config.json    the pinned config and the effective config read back from the builder
    build.json     versions, device, durations, hashes, per-message times

A cache entry read once also gets ``engine.plan.verified`` and ``build.log.verified``, each file's verified sha256
by its file identity (:class:`pytest_trt.common.filehash.StampedRead`: a cache of a verification, not evidence).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.common.backend_version import backend_version_of
from pytest_trt.common.build_inputs import Calibrated, Requested
from pytest_trt.common.filehash import BUILD_HASH_START_WAIT_S, HASH_THREAD_BYTES, EngineDigest, StampedRead
from pytest_trt.common.fileio import write_plain
from pytest_trt.common.logtext import (
    LOG_FILE,
    SEVERITIES,
    LogEntry,
    PreparedLog,
    encode_build_json,
    format_log,
    index_of,
    index_rows,
    iter_log_lines,
    split_log,
    without_log_index,
)

#: LogEntry and the build.log helpers live in :mod:`pytest_trt.common.logtext` and are part of this module's face
__all__ = ["ARTIFACT_SCHEMA", "BUILD_FILE", "CONFIG_FILE", "ENGINE_FILE", "LOG_FILE", "SEVERITIES", "BuildMembers",
           "BuildResult", "EngineDigest", "LogEntry", "Requested", "format_log",
           "iter_log_lines", "split_log"]

ARTIFACT_SCHEMA = 1
ENGINE_FILE = "engine.plan"
CONFIG_FILE = "config.json"
BUILD_FILE = "build.json"
#: the engine's verified sha256 by its file identity (written beside a cache entry's engine after a verified read)
ENGINE_STAMP_FILE = "engine.plan.verified"
#: the same for build.log: a hit reads the log only when it is used
LOG_STAMP_FILE = "build.log.verified"


@dataclass(frozen=True)
class BuildMembers:
    """What an audit bundle takes from a :class:`BuildResult`, handed over in one call (:meth:`BuildResult.members`)."""

    engine: bytes | memoryview  # a fresh build's: the builder's own buffer (BuildResult.engine_buffer)
    engine_sha256: str
    build_json: bytes  # the cache entry's build.json bytes (BuildResult.build_json_bytes)
    log: bytes  # build.log's bytes
    pinned: dict[str, Any]
    effective: dict[str, Any]
    config_hash: str
    onnx_sha256: str


@dataclass(frozen=True)
class BuildResult:
    """A finished build: engine bytes plus all the evidence of how it was made."""

    backend: str  # "tensorrt", "tensorrt-rtx" or "onnxruntime"
    engine: bytes
    log: tuple[LogEntry, ...]
    config: dict[str, Any]  # the pinned BuildConfig.to_json()
    effective_config: dict[str, Any]  # read back from the builder
    config_hash: str
    onnx_sha256: str
    durations: dict[str, float]  # "parse", "build" (seconds)
    versions: dict[str, str]  # backend, onnx_parser, onnx, python, ...
    device: dict[str, Any]  # {"kind": "gpu"|"cpu-aot"|"cpu", "name": ..., "compute_capability": ..., "targets": [...]}
    extra: dict[str, Any] = field(default_factory=dict)
    #: the backend library's version ("10.13.0.35", "1.7.1.116", "1.23.2"); every backend fills it,
    #: and goldens, bundles and reports read it here, never from ``versions``
    backend_version: str = ""

    @classmethod
    def built_for(
        cls,
        request: Requested,
        *,
        engine: bytes | memoryview,
        effective: dict[str, Any],
        durations: dict[str, float],
        log: tuple[LogEntry, ...] = (),
        versions: Mapping[str, str] | None = None,
        extra: dict[str, Any] | None = None,
        calibrated: Calibrated | None = None,
    ) -> BuildResult:
        """The result of building ``request``: the pin (config JSON, hash, ONNX digest), versions and device as the
        request computed them, so every backend records them the same way; ``versions`` adds what only the build
        knows (TensorRT's ONNX parser). ``calibrated``: the explicit calibration whose Q/DQ model was built, its
        facts laid over the build's. ``engine`` is kept as given (for TensorRT the builder's own buffer, copied into
        bytes when :attr:`engine` is first used); its sha256 starts on a thread."""
        digest = EngineDigest(engine, wait_start=BUILD_HASH_START_WAIT_S)
        known = dict(request.versions if versions is None else versions)
        effective, extra, durations = dict(effective), dict(extra or {}), dict(durations)
        if calibrated is not None:
            effective.update(calibrated.effective)
            extra.update(calibrated.extra)
            durations["calibration"] = calibrated.seconds
        result = cls(
            backend=request.backend, engine=engine if isinstance(engine, bytes) else b"", log=log,
            config=request.config_json, effective_config=effective, config_hash=request.config_hash,
            onnx_sha256=request.onnx_sha256, durations=durations, versions=known, device=dict(request.device),
            extra=extra, backend_version=request.versions["backend"],
        )
        if not isinstance(engine, bytes):  # the builder's buffer, written and hashed as it is: copied when first used
            del result.__dict__["engine"]
            result.__dict__["_engine_view"] = engine
        result._adopt_engine_digest(digest)
        return result

    @property
    def seconds(self) -> tuple[float, float]:
        """Seconds to make the engine, the calibration included, and the calibration's part (0.0 when none ran: not
        calibrated, or taken from the store), both to the millisecond: the progress line and the table show the same."""
        calibration = float(self.durations.get("calibration", 0.0))
        return round(float(self.durations.get("build", 0.0)) + calibration, 3), round(calibration, 3)

    @functools.cached_property
    def engine_sha256(self) -> str:
        pending = self.__dict__.pop("_engine_digest", None)  # resolved once, then the value is kept
        return pending.hexdigest() if pending is not None else hashlib.sha256(self.engine_buffer()).hexdigest()

    def engine_buffer(self) -> bytes | memoryview:
        """The engine without a copy: the builder's own buffer until :attr:`engine` is first used, then those bytes."""
        view = self.__dict__.get("_engine_view")
        return self.engine if view is None else view

    def start_engine_digest(self) -> None:
        """Hash the engine on a thread from now on, unless its digest is known or running (:meth:`built_for`)."""
        if "engine_sha256" not in self.__dict__ and "_engine_digest" not in self.__dict__:
            self._adopt_engine_digest(EngineDigest(self.engine_buffer()))

    def _adopt_engine_digest(self, digest: EngineDigest) -> None:
        """Keep ``digest``, started on these engine bytes, as the one :attr:`engine_sha256` waits for."""
        self.__dict__["_engine_digest"] = digest

    def with_log(self, prepared: PreparedLog) -> BuildResult:
        """This result (just built, not yet shared) with the build's log, as converted beside the build: its entries,
        build.log's text and build.json's log index are taken from ``prepared`` when first used."""
        del self.__dict__["log"]
        self.__dict__["_pending_log"] = prepared
        return self

    def pending_engine_digest(self) -> EngineDigest | None:
        """The digest :meth:`start_engine_digest` (or :meth:`built_for`) started and nobody has waited for yet."""
        digest: EngineDigest | None = self.__dict__.get("_engine_digest")
        return digest

    if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any attribute name

        def __getattr__(self, name: str) -> Any:
            # Reached only for ``engine`` or ``log`` missing from the instance, kept as they came until first used.
            # ``engine``: a build's own buffer, copied once; or a stamped cache file, read and checked against its
            # stamp. ``log``: a build's captured messages, converted once; or a verified entry's build.log text.
            d = self.__dict__
            if name == "engine" and "_engine_view" in d:
                data = d["engine"] = bytes(d["_engine_view"])
                d.pop("_engine_view", None)
                return data
            if name == "engine" and "_lazy_engine" in d:
                data = d["engine"] = d["_lazy_engine"].checked_data("engine")
                return data
            if name == "log" and "_pending_log" in d:
                log = d["log"] = tuple(d["_pending_log"]())
                return log
            if name != "log" or "_lazy_log" not in d:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            log = d["log"] = split_log(d["_lazy_log"][0], self._lazy_log_text(), index_rows(d["_lazy_log"][2]))
            return log

    def _lazy_log_text(self) -> str:
        """A verified entry's build.log text: read now, and checked against its stamp, when the hit had a stamp."""
        folder, kept, index = self.__dict__["_lazy_log"]
        if isinstance(kept, str):
            return kept
        text: str = kept.checked_data("build log").decode("utf-8")
        self.__dict__["_lazy_log"] = (folder, text, index)
        return text

    def release_engine(self) -> None:
        """Let go of the engine's bytes when they come from a stamped cache file, read again (and checked) on use."""
        lazy = self.__dict__.get("_lazy_engine")
        if lazy is not None:
            self.__dict__.pop("engine", None)
            lazy.release()

    def log_text(self) -> str:
        if "_lazy_log" in self.__dict__:
            return self._lazy_log_text()
        prepared = self.__dict__.get("_pending_log")
        return format_log(self.log) if prepared is None else prepared.text()

    def log_bytes(self) -> bytes:
        """``build.log``'s bytes (UTF-8), made once: the cache entry and the bundle both write them."""
        data = self.__dict__.get("_log_bytes")
        if data is None:
            data = self.__dict__["_log_bytes"] = self.log_text().encode("utf-8")
        return data

    def _log_index(self) -> list[list[Any]]:
        """build.json's ``log_index``, made once (the cache entry and the bundle both write it); a new list."""
        index = self.__dict__.get("_logindex_rows")
        if index is None:
            lazy = self.__dict__.get("_lazy_log")
            if lazy is not None and "log" not in self.__dict__:
                index = tuple((s, float(t), int(n)) for s, t, n in index_rows(lazy[2]))
            else:
                index = tuple(index_of(self.log))
            self.__dict__["_logindex_rows"] = index
        return [list(row) for row in index]

    def build_json(self) -> dict[str, Any]:
        return self._build_json_with(self.engine_sha256)

    def _build_json_with(self, engine_sha256: str, *, log_index: bool = True) -> dict[str, Any]:
        # log_index: per message, its severity, seconds since the start and number of lines in build.log
        return {"schema": ARTIFACT_SCHEMA, "backend": self.backend, "backend_version": self.backend_version,
                "config_hash": self.config_hash, "onnx_sha256": self.onnx_sha256, "engine_sha256": engine_sha256,
                "engine_bytes": len(self.engine_buffer()), "durations": self.durations, "versions": self.versions,
                "device": self.device, "extra": self.extra, "log_index": self._log_index() if log_index else None}

    def _encode_build_json(self, engine_sha256: str) -> bytes:
        """build.json's bytes naming ``engine_sha256``; the log index as the build's log encoded it beside the build."""
        prepared = self.__dict__.get("_pending_log")
        build = self._build_json_with(engine_sha256, log_index=prepared is None)
        return encode_build_json(build, log_index_json=None if prepared is None else prepared.index_json())

    def build_json_bytes(self) -> bytes:
        """build.json's bytes (sorted keys, compact, ASCII), made once: the cache entry writes them, the bundle's
        build.json embeds them: encoding the log index twice is ~2 ms per bundle."""
        data = self.__dict__.get("_build_json_bytes")
        if data is None:
            data = self.__dict__["_build_json_bytes"] = self._encode_build_json(self.engine_sha256)
        return data

    def _build_json_bytes_beside_digest(self) -> bytes:
        """:meth:`build_json_bytes`, encoded while the engine's sha256 is still being computed: a 64-character
        stand-in holds its place and is replaced by the digest once it is known (a hex digest needs no JSON
        escaping, so the bytes are the same), leaving only that replacement for after the hash."""
        if "_build_json_bytes" in self.__dict__ or "_engine_digest" not in self.__dict__:
            return self.build_json_bytes()
        stand_in = os.urandom(32).hex().encode()
        data = self._encode_build_json(stand_in.decode())
        if data.count(stand_in) != 1:  # never seen; then the digest is waited for first
            return self.build_json_bytes()
        data = self.__dict__["_build_json_bytes"] = data.replace(stand_in, self.engine_sha256.encode())
        return data

    def members(self) -> BuildMembers:
        """The engine, its hash, build.json's and build.log's bytes and the configs, for a bundle's members."""
        return BuildMembers(self.engine_buffer(), self.engine_sha256, self.build_json_bytes(), self.log_bytes(),
                            self.config, self.effective_config, self.config_hash, self.onnx_sha256)

    def write(self, folder: Path) -> dict[str, str]:
        """Write the artifact folder; return each file's sha256 (hashed from memory, not re-read). The caller makes it
        atomic (temp folder, then rename)."""
        self.start_engine_digest()  # on a thread (since built_for), while the other files are written: build.json waits
        folder.mkdir(parents=True, exist_ok=True)
        # a large engine is written on a thread while the other files are encoded; the folder is whole once it returned
        engine = self.engine_buffer()
        large = len(engine) >= HASH_THREAD_BYTES
        engine_written = write_plain(folder / ENGINE_FILE, engine, thread="engine-write" if large else None)
        try:
            hashes = self._write_evidence(folder)
        finally:
            engine_written.wait()
        engine_written.result()  # raises the engine write's error
        hashes[ENGINE_FILE] = self.engine_sha256
        return dict(sorted(hashes.items()))

    def _write_evidence(self, folder: Path) -> dict[str, str]:
        """Write build.log, config.json and build.json into ``folder``; return their sha256 (hashed from memory)."""
        conf = {"pinned": self.config, "effective": self.effective_config}
        hashes = {}
        for name, make in (
            (LOG_FILE, self.log_bytes),
            (CONFIG_FILE, lambda: (json.dumps(conf, indent=2, sort_keys=True) + "\n").encode("utf-8")),
            # last, to give the engine's sha256 the most time; compact: the per-message log index makes it large
            (BUILD_FILE, self._build_json_bytes_beside_digest),
        ):
            data = make()
            (folder / name).write_bytes(data)
            hashes[name] = hashlib.sha256(data).hexdigest()
        return hashes

    @classmethod
    def read(cls, folder: Path, *, digests: Mapping[str, str] | None = None) -> BuildResult:
        """Load an artifact folder written by :meth:`write` (raises ValueError on any missing or bad file).
        ``digests``: the sha256 each file must have (what :meth:`write` returned, kept in a cache entry's
        ``entry.json``).  Every file is read once and checked from memory; the engine is hashed on a thread while
        the other files are read."""
        engine = StampedRead(folder / ENGINE_FILE, stamp=folder / ENGINE_STAMP_FILE)
        checked = digests is not None and LOG_FILE in digests and BUILD_FILE in digests  # the log can wait for use
        log = StampedRead(folder / LOG_FILE, stamp=folder / LOG_STAMP_FILE, thread="log-sha256") if checked else None
        result, recorded = cls._read_rest(folder, engine.data() if engine.loaded else b"", digests or {}, log)
        if not engine.loaded:  # stamped: read when first used (a cache hit whose engine nothing runs never reads it)
            del result.__dict__["engine"]
            result.__dict__["_lazy_engine"] = engine
        engine_sha256 = engine.hexdigest()
        if digests is not None and ENGINE_FILE in digests and engine_sha256 != digests[ENGINE_FILE]:
            raise ValueError(f"{ENGINE_FILE} does not match its sha256")
        if engine_sha256 != recorded:
            raise ValueError(f"{folder / ENGINE_FILE}: sha256 does not match build.json")
        result.__dict__["engine_sha256"] = engine_sha256  # hashed once: the cached_property's value
        if digests is not None:
            result.__dict__["_verified_digests"] = dict(digests)
        engine.stamp()  # verified: the next session reads this digest
        if log is not None:
            log.stamp()
        return result

    def set_clock(self, started: str, finished: str) -> None:
        """Record when the build started and finished (UTC, RFC 3339): kept beside the result, never in
        :meth:`build_json`, so the cache entry's files and every bundle byte stay a function of the build."""
        self.__dict__["_clock"] = {"started": started, "finished": finished}

    def clock(self) -> dict[str, str] | None:
        """``{"started", "finished"}`` of the build (see :meth:`set_clock`); None where it was not recorded."""
        clock = self.__dict__.get("_clock")
        return None if clock is None else dict(clock)

    @property
    def verified_digests(self) -> dict[str, str] | None:
        """The sha256 of each file this result was read and checked against (a cache entry's ``entry.json``
        ``files``); None for a result that was built, or read without digests."""
        digests = self.__dict__.get("_verified_digests")
        return None if digests is None else dict(digests)

    @classmethod
    def _read_rest(cls, folder: Path, engine: bytes, digests: Mapping[str, str],
                   log_file: StampedRead | None) -> tuple[BuildResult, str]:
        """The result from the folder's other files, and the engine sha256 build.json records. ``log_file``: build.log
        of an entry whose digests are known, kept unread while its stamp holds."""
        names = (BUILD_FILE, CONFIG_FILE) if log_file is not None else (BUILD_FILE, CONFIG_FILE, LOG_FILE)
        raw = {name: (folder / name).read_bytes() for name in names}
        for name, want in digests.items():
            if name == ENGINE_FILE:
                continue
            if name == LOG_FILE and log_file is not None:
                digest = log_file.hexdigest()
            else:
                digest = hashlib.sha256(raw[name] if name in raw else (folder / name).read_bytes()).hexdigest()
            if digest != want:
                raise ValueError(f"{name} does not match its sha256")
        # build.log verified against the digest write() recorded: it and build.json's index are what a
        # build wrote, so splitting it into entries waits for the first use of ``log`` (a cache hit never
        # needs them; a second read of the file would be needed to check it again anyway)
        build_text = raw[BUILD_FILE].decode("utf-8")
        split = without_log_index(build_text) if log_file is not None else None
        build = json.loads(build_text) if split is None else split[0]
        conf = json.loads(raw[CONFIG_FILE].decode("utf-8"))
        index: list[list[Any]] | str = build["log_index"] if split is None else split[1]
        lazy_log: tuple[Path, str | StampedRead, list[list[Any]] | str] | None = None
        if log_file is None:  # no digests to check the log against later: split now
            log = split_log(folder, raw[LOG_FILE].decode("utf-8"), index_rows(index))
        else:  # as text when it had no stamp (read to be hashed), else read when the log is first used
            log = ()
            lazy_log = (folder, log_file.data().decode("utf-8") if log_file.loaded else log_file, index)
        result = cls(
            backend=build["backend"],
            engine=engine,
            log=log,
            config=conf["pinned"],
            effective_config=conf["effective"],
            config_hash=build["config_hash"],
            onnx_sha256=build["onnx_sha256"],
            durations=build["durations"],
            versions=build["versions"],
            device=build["device"],
            extra=build.get("extra", {}),
            backend_version=backend_version_of(build),  # also an entry written before the field existed
        )
        if lazy_log is not None:
            del result.__dict__["log"]
            result.__dict__["_lazy_log"] = lazy_log
        return result, str(build["engine_sha256"])

