"""Standard output for the command line: quiet once the reader of a pipe has gone."""

from __future__ import annotations

import os
from typing import Any


class PipeSafe:
    """stdout that goes quiet when the reader leaves (`pytest-trt bundle diff A B | head -1`).

    The command still runs to its end and its exit code stands (1 for "differences found"), so a
    pipeline under `set -o pipefail` keeps the verdict; what is left to print goes to /dev/null.
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return int(self.stream.write(text))
            except BrokenPipeError:
                self._mute()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._mute()

    def _mute(self) -> None:
        self.broken = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())  # the interpreter's last flush then has nowhere to fail
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
