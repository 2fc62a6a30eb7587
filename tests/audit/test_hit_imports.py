"""What a cache-hit session does not import: the archive writer (tarfile, gzip), the pins-file reader
(tomllib) and the log readers (their dialect patterns) load only when a bundle is written, a pins file
is read or a log is parsed."""

from __future__ import annotations

import subprocess
import sys


def test_bundle_naming_and_inputs_digest_import_no_archive_writer_and_config_no_toml_reader():
    code = (
        "import sys\n"
        "from pytest_trt.audit import recorder, sidecar\n"
        "from pytest_trt.audit.bundle import bundle_name, inputs_digest, canonical_json\n"
        "from pytest_trt.config import BuildConfig\n"
        "import pytest_trt.engines.engine, pytest_trt.engines.provider, pytest_trt.engines.cache\n"
        "print(sorted({'tarfile', 'tomllib', 'pytest_trt.audit.archive', 'pytest_trt.buildlog.dialects',\n"
        "              'pytest_trt.buildlog.listings'} & set(sys.modules)))\n"
        "from pytest_trt.audit.bundle import bundle_members\n"
        "import pytest_trt.audit.archive\n"
        "print('tarfile' in sys.modules)\n"  # positive control: the writer does pull it in
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["[]", "True"]
