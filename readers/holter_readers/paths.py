"""What a reader opens: regular files only, and below a followed folder only what lies inside it.

A FIFO, a device or a socket is never opened. `open()` of a FIFO waits until something opens it
for writing, and a follower stuck there cannot even be stopped (Python retries the interrupted
call after its signal handler has run, so Ctrl-C or SIGTERM only sets a flag that is never
looked at); a device may be read forever (/dev/zero) or act on being opened (a tape rewinds).
The path is checked before it is opened, then opened without blocking (O_NONBLOCK, which a
regular file ignores) and checked again once open, so that a FIFO swapped in between is refused
too.

A file or folder below a followed folder that resolves outside it (a symlink out of it) is not
read: following a folder reads what the job writes there, not whatever a link in it points to.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

# Said of a path that is not a regular file (after the path).
NOT_REGULAR = "is not a regular file (a FIFO, a device or a socket)"
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


class NotRegularFile(OSError):
    """The path is there, but is not a regular file: it is not opened."""


def is_special(path: Path) -> bool:
    """Whether `path` is there and is neither a regular file nor a folder (symlinks followed)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading in binary; raises NotRegularFile when it is not a regular file
    (never blocking on a FIFO), FileNotFoundError (or NotADirectoryError) when it is not there."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise NotRegularFile(f"{path} {NOT_REGULAR}")
    try:
        descriptor = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket swapped in since the check
            raise NotRegularFile(f"{path} {NOT_REGULAR}") from None
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise NotRegularFile(f"{path} {NOT_REGULAR}")
    return os.fdopen(descriptor, "rb")


def inside(path: Path, root: Path) -> bool:
    """Whether `path`, every symlink resolved, is `root` (resolved too) or lies below it."""
    real = os.path.realpath(path)
    top = os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)
