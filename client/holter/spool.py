"""An on-disk spool of batches the service has not acknowledged yet.

Each batch is one file named by a monotonically increasing sequence number, written atomically
(temporary file, then rename), so a crash leaves either the whole batch or nothing. Files are
replayed in name order and deleted only after the service acknowledged them; because the
service stores a point once per (run, metric, step), replaying a batch that did arrive before a
crash is harmless. A later process for the same run finds and replays the same folder.

A spool holds its own run's requests and nothing else (`own_request`): the run's registration
and its points, summary, alerts, non-finite reports and finish. `holter sync` sends a folder
with the syncing person's key, so anything else in it (another run's path, a channel, a key) is
set aside, never sent.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

_BATCH_FILE = re.compile(r"^(\d{20})\.json$")
# A run id as the service takes it (schemas/runs.py RUN_ID_PATTERN, 64 characters at most).
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
# What a run's own sender spools after its registration (holter/run.py), under /api/v1/runs/<id>/.
RUN_REQUESTS = ("points", "summary", "alerts", "nonfinite", "finish")
# A rank of a distributed job other than 0 spools apart from the others, in `<run id>@rank<r>`.
RANK_SPOOL = "@rank"


def run_of_folder(name: str) -> str:
    """The run id of a spool folder's name: itself, or the part before a rank's `@rank<r>`."""
    return name.partition(RANK_SPOOL)[0]


def own_request(run_id: str, path: str, body: bytes) -> bool:
    """True when a spooled request is one the run `run_id` itself would send: its registration
    (`POST /api/v1/runs` naming this id) or one of `RUN_REQUESTS` under its own path."""
    if RUN_ID.fullmatch(run_id) is None:
        return False
    if path == "/api/v1/runs":
        try:
            document = json.loads(body)
        except ValueError:
            return False
        return isinstance(document, dict) and document.get("id") == run_id
    return path in {f"/api/v1/runs/{run_id}/{name}" for name in RUN_REQUESTS}


def default_spool_root() -> Path:
    """Where spools live: $HOLTER_SPOOL_DIR, else the user's cache directory."""
    if configured := os.environ.get("HOLTER_SPOOL_DIR"):
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "holter" / "spool"


class Spool:
    """The spool folder of one run."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.path = Path(root) / run_id
        self._last_seq = 0

    def put(self, body: bytes) -> Path:
        """Write one batch durably and return its file; OSError when the disk will not take it."""
        self.path.mkdir(parents=True, exist_ok=True)
        # Nanosecond time keeps order across processes writing the same run's spool in turn.
        seq = max(time.time_ns(), self._last_seq + 1)
        self._last_seq = seq
        final = self.path / f"{seq:020d}.json"
        tmp = self.path / f".{seq:020d}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)  # a full disk leaves no half-written batch behind
            raise
        return final

    def pending(self) -> Iterator[Path]:
        """Spooled batch files, oldest first (none when the folder cannot be read)."""
        try:
            return iter(sorted(p for p in self.path.iterdir() if _BATCH_FILE.match(p.name)))
        except OSError:  # absent, not a folder, or unreadable: nothing was spooled there
            return iter(())

    def __len__(self) -> int:
        return sum(1 for _ in self.pending())

    @staticmethod
    def remove(batch_file: Path) -> None:
        """Forget a batch the service acknowledged."""
        batch_file.unlink(missing_ok=True)

    def set_aside(self, batch_file: Path) -> Path:
        """Move a batch that must not be sent to the folder's `rejected/`, for a person to look at."""
        rejected = self.path / "rejected"
        rejected.mkdir(parents=True, exist_ok=True)
        target = rejected / batch_file.name
        os.replace(batch_file, target)
        return target
