"""Reading a file that may still grow, from where the last read stopped.

A `FileTail` remembers how far it has read (a byte offset) and which file it read (its device
and inode): a file replaced under the same name (a log rotated, a job restarted with `>`) or cut
shorter than the offset is read again from its start. Only whole units are taken: a line without
its newline, or a record whose bytes are not all there yet, waits for the next read, unless the
file is known to be complete (`final`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHUNK = 1 << 20
# A line longer than this is not a metrics line: it is not held in memory (the reader says so).
MAX_LINE = 16 << 20


class FileTail:
    """How far one file has been read; `lines()` reads the whole lines written since."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.identity: tuple[int, int] | None = None
        self.restarted = False  # set when the file was replaced or cut since the last read

    def position(self) -> dict[str, Any]:
        """What to keep to go on after a restart (JSON-able)."""
        return {"offset": self.offset, "identity": list(self.identity) if self.identity else None}

    def restore(self, position: dict[str, Any]) -> None:
        """Go on from a `position()` kept by an earlier process."""
        self.offset = int(position.get("offset") or 0)
        identity = position.get("identity")
        self.identity = (int(identity[0]), int(identity[1])) if identity else None

    def size(self) -> int:
        """The file's size now (0 when it is not there)."""
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def open(self) -> Any:
        """The file opened for reading at the offset, or None when it is not there (yet). A file
        that is not the one read before, or is shorter than the offset, is read from its start."""
        try:
            handle = self.path.open("rb")
        except (FileNotFoundError, NotADirectoryError):
            return None
        stat = os.fstat(handle.fileno())
        identity = (stat.st_dev, stat.st_ino)
        if self.identity is not None and (identity != self.identity or stat.st_size < self.offset):
            self.offset = 0
            self.restarted = True
        self.identity = identity
        handle.seek(self.offset)
        return handle

    def lines(self, *, final: bool = False, carriage_returns: bool = False) -> Iterator[bytes | None]:
        """Each whole line written after the offset, without its line break; the offset is past a
        line when it is handed over. A line longer than `MAX_LINE` is not held: None stands for
        it. With `carriage_returns`, `\r` ends a line too (progress bars redraw with it). A last
        line without a newline is taken only when `final`."""
        handle = self.open()
        if handle is None:
            return
        find = _line_end if carriage_returns else _newline
        with handle:
            pending = b""
            skipping = False
            while True:
                chunk = handle.read(CHUNK)
                if not chunk:
                    break
                data = pending + chunk if pending else chunk
                start = 0
                while True:
                    end = find(data, start)
                    if end < 0:
                        break
                    line = data[start:end]
                    start = end + 1
                    self.offset += len(line) + 1
                    if skipping:
                        skipping = False
                        yield None
                    else:
                        yield line
                pending = data[start:]
                if len(pending) > MAX_LINE:
                    # an endless line (binary data, a progress bar without breaks): not held
                    self.offset += len(pending)
                    pending = b""
                    skipping = True
            if final and (pending or skipping):
                self.offset += len(pending)
                yield None if skipping else pending


def _newline(data: bytes, start: int) -> int:
    return data.find(b"\n", start)


def _line_end(data: bytes, start: int) -> int:
    """The index of the next `\\n` or `\\r` at or after `start`, -1 when there is none."""
    newline = data.find(b"\n", start)
    ret = data.find(b"\r", start, newline if newline >= 0 else len(data))
    return ret if ret >= 0 else newline
