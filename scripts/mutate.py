"""Hand-written mutation testing of the critical modules: is each mutant killed by the tests that guard it?

Run by hand (minutes; not part of the suite)::

    python scripts/mutate.py              # every mutant
    python scripts/mutate.py --only verify-log-hash tarscan-size-cap
    python scripts/mutate.py --list

Each mutant is one string replacement in one module, a plausible real bug.  The script applies it, runs the
tests named for it (``pytest -x``), restores the file (always, also on Ctrl-C) and prints KILLED when a test
failed, SURVIVED when all passed, STALE when the original text is no longer in the module (update the list).
Exit status: 1 when a mutant survived or went stale.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    id: str
    module: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str  # the real bug it stands for


_VERIFY = ("tests/audit/test_verify.py", "tests/audit/test_tamper.py", "tests/audit/test_hostile_bundles.py")
_INTEGRITY = ("tests/golden/test_golden_integrity.py",)
_CLI = ("tests/audit/test_cli_bad_inputs.py", "tests/test_cli.py")
_ASSERTIONS = ("tests/buildlog/test_buildlog_assertions.py", "tests/buildlog/test_assertion_edges.py")
_CACHE = ("tests/foundation/test_cache.py", "tests/foundation/test_cache_integrity.py")
_CALIB_DATA = "pytest_trt/common/calibration_data.py"
_CALIB_DATA_T = ("tests/calibration/test_calibration_data_validation.py",)
_IMPLICIT = ("tests/calibration/test_implicit.py",)
_ENTROPY = ("tests/calibration/test_entropy_family.py", "tests/calibration/test_calibration_assertions.py")
_LIMITS = ("tests/backends/test_onnx_limits.py",)
_LOGDIFF = ("tests/buildlog/test_fusion_count_and_tactics.py", "tests/upgrade/test_log_diff.py")
_TIMING = ("tests/properties/test_timing.py",)

MUTANTS = (
    # -- audit/verify.py, audit/tarscan.py, audit/schema.py: reading bundles --------------------------------------
    Mutant("verify-log-hash", "pytest_trt/audit/verify.py",
           "        if hashes[name] != digest:",
           '        if hashes[name] != digest and name != "build.log.gz":',
           _VERIFY, "a replaced, well-formed build log is accepted"),
    Mutant("verify-any-hash", "pytest_trt/audit/verify.py",
           "        if hashes[name] != digest:", "        if False:",
           _VERIFY, "no member hash is checked"),
    Mutant("verify-unlisted-member", "pytest_trt/audit/verify.py",
           "        if name not in listed and name not in (MANIFEST, SIGNATURE):",
           "        if False:", _VERIFY, "a member missing from the manifest is accepted"),
    Mutant("verify-no-canonical", "pytest_trt/audit/verify.py",
           "    _check_canonical(path, found)\n", "", _VERIFY,
           "gzip/tar framing changes pass (99.6 % tamper detection, the probe's finding)"),
    Mutant("verify-schema-after-signature", "pytest_trt/audit/verify.py",
           "    signer = _check_signature(path, members, public_key)  # before any member's JSON is parsed\n"
           "    _check_canonical(path, found)\n    docs = _check_schema(path, members, hashes)\n",
           "    _check_canonical(path, found)\n    docs = _check_schema(path, members, hashes)\n"
           "    signer = _check_signature(path, members, public_key)\n",
           _VERIFY, "JSON of an edited signed bundle is parsed before its signature is checked"),
    Mutant("verify-no-signature-check", "pytest_trt/audit/verify.py",
           "        return verify_manifest_signature(members[MANIFEST], members[SIGNATURE], public_key)",
           "        return 'unchecked'", _VERIFY, "--public-key accepts any signature"),
    Mutant("verify-engine-sha", "pytest_trt/audit/verify.py",
           '    if meta["engine_sha256"] != engine_sha:', "    if False:", _VERIFY,
           "build.json may name another engine than the one bundled"),
    Mutant("verify-log-cap", "pytest_trt/audit/verify.py",
           "        if total > cap:", "        if False:", _VERIFY,
           "an inflating build.log.gz is decompressed without bound"),
    Mutant("tarscan-size-cap", "pytest_trt/audit/tarscan.py",
           "    if size > cap:", "    if False:", _VERIFY,
           "a 2 GiB member is read into memory (decompression bomb)"),
    Mutant("tarscan-unknown-name", "pytest_trt/audit/tarscan.py",
           "    if cap < 0:", "    if False:", _VERIFY,
           "an unknown member name is read and kept"),
    Mutant("tarscan-links", "pytest_trt/audit/tarscan.py",
           '    if kind not in (b"0", b"\\0"):', '    if kind not in (b"0", b"\\0", b"2"):', _VERIFY,
           "a symlink member is accepted"),
    Mutant("tarscan-duplicates", "pytest_trt/audit/tarscan.py",
           "    if name in seen:", "    if False:", _VERIFY,
           "a duplicate member (the second wins in tar extract) is accepted"),
    Mutant("tarscan-trailing", "pytest_trt/audit/tarscan.py",
           "    if trailing.strip(b\"\\0\"):", "    if False:", _VERIFY,
           "data appended after the archive is accepted"),
    Mutant("archive-nested-names", "pytest_trt/audit/archive.py",
           "    if len(parts) > 1:", "    if False:", _VERIFY, "nested member paths are accepted"),
    Mutant("schema-record-unchecked", "pytest_trt/audit/schema.py",
           "        check_record(doc[\"record\"])", "        pass", _VERIFY + _CLI,
           "a wrong-typed build record reaches show/diff (traceback)"),
    # -- audit/bundle.py, fileio.py, recorder.py: writing bundles ---------------------------------------------------
    Mutant("bundle-in-place", "pytest_trt/audit/bundle.py",
           "        write_atomic(path, writer, mode=BUNDLE_FILE_MODE)\n",
           "        path.parent.mkdir(parents=True, exist_ok=True)\n        with open(path, 'wb') as fh:\n"
           "            writer(fh)\n",
           ("tests/audit/test_tamper.py", "tests/audit/test_bundle.py"),
           "a writer dying mid-write destroys the previous bundle"),
    Mutant("bundle-manifest-skips-log", "pytest_trt/audit/bundle.py",
           "                                for name, data in members.items()})",
           "                                for name, data in members.items() if name != LOG})",
           ("tests/audit/test_bundle.py", "tests/audit/test_verify.py"), "the log is not covered by the manifest"),
    Mutant("bundle-golden-dropped", "pytest_trt/audit/bundle.py",
           "    if golden_results:\n", "    if False:\n",
           ("tests/audit/test_bundle.py", "tests/audit/test_verify.py"), "golden verdicts are not bundled"),
    Mutant("fileio-no-replace", "pytest_trt/common/fileio.py",
           "        os.replace(tmp, path)\n    except BaseException:", "        pass\n    except BaseException:",
           ("tests/audit/test_bundle.py", "tests/audit/test_tamper.py"), "atomic writes never reach their path"),
    Mutant("recorder-merges-bad-file", "pytest_trt/audit/recorder.py",
           "            aside = path.with_name(path.name + \".invalid\")",
           "            return {}\n            aside = path.with_name(path.name + \".invalid\")",
           ("tests/audit/test_hostile_bundles.py::test_a_bad_file_at_the_bundle_path_is_set_aside_and_reported",),
           "a bad file at a bundle path is overwritten silently (evidence lost, nothing reported)"),
    # -- buildlog/assertions.py, buildlog/matching.py ---------------------------------------------------------------
    Mutant("assert-fused-any-group", "pytest_trt/buildlog/assertions.py",
           "            and all(set(g) & set(layer.origins) for g in groups)]",
           "            and any(set(g) & set(layer.origins) for g in groups)]",
           _ASSERTIONS, "a layer holding one of the nodes counts as the fusion"),
    Mutant("assert-fused-helpers-count", "pytest_trt/buildlog/assertions.py",
           '    return [layer for layer in record.layers if layer.kind == "compute"\n',
           "    return [layer for layer in record.layers if True\n",
           _ASSERTIONS, "reformat/helper layers count as fusions"),
    Mutant("assert-glob-as-exact", "pytest_trt/buildlog/matching.py",
           '    if any(c in pattern for c in "*?["):', "    if False:",
           _ASSERTIONS, "glob node patterns never match"),
    Mutant("assert-regex-search", "pytest_trt/buildlog/matching.py",
           "        return \"regex\", tuple(n for n in known if rx.fullmatch(n))",
           "        return \"regex\", tuple(n for n in known if rx.search(n))",
           _ASSERTIONS, "'re:conv1' also matches 'conv10' (partial match)"),
    Mutant("assert-precision-any", "pytest_trt/buildlog/assertions.py",
           "    if layers and not wrong:", "    if layers:",
           _ASSERTIONS, "assert_precision passes with a layer in another dtype"),
    # -- monitor/: the gray-release alert ---------------------------------------------------------------------------
    Mutant("monitor-no-hysteresis", "pytest_trt/monitor/runtime.py",
           "            if worst < self.policy.clear_sd:", "            if worst <= self.policy.alert_sd:",
           ("tests/monitor/test_monitor_runtime.py", "tests/monitor/test_monitor_spec_cli.py"),
           "a raised alert clears on the first window under the alert threshold: it flaps"),
    Mutant("monitor-no-confirm", "pytest_trt/monitor/runtime.py",
           "        if self.breaches >= self.policy.confirm:", "        if self.breaches >= 1:",
           ("tests/monitor/test_monitor_runtime.py", "tests/monitor/test_monitor_spec_cli.py"),
           "one noisy window raises the alert (the false-positive rate of a single 2 SD test)"),
    Mutant("monitor-one-sided", "pytest_trt/monitor/runtime.py",
           "        worst = float(np.max(np.abs(drift)))", "        worst = float(np.max(drift))",
           ("tests/monitor/test_monitor_runtime.py", "tests/monitor/test_monitor_spec_cli.py"),
           "a fall in confidence or margin (the incident's direction) never breaches"),
    Mutant("monitor-unit-unscaled", "pytest_trt/monitor/spec.py",
           "        return max(self.sd * math.sqrt(1.0 + golden_samples / window), self.floor)",
           "        return max(self.sd, self.floor)",
           ("tests/monitor/test_monitor_runtime.py", "tests/monitor/test_monitor_spec_cli.py"),
           "drift in the golden mean's SD, not the window's: a window's own noise reads as drift"),
    Mutant("monitor-spec-hash-unchecked", "pytest_trt/monitor/spec.py",
           "    if stored != actual:", "    if stored is None:",
           ("tests/monitor/test_monitor_runtime.py", "tests/monitor/test_monitor_spec_cli.py"),
           "a spec edited by hand (a loosened threshold, a moved reference) loads"),
    Mutant("monitor-rule-one-sided", "pytest_trt/monitor/prometheus.py",
           'return (f"abs(increase(', 'return (f"(increase(',
           ("tests/monitor/test_monitor_prometheus.py",),
           "the Prometheus alert misses a fall in confidence"),
    Mutant("monitor-rule-clear-threshold", "pytest_trt/monitor/prometheus.py",
           '{drift_expr(spec, output, stat, range_, matchers)} > {p.alert_sd!r}',
           '{drift_expr(spec, output, stat, range_, matchers)} > {p.clear_sd!r}',
           ("tests/monitor/test_monitor_prometheus.py",),
           "the Prometheus alert fires at the clear threshold"),
    Mutant("monitor-rule-no-min-samples", "pytest_trt/monitor/prometheus.py",
           ' and {count} >= {p.window}"', '"',
           ("tests/monitor/test_monitor_prometheus.py",),
           "the Prometheus alert judges a handful of samples after a restart"),
    # -- compare/rules.py -------------------------------------------------------------------------------------------
    Mutant("verdict-max-abs-off", "pytest_trt/compare/rules.py",
           '    Rule("max_abs", "Max abs error", lambda m: m.elements.max_abs, column="max_abs", report=True,',
           '    Rule("max_abs", "Max abs error", lambda m: None, column="max_abs", report=True,',
           ("tests/compare", "tests/golden/test_golden_workflow.py"), "max_abs threshold never breaches"),
    Mutant("verdict-cosine-flipped", "pytest_trt/compare/rules.py",
           'Rule("cosine", "Cosine similarity", lambda m: m.elements.cosine, upper=False,',
           'Rule("cosine", "Cosine similarity", lambda m: m.elements.cosine, upper=True,',
           ("tests/compare", "tests/golden/test_golden_workflow.py"), "cosine similarity compared the wrong way"),
    Mutant("verdict-accuracy-sign", "pytest_trt/compare/rules.py",
           "    ok = within(-drop, limit, count)", "    ok = within(drop, limit, count)",
           ("tests/compare", "tests/golden/test_golden_workflow.py"), "an accuracy drop never breaches"),
    Mutant("verdict-nonfinite-allowed", "pytest_trt/compare/rules.py",
           "    if t.allow_nonfinite:\n        return out", "    if True:\n        return out",
           ("tests/compare", "tests/golden/test_golden_workflow.py"), "NaN/inf outputs pass the golden check"),
    # -- golden provenance policy, timing drift, calibration caches, retention, strategies ------------------------
    Mutant("provenance-fail-ignored", "pytest_trt/golden/provenance.py",
           "        return self.mode == FAIL or field_name in self.fail_on or field_name in ALWAYS_FATAL",
           "        return field_name in self.fail_on or field_name in ALWAYS_FATAL",
           ("tests/golden/test_readme_flow.py", "tests/properties/test_timing.py"),
           "--trt-golden-provenance fail no longer fails on a provenance change"),
    Mutant("verdict-l2-equality-breach", "pytest_trt/compare/rules.py",
           "        ok = value <= limit if self.upper else value >= limit",
           "        ok = value < limit if self.upper else value >= limit",
           ("tests/golden/test_golden_verdict.py",), "an L2 delta exactly at the threshold counted as a breach"),
    Mutant("timing-point-estimate", "pytest_trt/compare/latency.py",
           "latency_drift, confidence, low > 1.0 + latency_drift, cpu))",
           "latency_drift, confidence, ratio > 1.0 + latency_drift, cpu))",
           ("tests/properties/test_timing.py",), "latency drift judged on the point estimate (a noisy CI flaps)"),
    Mutant("calibcache-little-endian", "pytest_trt/buildlog/calibcache.py",
           'return float(struct.unpack(">f", bytes.fromhex(value))[0])',
           'return float(struct.unpack("<f", bytes.fromhex(value))[0])',
           ("tests/calibration/test_cachefile.py",), "calibration scales read with the wrong byte order"),
    Mutant("prune-ignores-approvals", "pytest_trt/catalog/prune.py",
           "        add(a[\"current\"], f\"approval: {where} refreshed from it{by} ({a['test']})\")",
           "        pass",
           ("tests/catalog/test_catalog_prune.py",), "retention deletes the bundle an approval was made from"),
    Mutant("strategies-shrink-to-min", "pytest_trt/strategies.py",
           "        shared = opt + draw(st.integers(lo - opt, hi - opt))",
           "        shared = lo + draw(st.integers(0, hi - lo))",
           ("tests/properties/test_strategies.py",), "drawn batch sizes shrink toward the profile's min, not opt"),
    # -- golden writer, cache ---------------------------------------------------------------------------------------
    Mutant("golden-write-in-place", "pytest_trt/common/fileio.py",
           "        if path.exists():\n            shutil.copyfile(path, tmp)\n        yield tmp\n",
           "        tmp = path\n        yield tmp\n",
           ("tests/golden/test_golden_atomic.py",), "a golden update edits the file in place (a crash corrupts it)"),
    Mutant("golden-no-validate", "pytest_trt/golden/atomic.py",
           "                    store.validate(f, path)  # before anything is written",
           "                    pass",
           ("tests/golden/test_golden_atomic.py", "tests/golden/test_golden_store.py"),
           "an update writes into a golden file of the wrong layout"),
    # -- golden integrity: file digest, per-array digests, approvals, output names, fraction thresholds ---------
    Mutant("golden-file-digest-unchecked", "pytest_trt/golden/integrity.py",
           "    if found not in expected:\n", "    if False:\n", _INTEGRITY,
           "a golden whose bytes differ from its approved digest is handed to h5py (may hang, edits pass)"),
    Mutant("golden-prefetch-trusted-after-change", "pytest_trt/common/fileio.py",
           "        pending = _PENDING.pop(key, None)\n",
           "        pending = next((_PENDING.pop(k) for k in list(_PENDING) if k[0] == key[0]), None)\n",
           ("tests/golden/test_golden_prefetch.py",),
           "a golden hashed early and changed before its check passes on the early digest (h5py opens unverified "
           "bytes)"),
    Mutant("golden-block-unchecked", "pytest_trt/golden/integrity.py",
           "            ok = found == self.digests[i]\n", "            ok = True\n",
           ("tests/golden/test_golden_prefetch.py",),
           "h5py is handed a block of a damaged golden that does not match the digest its approval logged"),
    Mutant("golden-no-child-probe", "pytest_trt/golden/integrity.py",
           "        probe(path, data=data, timeout=timeout)\n", "", _INTEGRITY,
           "a golden without a digest file is opened in-process: a damaged one can hang the session"),
    Mutant("golden-array-digest-unchecked", "pytest_trt/golden/integrity.py",
           "        if found == self.expected:\n", "        if True:\n", _INTEGRITY,
           "stored inputs or outputs edited by hand (digest attribute kept) pass the check"),
    Mutant("golden-edit-judged-as-regression", "pytest_trt/golden/verifying.py",
           "        if edited:  # before any metric is judged: an edited golden is not an engine regression\n"
           "            raise integrity.edited_error(path, edited)\n", "", _INTEGRITY,
           "a swapped golden dataset is reported as an engine regression (or passes), not as an edited golden"),
    Mutant("golden-generation-without-approval", "pytest_trt/golden/verifying.py",
           '    return [f"snapshot {snap.config!r} generation {snap.generation} has no approval record in the file"]',
           "    return []", _INTEGRITY, "a golden whose approvals were deleted passes its check"),
    Mutant("golden-output-name-as-path", "pytest_trt/golden/store.py",
           "escape_name(name), (samples, *sample_shape)", "name, (samples, *sample_shape)", _INTEGRITY,
           "an output named 'a/b' is stored as group 'a' + dataset 'b' (clashes with output 'a')"),
    Mutant("approvals-onto-torn-line", "pytest_trt/golden/approvals.py",
           '                    line = b"\\n" + line\n', "                    pass\n", _INTEGRITY,
           "an approval appended onto a torn last line of APPROVALS.jsonl is lost"),
    Mutant("golden-sidecar-not-rolled-back", "pytest_trt/golden/atomic.py",
           "                _restore_sidecar(path, before)\n", "", _INTEGRITY,
           "an approval log that cannot be written leaves a digest file naming a golden that never replaced the old"),
    Mutant("verdict-top1-drop-float-boundary", "pytest_trt/compare/rules.py",
           "    ok = within(-drop, limit, count)\n", "    ok = -drop <= limit\n",
           ("tests/compare/test_fraction_boundaries.py",),
           "an accuracy drop of exactly top1_drop (0.92 -> 0.915) fails: float subtraction, not whole samples"),
    Mutant("provenance-unknown-field-taints", "pytest_trt/golden/provenance.py",
           'f for f in TAINT_FIELDS if getattr(current, f) != "" and getattr(self, f) != getattr(current, f)',
           "f for f in TAINT_FIELDS if getattr(self, f) != getattr(current, f)",
           ("tests/golden/test_provenance_unknown.py",),
           "an outputs-only check is tainted by the backend and device it cannot know"),
    Mutant("cache-no-hash-check", "pytest_trt/artifact.py",
           "            if hashlib.sha256(data).hexdigest() != want:", "            if False:",
           _CACHE, "a corrupt cached engine is used"),
    Mutant("cache-wrong-key-accepted", "pytest_trt/engines/cache.py",
           '            if entry.get("key") != key:', "            if False:",
           _CACHE, "an entry of another key is used"),
    Mutant("cache-store-in-place", "pytest_trt/engines/cache.py",
           "        replace_directory(final, fill, staging=self.root / \"tmp\")",
           "        final.mkdir(parents=True, exist_ok=True)\n        fill(final)",
           _CACHE, "cache entries are written where readers look"),
    Mutant("sidecar-never-settled", "pytest_trt/audit/recorder.py",
           "qdq,\n" + " " * 41 + "settled=True)", "qdq,\n" + " " * 41 + "settled=False)",
           ("tests/audit/test_sidecar.py",),
           "a fresh build's bundle never learns its inputs digest: every next session rebuilds its content"),
    Mutant("backend-choices-frozen", "pytest_trt/options.py",
           "        return self.choices_of() if self.choices_of is not None else self.choices",
           "        return Option.current_choices.__dict__.setdefault(\n"
           "            self.flag, self.choices_of() if self.choices_of is not None else self.choices)",
           ("tests/foundation/test_options.py", "tests/backends/test_registry.py"),
           "the choices are read once: a backend registered by a -p plugin later is refused by --trt-backend"),
    # -- the build's digest, the cache writer, stored facts, versions, the bundle writer ---
    Mutant("engine-digest-not-handed-on", "pytest_trt/artifact.py",
           "        logged.start_engine_digest(digest)\n", "",
           ("tests/foundation/test_engine_digest.py",),
           "the sha256 started when the build returned is dropped: the cache write waits for a second one"),
    Mutant("build-log-lines-run-together", "pytest_trt/common/logtext.py",
           'return "".join([f"[{e.severity}] {e.text}\\n" for e in entries])',
           'return "".join([f"[{e.severity}] {e.text}" for e in entries])',
           ("tests/foundation/test_engine_digest.py",), "build.log loses its line ends"),
    Mutant("cache-writer-not-awaited-at-exit", "pytest_trt/engines/provider.py",
           "@atexit.register\n", "", ("tests/foundation/test_engine_digest.py",),
           "a script that never calls flush() exits while its cache entry is half written"),
    Mutant("facts-of-any-engine", "pytest_trt/engines/record_store.py",
           '    if not isinstance(data, dict) or data.get("stamp") != _stamp(folder, result):',
           "    if not isinstance(data, dict):", ("tests/foundation/test_record_facts.py",),
           "a report shows the fusion count of another engine's record"),
    Mutant("facts-never-stored", "pytest_trt/engines/record_store.py",
           ', "facts": record.facts()}', "}", ("tests/foundation/test_record_facts.py",),
           "every cache hit makes the records again (the suite's cost)"),
    Mutant("metadata-version-from-readme", "pytest_trt/backends/registry.py",
           "            break  # the end of the header: what follows is the description",
           "            continue", ("tests/backends/test_registry.py",),
           "a 'Version:' line in a package's README becomes its version in the cache key"),
    Mutant("bundle-crc-trailer-zero", "pytest_trt/audit/archive.py",
           'struct.pack("<II", crc & 0xFFFFFFFF, size)', 'struct.pack("<II", 0, size)',
           ("tests/audit/test_bundle_writer.py",), "the engine member's CRC-32 is not written: gzip -t fails"),
    Mutant("fork-child-waits-for-parent-writers", "pytest_trt/engines/provider.py",
           "os.register_at_fork(after_in_child=_PENDING.clear)\n", "", ("tests/foundation/test_engine_digest.py",),
           "a forked child's exit waits for cache entries its parent's threads are writing"),
    Mutant("atomic-rename-not-durable", "pytest_trt/common/fileio.py",
           "        fsync_path(path.parent)  # the rename itself reaches the disk\n", "        pass\n",
           ("tests/foundation/test_fileio.py",),
           "a power cut after writing a bundle can undo its rename: the evidence is gone"),
    Mutant("prune-leaves-sidecar", "pytest_trt/catalog/prune.py",
           "        sidecar_path(Path(c.path)).unlink(missing_ok=True)\n", "        pass\n",
           ("tests/catalog/test_catalog_prune.py",),
           "a pruned bundle's hidden .state.json sidecar stays behind, describing a file that is gone"),
    # -- calibration data, calibration pins, ONNX limits, log diff, timing drift ---------------------------------------
    *(Mutant(id_, module, old, new, tests, why) for id_, module, old, new, tests, why in (
        ("calib-data-nan-accepted", _CALIB_DATA, "    if bad:\n", "    if False:\n", _CALIB_DATA_T,
         "NaN/Inf calibration samples build an engine silently"),
        ("calib-data-dtype-unchecked", _CALIB_DATA, "        if array.dtype != dtype:", "        if False:",
         _CALIB_DATA_T, "int64 data for a float input ends in onnxruntime's raw error"),
        ("calib-data-names-unchecked", _CALIB_DATA, "    if have != want:", "    if False:", _CALIB_DATA_T,
         "a wrong npz key ends in onnxruntime's raw 'missing from input feed'"),
        ("calib-data-zero-samples", _CALIB_DATA, "    if not n:", "    if False:", _CALIB_DATA_T,
         "a 0-row .npy reaches the calibrator ('No data is collected')"),
        ("calib-data-empty-npy", _CALIB_DATA, "(OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile)",
         "(OSError, ValueError, KeyError, zipfile.BadZipFile)", _CALIB_DATA_T,
         "an empty .npy file ends in numpy's raw EOFError"),
        ("calib-data-corrupt-h5", _CALIB_DATA, "    except (OSError, KeyError, ValueError, RuntimeError) as exc:",
         "    except (KeyError, ValueError, RuntimeError) as exc:", _CALIB_DATA_T,
         "a damaged .h5 ends in h5py's raw OSError"),
        ("calib-foreign-cache", "pytest_trt/calibration/explicit.py", "    if foreign:", "    if False:",
         _CALIB_DATA_T, "a cache written for another model is read for this one"),
        ("calib-cache-dir-written", "pytest_trt/buildlog/calibcache.py",
         "    refuse_directory(config_name, target)\n", "", _CALIB_DATA_T,
         "cache= naming a directory ends in IsADirectoryError"),
        ("calib-implicit-pin-after-build", "pytest_trt/backends/trt_calibrator.py",
         "    check_pinned_cache(config, before_build=True)\n", "", _IMPLICIT,
         "TensorRT's calibrator reads a cache the pin does not name; the pin is only checked after the build"),
        ("calib-implicit-pin-unchecked", "pytest_trt/backends/trt_calibrator.py",
         "    if calib.cache_sha256 is None:\n        return\n", "    if True:\n        return\n", _IMPLICIT,
         "the implicit path never checks cache_sha256"),
        ("calib-cacheio-ignores-pin", "pytest_trt/backends/trt_calibrator.py",
         "        if self.pinned is not None and digest != self.pinned:", "        if False:", _IMPLICIT,
         "the calibrator hands TensorRT a cache that does not hash to the pin"),
        ("calib-entropy-family", "pytest_trt/buildlog/calibration_assertions.py", "    if got != want:",
         "    if not got.startswith(want):", _ENTROPY, "assert_calibration('entropy') accepts entropy2"),
        ("calib-header-prefix", "pytest_trt/buildlog/calibcache.py", "        if name == word:",
         "        if name.startswith(word):", _ENTROPY, "an EntropyCalibration (v1) header read as entropy2"),
        ("onnx-limits-default-domain-last", "pytest_trt/backends/onnx_limits.py",
         "opset = version if opset is None else max(opset, version)", "opset = version", _LIMITS,
         "'' opset 99 then 'ai.onnx' 17: the last import wins and the model escapes the check"),
        ("onnx-limits-ai-onnx-ignored", "pytest_trt/backends/onnx_limits.py",
         'if domain in (b"", b"ai.onnx") and version is not None:', 'if domain == b"" and version is not None:',
         _LIMITS, "a model importing 'ai.onnx' explicitly escapes the check"),
        ("onnx-limits-major-only", "pytest_trt/backends/onnx_limits.py",
         '    for key in (".".join(parts[:2]), parts[0]):', "    for key in (parts[0],):", _LIMITS,
         "the release table matched on the major version only"),
        ("onnx-limits-prefix", "pytest_trt/backends/onnx_limits.py",
         '    for key in (".".join(parts[:2]), parts[0]):', "    for key in (version[:3], parts[0]):", _LIMITS,
         "the release table matched on a version prefix (1.70 read as 1.7)"),
        ("logdiff-tactics-ignored", "pytest_trt/upgrade/cli.py", "mask_tactics=not args.tactics, onnx=args.onnx)",
         "mask_tactics=True, onnx=args.onnx)", _LOGDIFF, "log diff --tactics is ignored"),
        ("trt7-single-node-fusion", "pytest_trt/buildlog/events.py", "if len(set(g)) >= 2)", "if len(set(g)) >= 1)",
         _LOGDIFF, "a TensorRT 7 event naming one node counts as a fusion"),
        ("log-parse-fusion-count", "pytest_trt/buildlog/summary.py", '"fusions": len(fusion_sets(record)),',
         '"fusions": len(record.fusions),', _LOGDIFF, "log parse prints fusions: 0 where log diff counts 1"),
        ("timing-throughput-low-end", "pytest_trt/compare/latency.py",
         "throughput_drift, confidence, high < 1.0 - throughput_drift, cpu))",
         "throughput_drift, confidence, low < 1.0 - throughput_drift, cpu))", _TIMING,
         "throughput fails when any part of its interval is below the limit (a noisy CI flaps)"),
        ("timing-throughput-point-estimate", "pytest_trt/compare/latency.py",
         "throughput_drift, confidence, high < 1.0 - throughput_drift, cpu))",
         "throughput_drift, confidence, ratio < 1.0 - throughput_drift, cpu))", _TIMING,
         "throughput judged on the point estimate"),
        ("timing-no-repeat", "pytest_trt/golden/timing.py",
         "    if any(v.failed for v in verdicts):  # repeated measurement: a breach must show twice",
         "    if False:  # repeated measurement: a breach must show twice", _TIMING,
         "a timing breach fails without the repeated measurement the docs promise"),
    )),
    # -- bundles that readers cannot use; the upgrade review's verdicts ---------------------------------------------
    Mutant("tarscan-appended-bytes", "pytest_trt/audit/tarscan.py",
           "        if self.first_difference is None and any(self.pending):",
           "        if False:", ("tests/audit/test_tamper.py",),
           "bytes appended after a bundle's end pass verify while the file's sha256 changed"),
    Mutant("sidecar-identity-size-mtime", "pytest_trt/audit/sidecar.py",
           "    if (state.size, state.mtime_ns, state.ctime_ns, state.inode) != (st.st_size, st.st_mtime_ns, "
           "st.st_ctime_ns,\n" + " " * 70 + "st.st_ino):",
           "    if (state.size, state.mtime_ns) != (st.st_size, st.st_mtime_ns):", ("tests/audit/test_sidecar.py",),
           "a same-size file put in a bundle's place with its mtime set back is trusted from the sidecar"),
    Mutant("verify-json-unbudgeted", "pytest_trt/audit/verify.py",
           "    if len(data) > budget and json_values(data) > budget:", "    if False:",
           ("tests/audit/test_bundle_limits.py",), "60 MB of tiny JSON values parse to gigabytes (JSON bomb)"),
    Mutant("verify-json-budget-boundary", "pytest_trt/audit/verify.py",
           "    if len(data) > budget and json_values(data) > budget:",
           "    if len(data) > budget and json_values(data) >= budget:",
           ("tests/audit/test_bundle_limits.py",), "a member exactly at its value limit is refused"),
    Mutant("verify-log-ratio-unchecked", "pytest_trt/audit/verify.py",
           "        cap = log_limit(len(data) - len(pending)) if limit is None else limit",
           "        cap = MAX_LOG_BYTES if limit is None else limit",
           ("tests/audit/test_bundle_limits.py",), "a log bomb is inflated to the absolute cap on every read"),
    Mutant("schema-golden-histograms", "pytest_trt/audit/schema.py",
           '        _check_histogram(histogram, _at(where, f"histograms.{stat}"))', "        pass",
           ("tests/upgrade/test_unusable_bundles.py",), "a histogram without range crashes the report's pictures"),
    Mutant("schema-golden-verdict-fields", "pytest_trt/audit/schema.py",
           "        _fields(verdict, where, _VERDICT)\n", "", ("tests/upgrade/test_unusable_bundles.py",),
           "a check without a verdict is read as unchanged; a wrong-typed one reaches the catalog"),
    Mutant("schema-golden-metric-numbers", "pytest_trt/audit/schema.py",
           '    _numbers({k: v for k, v in metrics.items() if k not in _NESTED_METRICS}, _at(where, "metrics"))',
           "    pass", ("tests/upgrade/test_unusable_bundles.py",),
           "a metric stored as a string crashes the report's threshold comparison"),
    Mutant("record-diff-empty-warning", "pytest_trt/buildlog/record_diff.py",
           '    return (text.splitlines() or [""])[0]', "    return text.splitlines()[0]",
           ("tests/upgrade/test_log_diff.py", "tests/upgrade/test_unusable_bundles.py"),
           "a warning with empty text crashes log diff and bundle diff (IndexError)"),
    Mutant("html-empty-warning", "pytest_trt/upgrade/html.py",
           "first_line(w)[:200]", "w.splitlines()[0][:200]", ("tests/upgrade/test_unusable_bundles.py",),
           "a warning with empty text crashes the HTML report"),
    Mutant("pairing-unverified-aborts", "pytest_trt/upgrade/pairing.py",
           '        return _unverified_side(path, f"the bundle fails verification ({exc.message}); "',
           '        raise PairingError(f"{path}: the bundle fails verification ({exc.message}); "',
           ("tests/upgrade/test_unusable_bundles.py",),
           "one bundle failing verification aborts the whole upgrade report (exit 3)"),
    Mutant("pairing-unreadable-note-aborts", "pytest_trt/upgrade/pairing.py",
           "        match = _NOTE_NAME.match(path.name)",
           '        raise PairingError(f"{path}: not a pytest-trt build-failure note ({exc})") from None',
           ("tests/upgrade/test_unusable_bundles.py",),
           "one torn build-failure note aborts the whole upgrade report (exit 3)"),
    Mutant("pairing-by-name-only", "pytest_trt/upgrade/pairing.py",
           "        return self.name, self.version", '        return self.name, ""',
           ("tests/upgrade/test_review_verdicts.py",), "a version bump is paired with the old version"),
    Mutant("review-missing-old-moves", "pytest_trt/upgrade/model.py",
           "        return self.old is not None and self.new is not None and self.old != self.new",
           "        return self.old != self.new", ("tests/upgrade/test_review_verdicts.py",),
           "an approval run's missing figures count as moved metrics"),
    Mutant("review-env-only-unchanged", "pytest_trt/upgrade/model.py",
           "    elif not (engine_changed or structure_changed or any(r.changed for r in rows) or env):",
           "    elif not (engine_changed or structure_changed or any(r.changed for r in rows)):",
           ("tests/upgrade/test_review_verdicts.py",), "a config whose environment alone changed is 'unchanged'"),
    Mutant("review-env-double-count", "pytest_trt/audit/bundle_diff.py",
           "        and not (path in parents and _empty(a.get(path)) and _empty(b.get(path)))\n", "",
           ("tests/upgrade/test_review_verdicts.py",),
           "one environment variable is reported as two differences (the empty 'env' object too)"),
    Mutant("review-tag-drop-unjudged", "pytest_trt/upgrade/model.py",
           '                                  th["top1_drop"], "max", tag=tag))',
           '                                  None, "max", tag=tag))', ("tests/upgrade/test_review_verdicts.py",),
           "a regression in one tag only is 'changed within thresholds'"),
    Mutant("review-top1-sign", "pytest_trt/upgrade/model.py",
           '    return None if m.get("accuracy_drop") is None else -float(m["accuracy_drop"])',
           '    return None if m.get("accuracy_drop") is None else float(m["accuracy_drop"])',
           ("tests/upgrade/test_review_verdicts.py",), "an accuracy gain is a regression and a drop passes"),
    Mutant("review-top1-boundary-rounded", "pytest_trt/upgrade/model.py",
           '        limit = self.threshold + (_ROUNDING * max(1.0, abs(self.threshold)) if self.metric == "top1_drop" '
           'else 0.0)', "        limit = self.threshold", ("tests/upgrade/test_review_verdicts.py",),
           "a top-1 drop exactly at its threshold is a regression in the report (float rounding)"),
    Mutant("log-diff-tactics-ignored", "pytest_trt/upgrade/cli.py",
           "mask_tactics=not args.tactics, onnx=args.onnx", "mask_tactics=True, onnx=args.onnx",
           ("tests/upgrade/test_log_diff.py",), "log diff --tactics still masks tactic changes"),
)


def run(mutant: Mutant, *, timeout: int) -> tuple[str, float, str]:
    path = ROOT / mutant.module
    original = path.read_text(encoding="utf-8")
    if original.count(mutant.old) != 1:
        return "STALE", 0.0, f"original text found {original.count(mutant.old)} times (expected once)"
    start = time.perf_counter()
    try:
        path.write_text(original.replace(mutant.old, mutant.new), encoding="utf-8")
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutant.tests],
                cwd=ROOT, capture_output=True, text=True, timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return "KILLED", time.perf_counter() - start, f"timeout after {timeout} s"
    finally:
        path.write_text(original, encoding="utf-8")
    elapsed = time.perf_counter() - start
    last = (proc.stdout.strip().splitlines() or ["?"])[-1]
    if proc.returncode == 0:
        return "SURVIVED", elapsed, last
    if proc.returncode in (2, 3, 4, 5):  # interrupted, internal error, usage error, no tests collected
        return "ERROR", elapsed, last
    return "KILLED", elapsed, last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these mutants")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per mutant (default 900)")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or m.id in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.id:32} {m.module:38} {m.why}")
        return 0
    counts: dict[str, int] = {}
    for m in chosen:
        status, seconds, detail = run(m, timeout=args.timeout)
        counts[status] = counts.get(status, 0) + 1
        print(f"{status:8} {m.id:32} {seconds:6.1f} s  {detail[:90]}", flush=True)
    print("  ".join(f"{k.lower()} {v}" for k, v in sorted(counts.items())) + f"  of {len(chosen)} mutants")
    return 1 if counts.get("SURVIVED") or counts.get("STALE") else 0


if __name__ == "__main__":
    sys.exit(main())
