"""BundleRecorder: the session's audit state behind the pytest hooks.

One per process (``config.stash``).  It captures the environment once,
writes one bundle per engine (keyed by config hash and engine sha256, so an
engine used by many tests is bundled once), folds golden verdicts into the
engine's bundle, and renders the per-test report text.

Golden results in a bundle are keyed by test id and merged with the ones
already in an existing bundle *of the same engine*: every verdict recorded
there is a statement about exactly these engine bytes, and merging keeps the
verdicts of other pytest-xdist workers, which write the same file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.artifact import ENGINE_FILE
from pytest_trt.audit.manifest import sha256_hex
from pytest_trt.calibration.building import QDQ_SHA256
from pytest_trt.common.filehash import sha256_file

if TYPE_CHECKING:
    from pytest_trt.audit.bundle import BundleInfo, BundleInputs
    from pytest_trt.audit.sidecar import BundleState
    from pytest_trt.buildlog.record import BuildRecord
    from pytest_trt.common.background import Future
    from pytest_trt.engines.engine import Engine


@dataclass(frozen=True)
class AuditSettings:
    bundle_dir: Path
    sign_key: Path | None = None
    include_engine: bool = True
    include_hostname: bool = False
    rootdir: Path | None = None
    #: write in-toto attestations and a CycloneDX ML-BOM beside each bundle (:mod:`pytest_trt.audit.attest`)
    attest: bool = False


@dataclass(frozen=True)
class EngineAudit:
    """What a test report shows about one engine it used."""

    label: str
    info: BundleInfo | None
    fusions: int | None
    precisions: dict[str, int] | None
    golden: str  # verdict text, "not checked" when the test did not check one
    error: str | None = None  # why no bundle was written


@dataclass
class BundleRecorder:
    settings: AuditSettings
    backend: str | None = None
    _environment: dict[str, Any] | None = None
    written: dict[str, BundleInfo] = field(default_factory=dict)  # engine key -> latest bundle
    golden: dict[str, dict[str, Any]] = field(default_factory=dict)  # engine key -> test id -> verdict
    failures: list[str] = field(default_factory=list)
    _names: dict[str, str] = field(default_factory=dict)  # bundle path -> config hash
    _bundled_tests: dict[str, set[str]] = field(default_factory=dict)  # engine key -> tests in golden.json
    _digests: dict[str, str] = field(default_factory=dict)  # environment and sign key digests, once per session
    #: bundles of engines built in this session, whose sidecar gets the inputs digest once the cache entry is
    #: complete (:meth:`settle`): bundle path -> (engine, calibration cache, Q/DQ model sha256)
    _unsettled: dict[str, tuple[Engine, bytes | None, object]] = field(default_factory=dict)
    #: bundle path -> (attestations written by this process, signed) for every bundle attested or found attested
    attested: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    _attest_key: str | None = None  # the signing key file's sha256 ("" without one), once per session
    _attesting: list[tuple[Path, Future[None]]] = field(default_factory=list)  # attestation writes on threads

    @property
    def environment(self) -> dict[str, Any]:
        if self._environment is None:
            from pytest_trt.audit.environment import MEMO_FILE, capture_environment

            self._environment = capture_environment(
                backend=self.backend,
                rootdir=self.settings.rootdir,
                include_hostname=self.settings.include_hostname,
                memo=self.settings.bundle_dir / MEMO_FILE,  # installed versions kept between sessions
            )
        return self._environment

    @staticmethod
    def key(engine: Engine) -> str:
        return f"{engine.result.config_hash}:{engine.result.engine_sha256}"

    def _record(self, engine: Engine) -> BuildRecord | None:
        try:
            return engine.record
        except Exception:  # noqa: BLE001 - a record the backend cannot parse must not lose the bundle
            return None

    def add_golden(self, engine: Engine, test_id: str, verdict: Mapping[str, Any]) -> None:
        self.golden.setdefault(self.key(engine), {})[test_id] = dict(verdict)

    def _existing_golden(self, path: Path, engine: Engine) -> dict[str, Any]:
        """Golden verdicts already bundled for these engine bytes; a file that fails verification is set aside.

        Never raises: whatever sits at the bundle's path (a damaged, hand-edited or hostile file, a
        decompression bomb) is verified with bounded memory, and if it fails it is moved to
        ``<name>.invalid`` and reported in the session summary, never merged and never silently lost.
        """
        if not path.is_file():
            return {}
        from pytest_trt.audit.sidecar import read_state

        state = read_state(path)  # the unchanged bundle's verdicts, without a gunzip of the engine
        if state is not None:
            return dict(state.golden or {}) if state.engine_sha256 == engine.result.engine_sha256 else {}
        from pytest_trt.audit.verify import verify_bundle
        from pytest_trt.errors import BundleIntegrityError

        try:
            old = verify_bundle(path)
        except (BundleIntegrityError, ValueError, OSError) as exc:
            message = exc.message if isinstance(exc, BundleIntegrityError) else f"{type(exc).__name__}: {exc}"
            aside = path.with_name(path.name + ".invalid")
            try:
                path.replace(aside)
                kept = f"moved to {aside.name}"
            except OSError as move_error:
                kept = f"left in place ({move_error.strerror or move_error})"
            self.failures.append(
                f"{path}: the file already there failed verification and was {kept}; this build's bundle "
                f"replaces it ({message}). Inspect it with: pytest-trt bundle verify {aside}"
            )
            return {}
        from pytest_trt.audit.bundle import GOLDEN

        if old.engine_sha256 != engine.result.engine_sha256 or GOLDEN not in old.members:
            return {}
        return old.golden or {}

    def bundle(self, engine: Engine) -> BundleInfo:
        """Write (or reuse) the bundle of ``engine``; rewrites it when new golden verdicts arrived."""
        from pytest_trt.audit.bundle import BUNDLE_DIR_MODE, BundleInputs, bundle_name, write_bundle  # not at load

        key = self.key(engine)
        path = self.settings.bundle_dir / bundle_name(engine.result)
        known = self.written.get(key)
        golden = self.golden.get(key, {})
        if known is not None and known.path == path and set(golden) <= self._bundled_tests.get(key, set()):
            return known
        from pytest_trt.common.fileio import locked

        if self._attesting:
            self.join_attestations(path)  # this bundle's attestations are on disk before it is looked at again
        previous = self._names.setdefault(str(path), engine.result.config_hash)
        if previous != engine.result.config_hash:
            self.failures.append(
                f"{path.name}: written for two configs ({previous[:12]}, {engine.result.config_hash[:12]}) "
                "with the same name, version, backend and device; give each config its own name or version"
            )
        calibration_cache = _calibration_cache(engine)
        qdq = (engine.result.extra or {}).get(QDQ_SHA256)
        info, state = self._unchanged(engine, path, golden, calibration_cache, qdq)  # no lock needed to read
        made: BundleInputs | None = None
        if info is None:
            path.parent.mkdir(parents=True, exist_ok=True, mode=BUNDLE_DIR_MODE)
            with locked(path.parent / f".{path.name}.lock", what=f"audit bundle {path}"):
                merged = {**self._existing_golden(path, engine), **golden}
                made = BundleInputs(engine.result, self._record(engine), self.environment,
                                    include_engine=self.settings.include_engine, golden_results=merged or None,
                                    calibration_cache=calibration_cache, qdq_model_sha256=str(qdq) if qdq else None,
                                    sign_key=self.settings.sign_key)
                # an identical bundle (sidecar: same inputs, else same manifest) is not rewritten
                info = write_bundle(made, self.settings.bundle_dir, reuse=True,
                                    inputs_sha256=self._inputs_sha256(engine, path, merged, calibration_cache, qdq))
                if self.settings.attest:
                    from pytest_trt.audit import sidecar

                    state = sidecar.read_state(path)
            if not engine.cached:
                self._unsettled[str(path)] = (engine, calibration_cache, qdq)
        if self.settings.attest:  # the statements are made from what the bundle was made of, or would be
            self._attest(engine, info, state, lambda: made or BundleInputs(
                engine.result, None, self.environment, include_engine=self.settings.include_engine,
                golden_results={**(state.golden or {}), **golden} or None if state is not None else golden or None,
                calibration_cache=calibration_cache, qdq_model_sha256=str(qdq) if qdq else None,
                sign_key=self.settings.sign_key))
        self.written[key] = info
        self._bundled_tests[key] = set(golden)
        return info

    def _unchanged(self, engine: Engine, path: Path, golden: dict[str, Any], calibration_cache: bytes | None,
                   qdq: object) -> tuple[BundleInfo | None, BundleState | None]:
        """The bundle on disk when its sidecar shows it made from exactly these inputs (the cache-hit path).

        Read without the bundle's lock: a bundle is replaced by rename before its sidecar, and a sidecar
        that does not describe the file on disk is ignored, so a racing writer only sends us to the locked path.
        """
        from pytest_trt.audit import sidecar
        from pytest_trt.audit.bundle import BundleInfo, backend_version

        state = sidecar.read_state(path)
        if state is None or state.inputs_sha256 is None or state.engine_sha256 != engine.result.engine_sha256:
            return None, None
        merged = {**(state.golden or {}), **golden}
        if self._inputs_sha256(engine, path, merged, calibration_cache, qdq) != state.inputs_sha256:
            return None, None
        result = engine.result
        return BundleInfo(path=path, sha256=state.sha256, size=state.size, config_hash=result.config_hash,
                          engine_sha256=result.engine_sha256, backend_version=backend_version(result)), state

    def _sign_key_sha256(self) -> str | None:
        if self._attest_key is None:
            key = self.settings.sign_key
            self._attest_key = sha256_file(key) if key is not None and key.is_file() else ""
        return self._attest_key or None

    def _attest(self, engine: Engine, info: BundleInfo, state: BundleState | None,
                inputs: Callable[[], BundleInputs]) -> None:
        """Attest the bundle ``info`` unless the attestations beside it were written for these bytes and this key
        from this cache entry (a cache hit whose bundle is unchanged: one stat); never raises.

        The statements are made and signed here; the files are written (fsynced) on a thread, as the cache
        entry is, under the bundle's lock: :meth:`join_attestations` waits for them.
        """
        from pytest_trt.audit.attest import attestation_path, prepare_attestations, store_attestations
        from pytest_trt.common.background import Future, on_thread
        from pytest_trt.errors import TrtError

        marker = {"bundle_sha256": info.sha256, "key": self._sign_key_sha256()}
        signed = self.settings.sign_key is not None
        if (engine.cached and state is not None and state.sha256 == info.sha256 and state.attested == marker
                and attestation_path(info.path).is_file()):
            self.attested.setdefault(str(info.path), (False, signed))
            return
        try:
            prepared = prepare_attestations(info, inputs())
        except ImportError as exc:  # the 'attest' extra is not installed: said once, in the summary
            self.failures.append(f"attestations not written: {exc}")
            return
        except (OSError, TrtError, ValueError) as exc:
            text = exc.message if isinstance(exc, TrtError) else f"{type(exc).__name__}: {exc}"
            self.failures.append(f"{info.path.name}: attestations not written ({text})")
            return
        done: Future[None] = Future()
        on_thread("pytest-trt-attest", (done, lambda: store_attestations(info, prepared, marker)))
        self._attesting.append((info.path, done))
        self.attested[str(info.path)] = (True, signed)

    def join_attestations(self, path: Path | None = None) -> None:
        """Wait for the attestation writes of bundle ``path`` (default: all); a failed one goes to the summary."""
        waiting = [(p, f) for p, f in self._attesting if path is None or p == path]
        self._attesting = [(p, f) for p, f in self._attesting if path is not None and p != path]
        for where, done in waiting:
            try:
                done.result()
            except (OSError, ValueError, RuntimeError) as exc:
                self.failures.append(f"{where.name}: attestations not written ({type(exc).__name__}: {exc})")

    def settle(self) -> int:
        """Give the bundles of this session's fresh builds their inputs digest; return how many got one.

        Call once every cache entry of the session is on disk (after ``EngineProvider.flush``).  A bundle
        written from a fresh build cannot name its cache entry while the entry is being written, so its
        sidecar has no inputs digest; without this, the next session's first cache hit would rebuild the
        bundle's content to compare manifests.  Only a sidecar that still describes the bundle this session
        wrote is completed; anything else is left to the next session's full check.
        """
        from pytest_trt.audit import sidecar

        self.join_attestations()
        done = 0
        for name, (engine, calibration_cache, qdq) in sorted(self._unsettled.items()):
            path = Path(name)
            written = next((i for i in self.written.values() if i.path == path), None)
            state = sidecar.read_state(path)
            if written is None or state is None or state.sha256 != written.sha256 or state.inputs_sha256 is not None:
                continue
            digest = self._inputs_sha256(engine, path, dict(state.golden or {}), calibration_cache, qdq,
                                         settled=True)
            if digest is None:
                continue
            try:
                sidecar.write_state(path, members_sha256=state.members_sha256, sha256=state.sha256, size=state.size,
                                    engine_sha256=state.engine_sha256, golden=state.golden, inputs_sha256=digest,
                                    attested=state.attested)
            except OSError:
                continue  # the sidecar is a cache of facts: without it the next session verifies the bundle
            done += 1
        self._unsettled.clear()
        return done

    def _inputs_sha256(self, engine: Engine, path: Path, golden: dict[str, Any], calibration_cache: bytes | None,
                       qdq: object, *, settled: bool = False) -> str | None:
        from pytest_trt.audit.bundle import canonical_json, inputs_digest

        identity = _result_identity(engine, settled=settled)
        if identity is None:
            return None
        if not self._digests:
            key = self.settings.sign_key
            self._digests["environment"] = sha256_hex(canonical_json(self.environment))
            self._digests["sign_key"] = sha256_file(key) if key is not None and key.is_file() else str(key or "")
        return inputs_digest(
            bundle=path.name, result_identity=identity, environment_sha256=self._digests["environment"],
            include_engine=self.settings.include_engine, golden=golden,
            calibration_cache_sha256=sha256_hex(calibration_cache) if calibration_cache is not None else None,
            qdq_model_sha256=str(qdq) if qdq else None, sign_key_sha256=self._digests["sign_key"] or None,
        )

    def audit(self, engine: Engine, verdicts: list[Mapping[str, Any]]) -> EngineAudit:
        """Bundle ``engine`` and describe it for one test's report; never raises for I/O problems."""
        from pytest_trt.errors import TrtError

        verdict = "; ".join(str(v.get("verdict", "?")) for v in verdicts) or "not checked"
        try:
            info: BundleInfo | None = self.bundle(engine)
            error = None
        except (OSError, TrtError, ValueError, ImportError) as exc:
            info, error = None, f"{type(exc).__name__}: {exc}"
            self.failures.append(f"{engine.label}: bundle not written ({error})")
        try:  # a cache hit's stored facts (or the record the bundle needed, once made)
            facts: dict[str, Any] | None = engine.record_facts()
        except Exception:  # noqa: BLE001 - a record the backend cannot parse must not lose the bundle
            facts = None
        fusions = facts["fusions"] if facts is not None else None
        precisions = facts["precisions"] if facts is not None else None
        return EngineAudit(engine.label, info, fusions, precisions, verdict, error)


def _calibration_cache(engine: Engine) -> bytes | None:
    written = (engine.result.extra or {}).get("calibration_cache")  # explicit quantization: the cache it made
    if isinstance(written, str):
        return written.encode("utf-8")
    calib = getattr(engine.config, "calibration", None)
    path = getattr(calib, "cache", None)
    if path and Path(path).is_file():
        return Path(path).read_bytes()
    return None


def _result_identity(engine: Engine, *, settled: bool = False) -> str | None:
    """The digest of the engine cache entry's file hashes, which name the cached result's exact content.

    None for a fresh build (its entry may still be being written) unless ``settled`` (the session's cache
    writes are finished): its bundle is compared by manifest.  A cached entry was checked against these
    hashes when it was loaded; a settled fresh one was written from the result in memory.
    """
    import json

    from pytest_trt.engines.cache import ENTRY_FILE

    if (not engine.cached and not settled) or engine.artifact_dir is None:
        return None
    try:
        files = engine.result.verified_digests if engine.cached else None  # checked on load: not read again
        if files is None:
            files = json.loads((engine.artifact_dir / ENTRY_FILE).read_text(encoding="utf-8"))["files"]
        if not isinstance(files, dict) or files.get(ENGINE_FILE) != engine.result.engine_sha256:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return sha256_hex(json.dumps(files, sort_keys=True).encode("utf-8"))


def section_text(audits: list[EngineAudit]) -> str:
    """The ``trt audit`` report section of one test."""
    from pytest_trt.buildlog.summary import format_precisions

    lines: list[str] = []
    for a in audits:
        lines.append(f"engine: {a.label}")
        if a.info is not None:
            lines.append(f"  bundle: {a.info.path}")
            lines.append(f"  sha256: {a.info.sha256}")
        else:
            lines.append(f"  bundle: not written ({a.error})")
        lines.append(f"  fusions: {a.fusions if a.fusions is not None else 'unknown (no build record)'}")
        lines.append(f"  precisions: {format_precisions(a.precisions) if a.precisions is not None else 'unknown'}")
        lines.append(f"  golden: {a.golden}")
    return "\n".join(lines) + "\n"


def summary_rows(recorder: BundleRecorder) -> list[dict[str, Any]]:
    """JSON-able rows for the terminal summary (sent from xdist workers to the controller)."""
    rows = []
    for i in recorder.written.values():
        row: dict[str, Any] = {"path": str(i.path), "sha256": i.sha256, "size": i.size, "config_hash": i.config_hash}
        attested = recorder.attested.get(str(i.path))
        if attested is not None:
            row["attested"] = {"written": attested[0], "signed": attested[1]}
        rows.append(row)
    return rows

