"""Reading a file that may still grow, from where the last read stopped.

A `FileTail` remembers how far it has read (a byte offset) and which file it read: its device
and inode, and a checksum of the bytes just before the offset. A file replaced under the same
name (a log rotated), cut shorter than the offset, or cut and written again past it (a job re-run
with `> log`: same inode, and by the next look it may have grown past the old offset) is read
again from its start, and the tail says so. Only whole units are taken: a line without its
newline, or a record whose bytes are not all there yet, waits for the next read, unless the file
is known to be complete (`final`).

Only regular files are opened (`holter_readers.paths`): a FIFO, a device or a socket at the path
is said once and not read, and a tail with a `root` (a file found below a followed folder) does
not read a file that resolves outside it.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from holter_readers.paths import NOT_REGULAR, NotRegularFile, inside, open_regular

CHUNK = 1 << 20
# A line longer than this is not a row of metrics (a CSV header of 10,000 long column names is
# under 4 MiB): it is not held in memory, and the reader says so. Text logs hold far shorter
# lines (textlog.MAX_LINE).
MAX_LINE = 16 << 20
# How many bytes before the offset the checksum covers: a few lines of a text log, several
# TensorBoard records; read once per read of the file.
CHECK_BYTES = 1024


class FileTail:
    """How far one file has been read; `lines()` reads the whole lines written since, `open()`
    gives the file at the offset for a reader of records.

    `say` is told what a user should hear once: the file was truncated or replaced (read again
    from its start), is not a regular file, or resolves outside `root`. `restarted` is set when
    the file is read again from its start, for the reader to start over too (and clear it).
    """

    def __init__(self, path: Path, *, root: Path | None = None, say: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.root = root
        self.say = say
        self.offset = 0
        self.identity: tuple[int, int] | None = None
        # (n, CRC-32) of the n bytes before `offset`, taken when `offset` was `_checked_at`
        self.check: tuple[int, int] | None = None
        self._checked_at = 0
        self.restarted = False
        self._refused: str | None = None  # why the path is not read, once said

    def position(self) -> dict[str, Any]:
        """What to keep to go on after a restart (JSON-able)."""
        check = self.check if self.check is not None and self._checked_at == self.offset else None
        return {
            "offset": self.offset,
            "identity": list(self.identity) if self.identity else None,
            "check": list(check) if check else None,
        }

    def restore(self, position: dict[str, Any]) -> None:
        """Go on from a `position()` kept by an earlier process (one kept before the checksum
        was: the device, inode and size alone tell a file replaced or cut)."""
        self.offset = int(position.get("offset") or 0)
        identity = position.get("identity")
        self.identity = (int(identity[0]), int(identity[1])) if identity else None
        check = position.get("check")
        self.check = (int(check[0]), int(check[1])) if check else None
        self._checked_at = self.offset

    def size(self) -> int:
        """The file's size now (0 when it is not there)."""
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def short_of(self, end: int) -> bool:
        """Whether the file read so far (the same file, not cut) still holds fewer than `end`
        bytes: a reader waiting for the rest of a record asks this instead of reading again what
        is there. A file replaced or cut answers False, for `open()` to notice it."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return True
        return (stat.st_dev, stat.st_ino) == self.identity and self.offset <= stat.st_size < end

    def open(self) -> BinaryIO | None:
        """The file opened for reading at the offset, or None when it is not there (yet), is not
        a regular file, or resolves outside `root`. A file that is not the one read before, is
        shorter than the offset, or whose bytes before the offset changed, is read from its
        start (`restarted`)."""
        if self.root is not None and not inside(self.path, self.root):
            self._refuse(f"{self.path} resolves outside {self.root}; it is not read")
            return None
        try:
            handle = open_regular(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except NotRegularFile:
            self._refuse(f"{self.path} {NOT_REGULAR}; it is not read")
            return None
        self._refused = None
        stat = os.fstat(handle.fileno())
        identity = (stat.st_dev, stat.st_ino)
        if self.identity is not None and (
            identity != self.identity or stat.st_size < self.offset or not self._same_bytes(handle)
        ):
            self.offset = 0
            self.check = None
            self.restarted = True
            if self.say is not None:
                self.say(f"{self.path} was truncated or replaced; reading it again from the start")
        self.identity = identity
        handle.seek(self.offset)
        return handle

    def mark(self, handle: BinaryIO) -> None:
        """Take the checksum of the bytes before the offset, from the file still open: a reader
        calls this when it stops reading (the next `open()` compares)."""
        count = min(CHECK_BYTES, self.offset)
        handle.seek(self.offset - count)
        data = handle.read(count)
        self.check = (count, zlib.crc32(data)) if len(data) == count else None
        self._checked_at = self.offset

    def _same_bytes(self, handle: BinaryIO) -> bool:
        """Whether the bytes before the offset are those read (True when that cannot be told)."""
        if self.check is None or self._checked_at != self.offset or not self.offset:
            return True
        count, crc = self.check
        handle.seek(self.offset - count)
        data = handle.read(count)
        return len(data) == count and zlib.crc32(data) == crc

    def _refuse(self, message: str) -> None:
        if self._refused != message and self.say is not None:
            self.say(message)
        self._refused = message

    def lines(
        self, *, final: bool = False, carriage_returns: bool = False, max_line: int | None = None
    ) -> Iterator[bytes | None]:
        """Each whole line written after the offset, without its line break; the offset is past a
        line when it is handed over. A line longer than `max_line` (default `MAX_LINE`) is not
        held: None stands for it. With `carriage_returns`, `\r` ends a line too (progress bars
        redraw with it). A last line without a newline is taken only when `final`."""
        limit = MAX_LINE if max_line is None else max_line
        handle = self.open()
        if handle is None:
            return
        find = _line_end if carriage_returns else _newline
        with handle:
            try:
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
                        length = end - start
                        line = None if skipping or length > limit else data[start:end]
                        start = end + 1
                        self.offset += length + 1
                        skipping = False
                        yield line
                    pending = data[start:]
                    if len(pending) > limit:
                        # an endless line (binary data, a progress bar without breaks): not held
                        self.offset += len(pending)
                        pending = b""
                        skipping = True
                if final and (pending or skipping):
                    self.offset += len(pending)
                    yield None if skipping else pending
            finally:
                self.mark(handle)


def _newline(data: bytes, start: int) -> int:
    return data.find(b"\n", start)


def _line_end(data: bytes, start: int) -> int:
    """The index of the next `\\n` or `\\r` at or after `start`, -1 when there is none."""
    newline = data.find(b"\n", start)
    ret = data.find(b"\r", start, newline if newline >= 0 else len(data))
    return ret if ret >= 0 else newline
