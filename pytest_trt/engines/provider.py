"""EngineProvider: the session's engines, from the cache or freshly built.

The pytest layer creates one provider per session (``TrtSession.provider``, on first use)
and asks it for engines; all decisions (cache hit, build allowed, corrupt
entry, failure log) live here so they can be used and tested without pytest.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_trt.backends.request import BuildRequest
from pytest_trt.common.background import Future, on_thread
from pytest_trt.common.filehash import set_stamp_folder
from pytest_trt.common.logtext import format_log
from pytest_trt.common.progress import listening
from pytest_trt.common.units import utc_now
from pytest_trt.engines.cache import EngineCache
from pytest_trt.errors import BuildFailed, CacheCorrupt, EngineNotBuilt

if TYPE_CHECKING:
    from pytest_trt.artifact import BuildResult
    from pytest_trt.backends.base import Backend
    from pytest_trt.config import BuildConfig
    from pytest_trt.engines.engine import Engine


#: cache entries still being written, by any provider: the interpreter waits for them at exit (a thread
#: started by on_thread is not joined by Python's shutdown, as a non-daemon threading.Thread would be)
_PENDING: set[Future[None]] = set()


@atexit.register
def _wait_for_cache_writers() -> None:
    for written in list(_PENDING):
        written.result()


# a forked child inherits the set, not the threads writing those entries: they are the parent's to finish
os.register_at_fork(after_in_child=_PENDING.clear)


@dataclass
class EngineEvent:
    engine: Engine
    status: str  # "built", "cached", "rebuilt-corrupt"


class EngineProvider:
    def __init__(
        self,
        backend_name: str,
        *,
        why: str = "",
        cache_dir: Path,
        build: bool = False,
        rebuild: bool = False,
        build_flag: str = "--trt-engine-build",
        on_progress: Callable[[str], None] | None = None,
        backend: Backend | None = None,
    ) -> None:
        self.backend_name = backend_name
        self.why = why
        self.cache = EngineCache(cache_dir)
        from pytest_trt.calibration.store import set_store_root

        set_store_root(Path(cache_dir) / "calibration")  # explicit INT8 calibrations, stored with the engines
        set_stamp_folder(Path(cache_dir) / "identity")  # ONNX digests by file identity, shared across sessions
        self.build_enabled = build
        self.rebuild = rebuild
        self.build_flag = build_flag
        self.on_progress = on_progress
        self._backend: Backend | None = backend
        self._by_key: dict[str, Engine] = {}
        self._requests: dict[int, BuildRequest] = {}
        self._validated: set[str] = set()
        self.events: list[EngineEvent] = []
        self._writers: list[Future[None]] = []
        self.write_errors: list[str] = []

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            from pytest_trt.backends.registry import create_backend

            self._backend = create_backend(self.backend_name)
        return self._backend

    @property
    def engines(self) -> list[Engine]:
        """Every engine built or loaded in this session, in order."""
        return [e.engine for e in self.events]

    def request_for(self, config: BuildConfig) -> BuildRequest:
        """The build request of ``config``: made (hashed, keyed) once per config object and ONNX content.

        The ONNX hash is memoised by file identity, so asking again costs a ``stat``; versions come
        from package metadata and the device from the host probe, so no backend library is imported.
        """
        onnx_sha256 = config.onnx_sha256
        known = self._requests.get(id(config))
        if known is not None and known.config is config and known.onnx_sha256 == onnx_sha256:
            return known
        request = BuildRequest.create(self.backend, config, onnx_sha256=onnx_sha256, validate=False)
        self._requests[id(config)] = request
        return request

    def key_for(self, config: BuildConfig) -> str:
        """The engine cache key of ``config``."""
        return self.request_for(config).key

    def get(self, config: BuildConfig) -> Engine:
        """The engine for ``config``: from this session, the cache, or a build.

        One path: the request, the cache lookup, on a miss :meth:`_build_missing`; then one Engine for
        whichever result came.
        """
        from pytest_trt.engines.engine import Engine

        request = self.request_for(config)
        key = request.key
        if key in self._by_key:
            return self._by_key[key]
        self.cache.check_folder()
        result = None if self.rebuild else self._cached(key, config.name)
        status = "cached"
        if result is None:
            result, status = self._build_missing(request)
        engine = Engine(config, result, self.backend, artifact_dir=self.cache.entry_dir(key),
                        cached=status == "cached")
        self._by_key[key] = engine
        self.events.append(EngineEvent(engine, status))
        if status != "cached":
            total_s, calibration_s = result.seconds
            calibrated = f" (calibration {calibration_s:.2f} s)" if calibration_s else ""
            self._progress(f"built engine {config.name!r} in {total_s:.2f} s{calibrated}")
        return engine

    def _cached(self, key: str, name: str) -> BuildResult | None:
        """The cache entry of ``key``, or None (a corrupt one is rebuilt, when building is on)."""
        # no lock to read: entries appear by rename, so a read-only (shared CI) cache serves hits
        try:
            return self.cache.load(key)
        except CacheCorrupt as exc:
            if not self.build_enabled:
                raise EngineNotBuilt(
                    f"{exc.message.removesuffix('; it will be rebuilt')}; run pytest with {self.build_flag} "
                    "to rebuild it",
                    config_name=name,
                ) from None
            return None

    def _build_missing(self, request: BuildRequest) -> tuple[BuildResult, str]:
        """A cache miss: validate (once per key), take the key's lock, look again, else build; the result and status.

        The key's lock is released by the entry's writer thread once the entry is whole.
        """
        backend = self.backend
        key = request.key
        name = request.config.name
        if key not in self._validated:  # an unsupported option is reported before "not built"
            backend.validate(request.config)
            self._validated.add(key)
        if not self.build_enabled:
            raise EngineNotBuilt(
                f"engine {name!r} ({backend.name}) is not in the cache {self.cache.root}; "
                f"run pytest with {self.build_flag} to build it",
                config_name=name,
            )
        # another worker may have built it while we waited for the lock
        lock, result, corrupt = self.cache.reserve(key, reread=not self.rebuild)
        if corrupt is not None:
            self._progress(corrupt)
        if result is not None:
            lock.release()
            return result, "cached"
        handed_off = False
        try:
            self._progress(f"building engine {name!r} with {backend.name} {backend.version()} ...")
            try:
                started = utc_now()
                with listening(self.on_progress):  # a calibration inside the build says when it starts and ends
                    built = backend.build(request)
                built.set_clock(started, utc_now())  # for the attestations: never in the bundle's bytes
            except BuildFailed as exc:
                log = exc.context.get("log")
                if log:
                    exc.log_path = self.cache.save_failure(name, key, format_log(log))
                raise
            # The test goes on with the engine in memory while a thread writes the cache entry;
            # the key's lock is held until the entry is complete, so other workers wait for it.
            # The thread starts without waiting for it to run (Thread.start waits: up to 4 ms on a busy
            # machine); flush() waits for the entry, and so does the interpreter's exit.
            written: Future[None] = Future()
            _PENDING.add(written)
            on_thread("cache-writer", (written, lambda: self.cache.write_entry(key, built, lock, self.write_errors)))
            handed_off = True
            self._writers.append(written)
        finally:
            if not handed_off:
                lock.release()
        return built, "rebuilt-corrupt" if corrupt is not None else "built"

    def flush(self) -> list[str]:
        """Wait until every cache entry of this session is on disk; return the write errors."""
        while self._writers:
            written = self._writers.pop()
            _PENDING.discard(written)
            try:
                written.result()
            except RuntimeError as exc:  # a forked child: the parent process writes the entry
                self.write_errors.append(f"engine cache entry not written by this process: {exc}")
        self._store_records()
        return list(self.write_errors)

    def _store_records(self) -> None:
        """Keep the records parsed for this session's builds with their (now complete) entries."""
        built = [e.engine for e in self.events if not e.engine.cached and e.engine.record_parsed]
        if not built:
            return
        from pytest_trt.engines.record_store import save_record

        for engine in built:
            if engine.artifact_dir is not None:
                save_record(engine.artifact_dir, engine.result, engine.record)

    def _progress(self, text: str) -> None:
        if self.on_progress is not None:
            self.on_progress(text)
