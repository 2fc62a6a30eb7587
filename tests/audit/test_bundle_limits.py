"""The verifier's limits: far above what the writer produces for a torchvision-size model, far below a bomb.

The real side: bundles that real sessions write for the 224x224 MobileNetV2 of ``benchmarks/models.py`` (ONNX
Runtime with a labelled golden check, TensorRT-RTX), measured here with tarfile and zlib.  The hostile side: members
inside their byte limits that parse or inflate to gigabytes, refused with bounded memory; how far the verifier got
is read from its message (bytes inflated), never from a clock.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import textwrap
import zlib
from pathlib import Path

import pytest

from pytest_trt.audit import verify as v
from pytest_trt.audit.archive import tar_gz_bytes
from pytest_trt.audit.bundle import canonical_json
from pytest_trt.audit.manifest import MANIFEST, render_manifest, sha256_hex
from pytest_trt.audit.sign import SIGNATURE
from pytest_trt.audit.verify import verify_bundle
from pytest_trt.errors import BundleIntegrityError
from tests.audit.conftest import read_members
from tests.audit.test_hostile_bundles import _verify_in_child
from tests.conftest import HAS_ORT, HAS_RTX

ROOT = Path(__file__).resolve().parents[2]
#: how far below its limit every member of a real bundle must stay
MARGIN = 100

_SUITE = textwrap.dedent("""
    import numpy as np
    import pytest
    from pytest_trt import BuildConfig, OrtOptions, Profile
    from pytest_trt.golden.dataset import GoldenDataset

    ORT = BuildConfig(name="mnv2_224_ort", version="1.0.0", onnx="mnv2_224.onnx",
                      ort=OrtOptions(graph_optimization_level="all", intra_op_threads=1))
    RTX = BuildConfig(name="mnv2_224_rtx", version="1.0.0", onnx="mnv2_224.onnx",
                      profiles=[Profile(input=((1, 3, 224, 224), (8, 3, 224, 224), (32, 3, 224, 224)))])
    rng = np.random.default_rng(0)
    DATA = GoldenDataset.from_arrays({"input": rng.random((64, 3, 224, 224), dtype=np.float32)},
                                     labels=rng.integers(0, 1000, 64), tags=[f"tag{i % 8}" for i in range(64)])

    @pytest.mark.trt(ORT)
    def test_outputs(trt_engine, trt_golden, trt_backend):
        trt_golden.check(trt_engine, dataset=DATA, batch_size=16)

    @pytest.mark.trt(RTX)
    def test_build(trt_engine):
        assert trt_engine.record.layers
""")


@pytest.fixture(scope="module")
def real_bundles(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Bundles of the 224x224 MobileNetV2 from real sessions: ONNX Runtime (approve, then check) and TensorRT-RTX."""
    if not (HAS_ORT and HAS_RTX):
        pytest.skip("needs onnxruntime and tensorrt_rtx")
    sys.path.insert(0, str(ROOT))
    from benchmarks.models import mobilenet_v2_224
    from examples.models import save

    base = tmp_path_factory.mktemp("mnv2_224")
    save(mobilenet_v2_224(), base / "mnv2_224.onnx")
    (base / "test_mnv2.py").write_text(_SUITE)
    common = ["--trt-engine-build", f"--trt-cache-dir={base / 'cache'}", f"--trt-golden-dir={base / 'golden'}"]
    runs = [("onnxruntime", "approve", ["-k", "outputs", "--trt-update-golden", "--trt-approve=limits"]),
            ("onnxruntime", "ort", ["-k", "outputs"]), ("tensorrt-rtx", "rtx", ["-k", "build"])]
    for backend, out, extra in runs:
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mnv2.py",
                              f"--trt-backend={backend}", f"--trt-bundle-dir={base / out}", *common, *extra],
                             cwd=base, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    return [*(base / "ort").glob("*.tar.gz"), *(base / "rtx").glob("*.tar.gz")]


def test_real_bundles_of_a_torchvision_size_model_are_far_inside_every_limit(real_bundles: list[Path]) -> None:
    assert len(real_bundles) == 2
    seen: set[str] = set()
    for path in real_bundles:
        verify_bundle(path)
        with tarfile.open(path) as tar:
            for info in tar.getmembers():
                seen.add(info.name)
                if info.name == "engine.plan":
                    continue
                assert info.size * MARGIN <= v.MEMBER_LIMITS[info.name], (path.name, info.name, info.size)
                data = tar.extractfile(info).read()  # type: ignore[union-attr]
                if info.name.endswith(".json"):
                    values = 1 + sum(data.count(c) for c in (b",", b":", b"[", b"{"))
                    assert values * MARGIN <= v.JSON_VALUE_LIMITS[info.name], (path.name, info.name, values)
                if info.name == "build.log.gz":
                    text = zlib.decompress(data, 31)
                    assert len(text) * MARGIN <= v.MAX_LOG_BYTES
                    assert len(text) <= 20 * len(data)  # the ratio a text log really has, far below the cap
    assert {"build.json", "golden.json", "environment.json", "config.json", "build.log.gz"} <= seen
    golden = [p for p in real_bundles if "_ort" in p.name]
    with tarfile.open(golden[0]) as tar:  # the check's figures are there: histograms, tags
        doc = json.loads(tar.extractfile("golden.json").read())  # type: ignore[union-attr]
    (check,) = doc["checks"].values()
    assert set(check["outputs"]["outputs"]["logits"]["histograms"]) == {"entropy", "max_confidence", "top2_margin"}


def _rebuilt(source: Path, out: Path, replace: dict[str, bytes]) -> Path:
    """``source`` with members replaced by raw bytes and the manifest recomputed (unsigned)."""
    members = read_members(source)
    members.pop(SIGNATURE, None)
    members.update(replace)
    members[MANIFEST] = render_manifest({n: sha256_hex(d) for n, d in members.items() if n != MANIFEST})
    out.write_bytes(tar_gz_bytes(members))
    return out


@pytest.mark.parametrize(("member", "count"), [("build.json", 30_000_000), ("golden.json", 6_000_000)])
def test_a_member_of_tiny_json_values_is_refused_before_parsing(small_signed_bundle: Path, tmp_path: Path,
                                                                member: str, count: int) -> None:
    original = read_members(small_signed_bundle)[member]
    padded = b'{"pad":[' + b"0," * (count - 1) + b"0]," + original[1:]  # within the member's byte limit
    assert len(padded) < v.MEMBER_LIMITS[member]
    path = _rebuilt(small_signed_bundle, tmp_path / "values.tar.gz", {member: padded})
    got = _verify_in_child(path)
    values = 1 + sum(padded.count(c) for c in (b",", b":", b"[", b"{"))
    assert got["outcome"] == (f"{path}: member {member}: holds up to {values:,} JSON values, more than the "
                              f"{v.JSON_VALUE_LIMITS[member]:,} accepted for it (sized from what pytest-trt writes, "
                              "with margin); refused before parsing")
    if got["peak_rss_kib"] is not None:  # parsed, these values would take gigabytes
        assert int(str(got["peak_rss_kib"])) < 300 * 1024, got


def test_json_at_the_value_limit_verifies_and_one_more_is_refused(small_signed_bundle: Path, tmp_path: Path) -> None:
    members = read_members(small_signed_bundle)
    doc = json.loads(members["golden.json"])
    (test,) = doc["checks"]
    limit = v.JSON_VALUE_LIMITS["golden.json"]

    def with_pad(n: int) -> bytes:
        doc["checks"][test]["pad"] = [0] * n
        return canonical_json(doc)

    base = with_pad(1)
    base_values = 1 + sum(base.count(c) for c in (b",", b":", b"[", b"{"))
    at_limit = with_pad(1 + limit - base_values)  # each further 0 is one more comma
    assert 1 + sum(at_limit.count(c) for c in (b",", b":", b"[", b"{")) == limit
    verify_bundle(_rebuilt(small_signed_bundle, tmp_path / "at.tar.gz", {"golden.json": at_limit}))
    over = _rebuilt(small_signed_bundle, tmp_path / "over.tar.gz", {"golden.json": with_pad(2 + limit - base_values)})
    with pytest.raises(BundleIntegrityError, match=f"holds up to {limit + 1:,} JSON values, more than the {limit:,}"):
        verify_bundle(over)


def _deflate_bomb(inflated_mib: int) -> bytes:
    """A gzip stream of ``inflated_mib`` MiB of zeros, made without compressing them all: one fully flushed
    deflate block of 16 MiB of zeros, repeated (each starts on a byte boundary and refers to nothing before it).
    Its trailer is wrong on purpose: a verifier that reads that far has already lost."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(16 << 20)) + c.flush(zlib.Z_FULL_FLUSH)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + block * (inflated_mib // 16) + b"\x03\x00" + bytes(8)


def test_a_log_that_inflates_two_gib_stops_early_with_bounded_memory(small_signed_bundle: Path,
                                                                      tmp_path: Path) -> None:
    bomb = _deflate_bomb(2048)
    assert len(bomb) < v.MEMBER_LIMITS["build.log.gz"]  # inside the byte limit: only the inflating is refused
    d = zlib.decompressobj(31)
    assert d.decompress(bomb[: 1 << 16], 64 << 20) == bytes(64 << 20)  # it is what it claims: zeros, fast
    path = _rebuilt(small_signed_bundle, tmp_path / "logbomb.tar.gz", {"build.log.gz": bomb})
    got = _verify_in_child(path)
    found = re.search(r"member build\.log\.gz: does not decompress to UTF-8 text \(decompresses to more than "
                      r"([\d,]+) bytes, the most accepted for a log \(at most 268,435,456, and past 67,108,864 at most "
                      r"100 bytes per compressed byte", str(got["outcome"]))
    assert found, got
    inflated = int(found[1].replace(",", ""))
    # stopped where the compressed bytes read so far allow (64 MiB + 100 per byte), far from 2 GiB or the 256 MiB cap
    assert 64 << 20 < inflated < 128 << 20, inflated
    if got["peak_rss_kib"] is not None:
        assert int(str(got["peak_rss_kib"])) < 200 * 1024, got


def test_real_log_ratio_and_the_cap_agree(tmp_path: Path) -> None:
    """The real verbose logs of the corpus gzip (as the writer does) at 6-14x: far below the cap of 100x."""
    from pytest_trt.audit.archive import gzip_bytes

    for log in sorted((ROOT / "tests" / "data" / "trt_logs").glob("log_*.txt")):
        data = log.read_bytes()
        assert len(data) <= 20 * len(gzip_bytes(data)), log.name
