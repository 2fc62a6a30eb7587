"""Log files in chunks: line ends made uniform, and the runs of whole lines each chunk holds.

:class:`~pytest_trt.buildlog.parser.LogParser` scans each run with one regex pass, so that the lines
that cannot matter are skipped inside the regex engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import AnyStr, BinaryIO


def universal_newlines(f: BinaryIO, chunk_bytes: int) -> Iterator[bytes]:
    """``f`` in chunks with CRLF and CR turned into LF (a CR that ends a chunk waits for the next byte)."""
    while chunk := f.read(chunk_bytes):
        if b"\r" in chunk:
            # a CR that ends the chunk may be the first half of a CRLF; the byte read to tell can be a CR too
            while chunk.endswith(b"\r") and (more := f.read(1)):
                chunk += more
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        yield chunk


def scan_chunks(chunks: Iterable[AnyStr], newline: AnyStr, scan: Callable[[AnyStr, int, int], None]) -> None:
    """Call ``scan(buffer, start, end)`` on every run of whole lines of ``chunks`` (text or bytes).

    ``buffer[start:end]`` is ``newline`` followed by whole lines, without the last one's newline.
    """
    # Each chunk is scanned in place (no copy): the regex engine finds every line's leading newline at
    # C speed from the chunk's first newline to its last.  The line cut by the chunk's start (the
    # previous chunk's tail plus this chunk's head) is scanned on its own.
    empty = newline[:0]
    pending: list[AnyStr] = []  # the start of a line whose newline is not read yet
    for chunk in chunks:
        first = chunk.find(newline)
        if first < 0:  # one line longer than a chunk: keep reading
            pending.append(chunk)
            continue
        head = newline + empty.join(pending) + chunk[:first]
        scan(head, 0, len(head))
        last = chunk.rfind(newline)
        if last > first:
            scan(chunk, first, last)
        pending = [chunk[last + 1:]]
    if any(pending):
        tail = newline + empty.join(pending)
        scan(tail, 0, len(tail))
