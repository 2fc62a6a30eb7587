"""What kind of file a "build log" path really holds, before parsing it.

The log parser never fails on odd lines, so a compressed bundle, a binary,
an empty file or a UTF-16 text would parse into an empty record and look
like a build that did nothing.  :func:`log_encoding` picks the text encoding
(UTF-16 and UTF-32 with a byte-order mark, as Windows tools write logs,
and UTF-8 with or without one); :func:`check_log_file` refuses what is not
text, naming the file and what it is instead.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from ..errors import LogParseError

_HEAD = 64 * 1024
_BOMS = (  # longest first: the UTF-32 LE mark starts with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_MAGIC = (
    (b"\x1f\x8b", "gzip-compressed data (an audit bundle? use 'pytest-trt bundle show'; a compressed log? "
                  "decompress it first)"),
    (b"PK\x03\x04", "a zip archive (extract the log from it first)"),
    (b"BZh", "bzip2-compressed data (decompress it first)"),
    (b"\xfd7zXZ\x00", "xz-compressed data (decompress it first)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data (decompress it first)"),
    (b"\x7fELF", "an executable (ELF)"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file (a golden file? use 'pytest-trt golden show')"),
)


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(_HEAD)
    except IsADirectoryError:
        raise LogParseError(f"{path}: is a directory, not a build log; give the log file inside it",
                            path=str(path)) from None
    except OSError as e:
        raise LogParseError(f"cannot read build log {path}: {e.strerror or e}", path=str(path)) from None


def _utf16_without_bom(head: bytes) -> str | None:
    """``utf-16-le``/``-be`` when every other byte is NUL and the rest is ASCII (a log without its BOM)."""
    even, odd = head[0::2], head[1::2]
    if len(head) >= 4 and not odd.strip(b"\0") and even.isascii() and b"\0" not in even:
        return "utf-16-le"
    if len(head) >= 4 and not even.strip(b"\0") and odd.isascii() and b"\0" not in odd:
        return "utf-16-be"
    return None


def log_encoding(path: str | Path) -> str:
    """The encoding to read ``path`` with (``utf-8`` unless a byte-order mark or UTF-16 layout says otherwise)."""
    head = _head(Path(path))
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    return _utf16_without_bom(head) or "utf-8"


def check_log_file(path: str | Path) -> str:
    """Return the encoding of the text log at ``path``; raise :class:`LogParseError` when it is no text log."""
    p = Path(path)
    head = _head(p)
    if not head:
        raise LogParseError(f"{p}: is empty (0 bytes): not a build log; was the build's output redirected "
                            "to this file?", path=str(p))
    encoding = log_encoding(p)
    if encoding != "utf-8":
        return encoding
    for magic, what in _MAGIC:
        if head.startswith(magic):
            raise LogParseError(f"{p}: is {what}, not a text build log", path=str(p))
    if head[257:262] == b"ustar":
        raise LogParseError(f"{p}: is a tar archive, not a text build log; extract the log first", path=str(p))
    if b"\0" in head:
        raise LogParseError(f"{p}: holds NUL bytes: a binary file, not a text build log (an engine plan? "
                            "give the log written during its build)", path=str(p))
    return encoding
