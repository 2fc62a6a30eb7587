"""Fixtures of the audit tests: real TensorRT-RTX builds of the example MobileNetV2, keys, bundles."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HAS_RTX

if HAS_RTX:
    from tests.audit.rtx_build import build_mobilenet


def read_members(path: Path) -> dict[str, bytes]:
    """A bundle's members by name, read with tarfile directly (independent of the verifier)."""
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


@pytest.fixture(scope="session")
def mnv2() -> Any:
    if not HAS_RTX:
        pytest.skip("tensorrt_rtx is not installed (pip install 'pytest-trt[rtx]')")
    return build_mobilenet()


@pytest.fixture(scope="session")
def mnv2_batch64() -> Any:
    if not HAS_RTX:
        pytest.skip("tensorrt_rtx is not installed (pip install 'pytest-trt[rtx]')")
    return build_mobilenet(max_batch=64)


@pytest.fixture(scope="session")
def record_of() -> Any:
    from pytest_trt.buildlog.readers import parse_entries

    return lambda result: parse_entries(result.log)


@pytest.fixture(scope="session")
def environment() -> dict[str, Any]:
    from pytest_trt.audit.environment import capture_environment

    return capture_environment(backend="tensorrt-rtx", rootdir=None)


@pytest.fixture(scope="session")
def keypair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(private PEM, public PEM) Ed25519 key files."""
    pytest.importorskip("cryptography", reason="signing tests need cryptography (pip install 'pytest-trt[sign]')")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    folder = tmp_path_factory.mktemp("keys")
    key = ed25519.Ed25519PrivateKey.generate()
    private = folder / "sign.pem"
    private.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    public = folder / "sign.pub.pem"
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


@pytest.fixture(scope="session")
def signed_bundle(tmp_path_factory: pytest.TempPathFactory, mnv2: Any, record_of: Any,
                  environment: dict[str, Any], keypair: tuple[Path, Path]) -> Path:
    from pytest_trt.audit.bundle import write_bundle

    info = write_bundle(mnv2, tmp_path_factory.mktemp("signed"), record=record_of(mnv2), environment=environment,
                        golden_results={"tests/test_m.py::test_a": {"verdict": "pass", "config_hash": mnv2.config_hash}},
                        calibration_cache=b"TRT-8601-EntropyCalibration2\ninput: 3c010a14\n",
                        qdq_model_sha256="ab" * 32, sign_key=keypair[0])
    return info.path


def rebuild(members: dict[str, bytes]) -> bytes:
    from pytest_trt.audit.archive import tar_gz_bytes

    return tar_gz_bytes(members)


def raw_tar(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    """A tar.gz with hand-made headers (for unsafe-member tests)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


@pytest.fixture(scope="session")
def small_build() -> Any:
    """A real TensorRT-RTX build of the 3-node conv_bn_relu model (about 0.3 s)."""
    if not HAS_RTX:
        pytest.skip("tensorrt_rtx is not installed (pip install 'pytest-trt[rtx]')")
    from tests.audit.rtx_build import build_small

    return build_small()


@pytest.fixture(scope="session")
def small_signed_bundle(tmp_path_factory: pytest.TempPathFactory, small_build: Any, record_of: Any,
                        keypair: tuple[Path, Path]) -> Path:
    """A signed bundle of about 7 KB (engine hash only, two-key environment): small enough to flip every byte."""
    from pytest_trt.audit.bundle import write_bundle

    env = {"schema": 1, "python": {"version": "3.10.12", "implementation": "CPython"}}
    info = write_bundle(small_build, tmp_path_factory.mktemp("small"), record=record_of(small_build), environment=env,
                        include_engine=False, sign_key=keypair[0],
                        golden_results={"tests/test_s.py::test_s": {"verdict": "pass"}})
    return info.path
