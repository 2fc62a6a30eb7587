"""Capture the environment a session runs in, as JSON-able data for ``environment.json``.

What is captured: backend and toolchain versions, CUDA runtime and driver,
cuDNN, the GPU(s) (or the CPU model), OS, Python, the git commit and dirty
flag of the project under test, ``pip freeze`` and the values of an
allowlist of build-relevant environment variables.

What is never captured, by design:

* values of any environment variable outside :data:`ENV_ALLOWLIST`
  (tokens and passwords live in environment variables);
* anything that changes between two runs of the same build on the same
  machine: capture time, PIDs, free GPU memory, temperatures, the Python
  executable path, the user name.  A bundle is then a pure function of the
  build and the machine, so the same build gives byte-identical bundles;
* the host name, unless asked for (``trt_bundle_hostname = true``).

Probes never raise: a missing tool or library records ``None``.

Two probes are made cheap for the session that only reads its engines from the cache:
the versions of the installed distributions are kept in a memo file (``memo=``, the
recorder keeps it beside the bundles) keyed by a fingerprint of what
``importlib.metadata`` reads to find them (the ``sys.path`` entries, the names of their
``*.dist-info`` folders, which name the version, and the metadata file's size, mtime and
inode of each ``*.egg-info``), so installing, removing or upgrading a package, or another Python,
changes the key and the distributions are read again; and git runs once (``status
--porcelain=v2 --branch``: commit and dirty flag), only where a repository can be (a
``.git`` in the root folder or above, or ``GIT_DIR`` set).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_trt.backends import registry
from pytest_trt.common import hostprobe

ENVIRONMENT_SCHEMA = 1

#: Environment variables whose *values* are recorded: each can change which
#: device is used or how kernels behave.  Nothing else is read.
ENV_ALLOWLIST = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_MODULE_LOADING",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_CACHE_DISABLE",
    "NVIDIA_TF32_OVERRIDE",
    "CUBLAS_WORKSPACE_CONFIG",
    "OMP_NUM_THREADS",
    "PYTHONHASHSEED",
)

#: distributions whose versions are listed by name (the rest is in pip_freeze); every backend's
#: module is listed too, under the module's name (:func:`_packages`)
_PACKAGES = {
    "onnx": ("onnx",),
    "numpy": ("numpy",),
    "h5py": ("h5py",),
    "cuda-python": ("cuda-python", "cuda-bindings"),
    "pytest": ("pytest",),
    "pytest-trt": ("pytest-trt", "pytest_trt"),
}
_TIMEOUT_S = 10


def _packages() -> dict[str, tuple[str, ...]]:
    return {**{s.module: s.distributions for s in registry.specs()}, **_PACKAGES}


def _dist_version(*names: str, installed: dict[str, str | None] | None = None) -> str | None:
    """The version of the first of ``names`` installed (``installed``: :func:`installed_versions`, one pass)."""
    if installed is not None:
        return next((installed[key] for key in map(_canonical, names) if key in installed), None)
    return registry.distribution_version(*names)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


#: ``Name`` and ``Version`` of a distribution from its metadata's header lines (one reader for the project)
_name_and_version = registry.metadata_header


def installed_versions(*, memo: Path | None = None) -> dict[str, str | None]:
    """Canonical name -> version of every installed distribution (the first on ``sys.path`` wins, as for
    :func:`importlib.metadata.version`), in one pass: each ``metadata.version`` call walks the whole path.

    ``memo``: a JSON file keeping the answer under :func:`distributions_fingerprint`; read when the
    fingerprint is unchanged, else (re)written atomically.  A memo that cannot be read or written
    is ignored: the distributions are then read as without one.
    """
    fingerprint = distributions_fingerprint() if memo is not None else ""
    if memo is not None:
        known = _read_memo(memo, fingerprint)
        if known is not None:
            return known
    seen: dict[str, str | None] = {}
    for dist in metadata.distributions():
        name, version = _name_and_version(dist)
        if name:
            seen.setdefault(_canonical(name), version)
    if memo is not None and memo.parent.is_dir():
        from pytest_trt.common.fileio import write_json_atomic

        try:
            write_json_atomic(memo, {"schema": MEMO_SCHEMA, "fingerprint": fingerprint, "versions": seen}, fsync=False)
        except OSError:
            pass  # a read-only folder: the next session reads the distributions again
    return seen


#: layout of the memo file :func:`installed_versions` keeps
MEMO_SCHEMA = 1
#: the memo's name in the bundle folder (hidden, like the bundles' sidecars)
MEMO_FILE = ".environment.state.json"


def distributions_fingerprint() -> str:
    """sha256 over what decides :func:`installed_versions`: Python, the path finders, every ``sys.path`` entry
    and, in each, the name of each distribution's metadata folder, as ``importlib.metadata`` finds them.

    A ``*.dist-info`` folder is named for its distribution and version (the wheel format), so its name is
    enough; a ``*.egg-info`` one (setuptools' development installs) is not, so the size, mtime and inode of
    its ``PKG-INFO`` enter too.  One ``listdir`` per ``sys.path`` entry: about 1 ms for 120 distributions.
    """
    h = hashlib.sha256()
    finders = [type(f).__qualname__ for f in sys.meta_path if hasattr(f, "find_distributions")]
    h.update(repr((sys.version, sys.prefix, finders)).encode())
    for entry in sys.path:
        folder = entry or "."
        h.update(b"\0path\0" + os.fsencode(folder))
        try:
            names = sorted(os.listdir(folder))
        except OSError:  # a zip file (its stat says when it changes) or nothing at all
            h.update(_stat_key(folder))
            continue
        for name in names:
            low = name.lower()
            if low.endswith(".dist-info"):  # "<name>-<version>.dist-info": an install, removal or upgrade renames
                h.update(b"\0dist\0" + os.fsencode(name))
            elif low.endswith(".egg-info") or low == "egg-info":  # no version in the name: its file's stat
                child = os.path.join(folder, name)
                key = _stat_key(os.path.join(child, "PKG-INFO"))
                h.update(b"\0egg\0" + os.fsencode(name) + (key if key != b"-" else _stat_key(child)))
    return h.hexdigest()


def _stat_key(path: str) -> bytes:
    try:
        st = os.stat(path)
    except OSError:
        return b"-"
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}:{st.st_mode}".encode()


def _read_memo(memo: Path, fingerprint: str) -> dict[str, str | None] | None:
    try:
        data = json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != MEMO_SCHEMA or data.get("fingerprint") != fingerprint:
        return None
    versions = data.get("versions")
    if not isinstance(versions, dict) or not all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in versions.items()
    ):
        return None
    return versions


def pip_freeze(installed: dict[str, str | None] | None = None) -> list[str]:
    """``name==version`` of every installed distribution, sorted; no paths (they name users)."""
    seen = installed_versions() if installed is None else installed
    return [f"{k}=={seen[k]}" for k in sorted(seen)]


def _start(*cmd: str) -> subprocess.Popen[str] | None:
    """``cmd`` started (None when it cannot be); :func:`_finish` collects it, so several run at once."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except (OSError, subprocess.SubprocessError):
        return None


def _finish(proc: subprocess.Popen[str] | None) -> str | None:
    """The standard output of a command :func:`_start` started, None if it failed or took too long."""
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        proc.kill()
        proc.communicate()
        return None
    return out if proc.returncode == 0 else None


def backend_versions(backend: str | None, *, installed: dict[str, str | None] | None = None) -> dict[str, Any]:
    """Name and library version of ``backend``, from package metadata (:func:`registry.installed_version`).

    Capturing never imports the backend library, so the result is the same whether the session built
    engines (library loaded) or took them all from the cache (not loaded): identical builds give
    identical bundles.  ``onnx_parser`` is therefore always None here; each build records its parser
    version with the engine (``build.json``: ``versions.onnx_parser``).
    """
    spec = registry.find(backend)
    version = None
    if spec is not None:  # from the one metadata pass when given; else (or not found there) as the registry finds it
        version = _dist_version(*spec.distributions, installed=installed) if installed is not None else None
        version = version or registry.installed_version(spec.name)
    return {"name": backend, "version": version, "onnx_parser": None}


def _gpus() -> list[dict[str, Any]]:
    """Every GPU of the machine (not only the visible ones: the environment is the machine's)."""
    return [
        {"name": g.name, "compute_capability": g.compute_capability, "memory_total_mib": g.memory_mib,
         "driver_version": g.driver, "pci_bus_id": g.pci_bus_id}
        for g in hostprobe.all_gpus()
    ]


def _cuda(gpus: list[dict[str, Any]], installed: dict[str, str | None]) -> dict[str, Any]:
    probed = hostprobe.cuda_versions()
    runtime = probed.runtime or _dist_version("nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12",
                                              "nvidia-cuda-runtime", installed=installed)
    return {
        "runtime": runtime,
        "driver_cuda": probed.driver_cuda,  # highest CUDA version the driver supports
        "driver": gpus[0]["driver_version"] if gpus else None,
        "cudnn": _dist_version("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn", installed=installed),
    }


def _cpu() -> dict[str, Any]:
    cpu = hostprobe.cpu()
    return {"model": cpu.model, "count": cpu.count, "machine": cpu.machine}


def _os() -> dict[str, Any]:
    try:
        distro = platform.freedesktop_os_release().get("PRETTY_NAME")
    except OSError:
        distro = None
    libc, libc_version = platform.libc_ver()
    return {
        "system": platform.system(),
        "release": platform.release(),
        "distribution": distro,
        "libc": f"{libc} {libc_version}".strip() or None,
    }


def git_state(rootdir: Path | None) -> dict[str, Any]:
    """Commit and dirty flag of the repository holding ``rootdir`` (``None`` outside git).

    Dirty means tracked files differ from the commit; untracked files are
    ignored, or writing the bundle folder itself would make the next run dirty.
    """
    return _git_finish(_git_start(rootdir))


_GitProbe = tuple[Path, "subprocess.Popen[str] | None"]
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def _git_start(rootdir: Path | None) -> _GitProbe | None:
    """One git command started (it runs while the caller reads package metadata): ``status --porcelain=v2
    --branch`` gives both the commit (``# branch.oid``) and the changed tracked files."""
    if rootdir is None or not _maybe_in_repository(rootdir):
        return None
    return rootdir, _start("git", "-C", str(rootdir), "status", "--porcelain=v2", "--branch", "--untracked-files=no")


def _maybe_in_repository(rootdir: Path) -> bool:
    """False only where git cannot find a repository: no ``.git`` (folder or file) in ``rootdir`` or any folder
    above it, none of them a bare repository, and no ``GIT_DIR``.  A git process (~2 ms, more under load) is
    then not started only to fail."""
    if "GIT_DIR" in os.environ:
        return True
    try:
        folder = rootdir.resolve()
    except OSError:
        return True
    for candidate in (folder, *folder.parents):
        if os.path.lexists(candidate / ".git"):
            return True
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir() and (candidate / "refs").is_dir():
            return True
    return False


def _git_finish(probe: _GitProbe | None) -> dict[str, Any]:
    if probe is None:
        return {"commit": None, "dirty": None}
    rootdir, status = probe
    out = _finish(status)
    lines = out.splitlines() if out is not None else []
    oid = next((line[len("# branch.oid "):] for line in lines if line.startswith("# branch.oid ")), None)
    if oid == "(initial)":  # a repository without a commit
        return {"commit": None, "dirty": None}
    if oid is not None and _SHA.fullmatch(oid):
        return {"commit": oid, "dirty": any(not line.startswith("#") for line in lines)}
    # failed (not a repository), or a git without porcelain v2 (before 2.11): the two plain commands
    commit = _finish(_start("git", "-C", str(rootdir), "rev-parse", "--verify", "-q", "HEAD"))
    if commit is None:
        return {"commit": None, "dirty": None}
    plain = _finish(_start("git", "-C", str(rootdir), "status", "--porcelain", "--untracked-files=no"))
    return {"commit": commit.strip(), "dirty": None if plain is None else bool(plain.strip())}


def capture_environment(
    *, backend: str | None = None, rootdir: Path | None = None, include_hostname: bool = False,
    memo: Path | None = None,
) -> dict[str, Any]:
    """Everything :mod:`pytest_trt.audit.environment` promises, as a JSON-able dict.

    ``memo``: the file keeping the installed distributions' versions between sessions (:func:`installed_versions`).
    """
    git = _git_start(rootdir)
    installed = installed_versions(memo=memo)
    gpus = _gpus()
    env = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    data: dict[str, Any] = {
        "schema": ENVIRONMENT_SCHEMA,
        "backend": backend_versions(backend, installed=installed),
        "packages": {key: _dist_version(*names, installed=installed) for key, names in sorted(_packages().items())},
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation()},
        "cuda": _cuda(gpus, installed),
        "gpus": gpus,
        "cpu": _cpu(),
        "os": _os(),
        "git": _git_finish(git),
        "env": env,
        "pip_freeze": pip_freeze(installed),
    }
    if include_hostname:
        data["hostname"] = socket.gethostname()
    return data
