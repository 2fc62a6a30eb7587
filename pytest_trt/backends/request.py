"""The build request: everything about one build computed once, then handed to ``backend.build``.

The engine provider makes one :class:`BuildRequest` per config and ONNX content:
the ONNX file is hashed (once, and memoised by file identity), a calibrated
config's data are digested (once, by :mod:`pytest_trt.common.calibration_data`), the
backend's versions come from package metadata and the device is probed once per process.
The request's ``key`` is the engine cache key; a cache hit therefore needs no
backend library import and no validation.  On a miss the provider validates the
config once, then calls ``backend.build(request)``, which does not validate again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pytest_trt.config import BuildConfig

#: version of the key material's layout; bump when the key's inputs change meaning
CACHE_SCHEMA = 1


def cache_key(
    *, onnx_sha256: str, canonical_config: str, backend: str, versions: Mapping[str, str],
    device: Mapping[str, Any],
) -> str:
    """sha256 over the ONNX hash, the canonical config, backend name and versions, device and schema versions."""
    from pytest_trt.artifact import ARTIFACT_SCHEMA
    from pytest_trt.buildlog.schema import RECORD_SCHEMA  # not the record classes: a cache hit may never need them

    material = {
        "schema": [CACHE_SCHEMA, ARTIFACT_SCHEMA, RECORD_SCHEMA],
        "onnx_sha256": onnx_sha256,
        "config": canonical_config,
        "backend": backend,
        "versions": dict(versions),
        "device": dict(device),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


class Requester(Protocol):
    """What a request reads of the backend it is made for (every :class:`~pytest_trt.backends.base.Backend` is one)."""

    name: str

    def versions(self) -> dict[str, str]: ...

    def device(self, config: BuildConfig) -> dict[str, Any]: ...

    def validate(self, config: BuildConfig) -> None: ...


@dataclass(frozen=True)
class BuildRequest:
    """One build, fully determined: what :meth:`Backend.build` receives.

    ``config`` is built by the backend named ``backend``; ``onnx_sha256`` is the hash of
    ``config.onnx``; ``data_sha256`` the digest of its calibration data (None without);
    ``config_hash`` is ``config.hash_with(onnx_sha256, data_sha256)``; ``versions`` and
    ``device`` are the backend's as they enter ``key``, the cache key (and the built result).
    ``backend.build(request)`` does not validate: whoever builds a request validates its config
    first (:meth:`create` does by default; the provider does on a cache miss).
    """

    config: BuildConfig
    backend: str
    onnx_sha256: str
    config_hash: str
    versions: Mapping[str, str]
    device: Mapping[str, Any]
    key: str
    data_sha256: str | None = None

    @property
    def config_json(self) -> dict[str, Any]:
        """``config.to_json()`` with the calibration data's digest: what the built result records."""
        return self.config.to_json(self.data_sha256)

    @classmethod
    def create(
        cls, backend: Requester, config: BuildConfig, *, onnx_sha256: str | None = None, validate: bool = True
    ) -> BuildRequest:
        """Compute everything a build and its cache key need; validate ``config`` with ``backend`` first.

        ``validate=False`` is for the cache lookup: an entry exists under a key only if a build of that
        exact config, backend version and device passed validation, so a cache hit needs no validation
        (and no backend library import); the caller validates before building.
        """
        if validate:
            backend.validate(config)
        sha = onnx_sha256 if onnx_sha256 is not None else config.onnx_sha256
        data_sha = config.data_sha256  # loads the calibration samples once, for this request only
        versions = backend.versions()
        device = backend.device(config)
        key = cache_key(onnx_sha256=sha, canonical_config=config.canonical_json(data_sha), backend=backend.name,
                        versions=versions, device=device)
        return cls(config=config, backend=backend.name, onnx_sha256=sha, config_hash=config.hash_with(sha, data_sha),
                   versions=versions, device=device, key=key, data_sha256=data_sha)


def as_request(backend: Requester, request: BuildRequest | BuildConfig) -> BuildRequest:
    """``request`` itself, or a request made (and validated) for a bare config."""
    if isinstance(request, BuildRequest):
        if request.backend != backend.name:
            raise ValueError(f"a build request for backend {request.backend!r} was given to {backend.name!r}")
        return request
    return BuildRequest.create(backend, request)
