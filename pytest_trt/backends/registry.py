"""Every backend pytest-trt knows, in one table, and everything derived from it.

A row (:class:`BackendSpec`) says what a backend *is*: its ``--trt-backend``
name, the Python module it needs, the pip distributions that carry that
module, the ``pytest-trt[extra]`` that installs it, the short slug in bundle
names, its rank for ``--trt-backend auto``, the factory that makes it (an
import path, so reading the table imports no backend library) and the
:class:`~pytest_trt.config.BuildConfig` options field only it reads.

Options, help texts, the report header, environment capture, bundle names,
the upgrade report and :func:`create_backend` all read this table; adding a
backend is one :class:`BackendSpec` here (or :func:`register` from a plugin),
one backend module and its tests.

Versions come one way: :func:`installed_version`, from the distributions'
package metadata, with no library import (importing ``tensorrt_rtx`` costs
~35 ms, ``onnx`` ~190 ms).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_trt.errors import BackendUnavailable, UnsupportedOption

if TYPE_CHECKING:
    import importlib.metadata

    from pytest_trt.artifact import BuildResult
    from pytest_trt.backends.base import Backend
    from pytest_trt.backends.request import BuildRequest
    from pytest_trt.config import BuildConfig

#: ``--trt-backend auto``
AUTO = "auto"


@dataclass(frozen=True)
class BackendSpec:
    """What a backend is, as data (one row of the registry)."""

    #: ``--trt-backend`` value and ``BuildResult.backend``
    name: str
    #: the Python module the backend imports (``tensorrt_rtx``); also the key of its version in ``versions``
    module: str
    #: pip distributions carrying ``module``, most usual first (the first installed one gives the version)
    distributions: tuple[str, ...]
    #: ``pip install 'pytest-trt[<extra>]'`` installs it
    extra: str
    #: short name in bundle file names (``rtx`` in ``model-v1-rtx1.7-cpu.tar.gz``)
    slug: str
    #: ``auto`` tries backends by increasing rank
    auto_rank: int
    #: ``"package.module:function"`` called with this spec, returning the Backend
    factory: str
    #: one-line description for help texts
    title: str
    #: the BuildConfig field holding options only this backend reads (``"ort"``), or None
    options_field: str | None = None
    #: other distributions whose versions can change an engine and so enter the cache key
    key_packages: tuple[str, ...] = ("onnx",)
    #: runs engines on any CPU (the hint when a GPU backend's engine cannot run here)
    runs_on_cpu: bool = False
    #: ``auto`` may pick it (False for test doubles such as pytest_trt.testing's fake backend)
    in_auto: bool = True


_SPECS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec(
            name="tensorrt", module="tensorrt", distributions=("tensorrt", "tensorrt-cu13", "tensorrt-cu12"),
            extra="trt", slug="trt", auto_rank=0, factory="pytest_trt.backends.tensorrt:create",
            title="NVIDIA TensorRT (needs a GPU to run engines)",
        ),
        BackendSpec(
            name="tensorrt-rtx", module="tensorrt_rtx",
            distributions=("tensorrt-rtx", "tensorrt_rtx", "tensorrt-rtx-cu13", "tensorrt_rtx_cu13"),
            extra="rtx", slug="rtx", auto_rank=1, factory="pytest_trt.backends.tensorrt:create",
            title="NVIDIA TensorRT-RTX (builds engines on a CPU-only machine)",
        ),
        BackendSpec(
            name="onnxruntime", module="onnxruntime", distributions=("onnxruntime", "onnxruntime-gpu"),
            extra="ort", slug="ort", auto_rank=2, factory="pytest_trt.backends.onnxruntime:create",
            title="ONNX Runtime (runs on the CPU)", options_field="ort", key_packages=("onnx", "numpy"),
            runs_on_cpu=True,
        ),
    )
}


def register(spec: BackendSpec) -> None:
    """Add (or replace) a backend row: for a plugin shipping its own backend, before pytest-trt loads."""
    if spec.name == AUTO or not spec.name:
        raise ValueError(f"a backend cannot be named {spec.name!r}")
    _SPECS[spec.name] = spec


def unregister(name: str) -> None:
    """Remove a row added with :func:`register` (tests)."""
    _SPECS.pop(name, None)


def specs() -> tuple[BackendSpec, ...]:
    """Every row, in ``auto`` order."""
    return tuple(sorted(_SPECS.values(), key=lambda s: (s.auto_rank, s.name)))


def names() -> tuple[str, ...]:
    """Backend names, in ``auto`` order."""
    return tuple(s.name for s in specs())


def choices() -> tuple[str, ...]:
    """``--trt-backend`` / ``trt_backend`` values: ``auto`` then every backend."""
    return (AUTO, *names())


def auto_order() -> tuple[str, ...]:
    """The backends ``auto`` tries, first importable wins."""
    return tuple(s.name for s in specs() if s.in_auto)


def spec(name: str) -> BackendSpec:
    """The row of backend ``name``; raises :class:`BackendUnavailable` naming the known ones."""
    found = _SPECS.get(name)
    if found is None:
        raise BackendUnavailable(f"unknown backend {name!r}; choose one of {', '.join(choices())}", backend=name)
    return found


def find(name: str | None) -> BackendSpec | None:
    """The row of ``name``, or None (names read back from old bundles and goldens)."""
    return _SPECS.get(name or "")


def name_of_module(module: str) -> str:
    """The backend whose library is the Python module ``module`` (``tensorrt_rtx`` -> ``tensorrt-rtx``)."""
    found = next((s for s in specs() if s.module == module), None)
    if found is None:
        raise BackendUnavailable(f"no backend uses the Python module {module!r}; backends: {', '.join(names())}",
                                 backend=module)
    return found.name


def cpu_backend() -> str | None:
    """The first backend that runs engines on any CPU (``onnxruntime``), or None."""
    return next((s.name for s in specs() if s.runs_on_cpu), None)


def slug(name: str) -> str | None:
    """The bundle-name slug of backend ``name`` (None for a name not in the table)."""
    found = _SPECS.get(name)
    return None if found is None else found.slug


def backend_help() -> str:
    """Help text of ``--trt-backend``."""
    return f"backend that builds engines (default: auto = {', then '.join(auto_order())})"


def ini_help() -> str:
    """Help text of the ``trt_backend`` ini key."""
    listed = ", ".join(choices())
    return f"backend: {listed}"


def module_available(name: str) -> bool:
    """Whether backend ``name``'s library is importable, without importing it."""
    return importlib.util.find_spec(spec(name).module) is not None


def metadata_header(dist: importlib.metadata.Distribution) -> tuple[str | None, str | None]:
    """The ``Name`` and ``Version`` fields of a distribution's metadata, from its header lines only.

    ``dist.metadata`` and ``importlib.metadata.version`` run the e-mail parser over the whole file (the
    long description included): ~0.5 ms a package, paid for every cache key of every session and for
    every distribution an audit's environment lists.  The header ends at the first empty line; field
    names are matched without regard to case, as the e-mail parser does.
    """
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    name = version = None
    for line in text.splitlines():
        if not line:
            break  # the end of the header: what follows is the description
        if name is None and line[:5].lower() == "name:":
            name = line[5:].strip()
        elif version is None and line[:8].lower() == "version:":
            version = line[8:].strip()
        if name is not None and version is not None:
            break
    return name, version


def metadata_version(distribution: str) -> str:
    """``importlib.metadata.version(distribution)`` from the metadata's header (:func:`metadata_header`).

    Raises PackageNotFoundError.
    """
    import importlib.metadata  # here: the catalog and other commands read the option table without it (~12 ms)

    dist = importlib.metadata.distribution(distribution)
    version = metadata_header(dist)[1]
    return version if version is not None else dist.version  # no header field: what importlib.metadata says


def distribution_version(*distributions: str) -> str | None:
    """The version of the first of ``distributions`` installed; None when none is."""
    import importlib.metadata

    for dist in distributions:
        try:
            return metadata_version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def installed_version(name: str) -> str | None:
    """Backend ``name``'s version from its distributions' metadata (no import); None when not installed.

    A module installed without package metadata (a TensorRT tarball on ``PYTHONPATH``) falls back
    to its ``__version__``, which imports it.
    """
    found = spec(name)
    version = distribution_version(*found.distributions)
    if version is None and importlib.util.find_spec(found.module) is not None:
        module = importlib.import_module(found.module)
        version = getattr(module, "__version__", None)
    return None if version is None else str(version)


def key_versions(name: str) -> dict[str, str]:
    """The versions of backend ``name`` that enter an engine's cache key, all from package metadata.

    ``backend`` and the module's name hold the library version; each of ``key_packages`` its own.
    """
    return spec_versions(spec(name), installed_version(name) or "not installed")


def spec_versions(row: BackendSpec, version: str) -> dict[str, str]:
    """:func:`key_versions` of a row (registered or not) whose library has ``version``."""
    out = {"backend": version, row.module: version, "python": platform.python_version()}
    for package in row.key_packages:
        out[package] = distribution_version(package) or "not installed"
    return out


class BackendBase:
    """What the registry's backends share: ``version()`` and ``versions()``, read once from the row's package
    metadata, and :meth:`build_config`.

    A backend whose row may be unregistered, or whose version comes from elsewhere, overrides
    :meth:`_row` or :meth:`_library_version`.
    """

    name: str
    if TYPE_CHECKING:  # each backend's own (the Backend protocol)
        def device(self, config: BuildConfig) -> dict[str, Any]: ...
        def validate(self, config: BuildConfig) -> None: ...
        def build(self, request: BuildRequest) -> BuildResult: ...

    def _row(self) -> BackendSpec:
        return spec(self.name)

    def _library_version(self) -> str:
        return installed_version(self.name) or "not installed"

    def version(self) -> str:
        return self._versions["backend"]

    def versions(self) -> dict[str, str]:
        return dict(self._versions)

    @functools.cached_property
    def _versions(self) -> dict[str, str]:
        return spec_versions(self._row(), self._library_version())

    def build_config(self, config: BuildConfig) -> BuildResult:
        """Validate and build a bare config (scripts and tests); ``build`` takes the request the provider made."""
        from pytest_trt.backends.request import BuildRequest

        return self.build(BuildRequest.create(self, config))


def check_options(backend: str, config: BuildConfig, product: str) -> None:
    """Refuse the options field of any other backend (``ort=`` given to TensorRT-RTX), read from the table."""
    for row in specs():
        field = row.options_field
        if field is None or row.name == backend or getattr(config, field, None) is None:
            continue
        owner = row.title.split(" (")[0]
        raise UnsupportedOption(
            f"BuildConfig {config.name!r}: {field}: {owner} options do not apply to {product}; drop `{field}=` or "
            f"use --trt-backend {row.name}", backend=backend, option=field)


def create_backend(name: str) -> Backend:
    """Instantiate backend ``name``; raises :class:`BackendUnavailable` when unknown or its library is missing."""
    found = spec(name)
    if not module_available(name):
        raise BackendUnavailable(
            f"backend {name!r} needs the Python module {found.module!r}, which is not installed; "
            f"install it with: pip install 'pytest-trt[{found.extra}]'",
            backend=name,
        )
    module_name, _, attribute = found.factory.partition(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    backend: Backend = factory(found)
    return backend


def choose_backend(requested: str) -> tuple[str, str]:
    """Resolve ``--trt-backend``; return (backend name, why it was chosen)."""
    if requested != AUTO:
        spec(requested)
        return requested, "requested with --trt-backend"
    order = auto_order()
    skipped: list[str] = []
    for name in order:
        if module_available(name):
            why = "auto: first importable of " + ", ".join(order)
            if skipped:
                why += f" ({', '.join(skipped)} not installed)"
            return name, why
        skipped.append(spec(name).module)
    listing = ", ".join(order[:-1]) + (" or " if len(order) > 1 else "") + order[-1]
    installs = "; ".join(f"{s.title}: pip install 'pytest-trt[{s.extra}]'" for s in specs())
    raise BackendUnavailable(f"no backend is installed: install one of {listing} ({installs})", backend=AUTO)
