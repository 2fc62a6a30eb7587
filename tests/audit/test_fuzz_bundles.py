"""Bundles and every CLI command, fuzzed: any damaged or hand-edited bundle is refused with a
BundleIntegrityError (exit 1) or verifies, and whatever verifies is shown and compared without an exception.

The commands run in-process through :func:`pytest_trt.cli.main` (a subprocess per example would be too slow);
the subprocess behaviour of each command is covered in ``test_cli_bad_inputs.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_trt.audit.verify import verify_bundle
from pytest_trt.cli import EXIT_FAILED, EXIT_FILE, EXIT_OK, main
from pytest_trt.errors import BundleIntegrityError
from tests.audit.hostile import recrafted
from tests.fuzz import fuzz_settings

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _run(*args: str | Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue() + err.getvalue()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-bundles")


_EDIT = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 20), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 1 << 20), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 20), st.integers(0, 255)),
)


def _apply(raw: bytes, edits: list[tuple[str, int, int]]) -> bytes:
    for kind, pos, value in edits:
        if not raw:
            break
        pos %= len(raw)
        if kind == "flip":
            raw = raw[:pos] + bytes([raw[pos] ^ value]) + raw[pos + 1:]
        elif kind == "truncate":
            raw = raw[:pos]
        else:
            raw = raw[:pos] + bytes([value]) + raw[pos:]
    return raw


@fuzz_settings
@given(st.lists(_EDIT, min_size=1, max_size=4))
def test_fuzz_damaged_bundle_bytes_in_every_command(small_signed_bundle: Path, scratch: Path,
                                                    edits: list[tuple[str, int, int]]) -> None:
    raw = small_signed_bundle.read_bytes()
    damaged = _apply(raw, edits)
    path = scratch / "damaged.tar.gz"
    path.write_bytes(damaged)
    for command in (("bundle", "verify", path), ("bundle", "show", path), ("bundle", "diff", small_signed_bundle, path),
                    ("log", "parse", path)):  # a bundle given to log parse: refused as compressed data
        code, text = _run(*command)
        if damaged == raw and command[0] == "bundle":
            assert code in (EXIT_OK, EXIT_FAILED if command[1] == "diff" else EXIT_OK), text
        elif command[0] == "bundle":
            assert code == EXIT_FAILED and str(path) in text, (command, text)
        else:
            assert code in (EXIT_OK, EXIT_FILE), text


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a JSON document, containers included."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc[:3]):
            out += _paths(value, (*prefix, i))
    return out


def _edit(path: tuple[Any, ...], action: str, value: Any):  # type: ignore[no-untyped-def]
    def edit(doc: Any) -> None:
        for key in path[:-1]:
            doc = doc[key]
        if action == "delete" and isinstance(doc, dict):
            del doc[path[-1]]
        else:
            doc[path[-1]] = value
    return edit


@fuzz_settings
@given(st.data())
def test_fuzz_hand_edited_bundles_in_every_command(small_signed_bundle: Path, scratch: Path, data: Any) -> None:
    from tests.audit.conftest import read_members

    members = read_members(small_signed_bundle)
    member = data.draw(st.sampled_from(["build.json", "config.json", "environment.json", "golden.json"]))
    doc = json.loads(members[member])
    key_path = data.draw(st.sampled_from(_paths(doc)))
    action = data.draw(st.sampled_from(["set", "delete"]))
    value = data.draw(JSON)
    path = recrafted(small_signed_bundle, scratch / "edited.tar.gz", {member: _edit(key_path, action, value)})
    try:
        verify_bundle(path)
    except BundleIntegrityError as exc:
        assert exc.message.startswith(f"{path}: ")
        code, text = _run("bundle", "show", path)
        assert code == EXIT_FAILED and str(path) in text
        return
    code, text = _run("bundle", "show", path)
    assert code == EXIT_OK, text
    code, text = _run("bundle", "show", "--json", path)
    assert code == EXIT_OK and json.loads(text)["path"] == str(path)
    code, text = _run("bundle", "diff", small_signed_bundle, path)
    assert code in (EXIT_OK, EXIT_FAILED) and text.startswith(f"--- {small_signed_bundle}")
    code, text = _run("bundle", "diff", "--json", path, small_signed_bundle)
    assert code in (EXIT_OK, EXIT_FAILED) and "old" in json.loads(text)


@fuzz_settings
@given(st.binary(max_size=300))
def test_fuzz_any_file_in_every_cli_command(scratch: Path, data: bytes) -> None:
    path = scratch / "anything"
    path.write_bytes(data)
    for command in (("bundle", "verify", path), ("bundle", "show", path), ("log", "parse", path),
                    ("log", "parse", "--json", path), ("golden", "show", path)):
        code, text = _run(*command)
        assert code in (EXIT_OK, EXIT_FAILED, EXIT_FILE), (command, text)
        assert "Traceback" not in text
