"""`holter sync [PATH | RUN ...]`: send runs kept on disk to the service.

An offline run (`holter.init(mode="offline")`) keeps everything it logs in its spool folder
(`<spool root>/<run id>/`); so does an online run whose service was away when it ended. Sync
sends each folder's requests oldest first, exactly as the run's own sender would have, and
deletes each once the service took it; a request the service refuses is kept under the
folder's `rejected/`. Sending twice is harmless: the service stores a point once. A folder
holds its own run's requests only (`spool.own_request`: the run's registration, points,
summary, alerts and finish, under the folder's run id): anything else found there is set aside
in `rejected/` unsent, and said, since sync sends with the syncing person's key.

PATH may be a run's spool folder or a folder of them (a spool root, or the `DIR/holter-spool`
of `init(dir=DIR)`); a bare RUN id is looked up in the default spool root. With nothing given,
every run in the default spool root ($HOLTER_SPOOL_DIR, else ~/.cache/holter/spool) is sent.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from holter.sender import Control, Sender, decode_entry
from holter.spool import RUN_ID, Spool, default_spool_root, own_request, run_of_folder
from holter.transport import Transport


@dataclass(frozen=True)
class Synced:
    """What became of one run's spool."""

    run_id: str
    requests: int
    stored: int
    refused: int
    left: int
    foreign: int = 0  # requests that were not the run's own: set aside, never sent


def spool_folders(targets: Sequence[str]) -> list[Path]:
    """The run spool folders named by `targets` (see the module doc); a target naming nothing is an error."""
    if not targets:
        return _runs_under(default_spool_root())
    found: list[Path] = []
    for target in targets:
        path = Path(target)
        if not path.exists() and os.sep not in target:
            path = default_spool_root() / target
        if not path.is_dir():
            raise FileNotFoundError(f"{target}: neither a spool folder nor a run id in {default_spool_root()}")
        found.extend([path] if len(Spool(path.parent, path.name)) else _runs_under(path))
    return found


def _runs_under(root: Path) -> list[Path]:
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and len(Spool(root, p.name)))
    except OSError:
        return []


def sync_folder(folder: Path, url: str, api_key: str | None) -> Synced:
    """Send one run's spool folder; the run's id is the folder's name (a rank's folder, before its
    `@rank<r>`). Requests that are not the
    run's own are set aside in `rejected/` first, unsent."""
    spool = Spool(folder.parent, folder.name)
    pending = list(spool.pending())
    run_id = run_of_folder(folder.name)  # a rank of a job spools in `<run id>@rank<r>`
    if RUN_ID.fullmatch(run_id) is None:  # no run has this id: nothing in it is a run's own
        for entry in pending:
            spool.set_aside(entry)
        return Synced(run_id=run_id, requests=len(pending), stored=0, refused=0, left=0, foreign=len(pending))
    foreign = 0
    for entry in pending:
        try:
            path, body = decode_entry(entry.read_bytes())
        except (OSError, UnicodeDecodeError):
            path, body = "", b""
        if not own_request(run_id, path, body):
            spool.set_aside(entry)
            foreign += 1
    pending = list(spool.pending())
    register = Control("/api/v1/runs", {"id": run_id})
    if pending:
        path, body = decode_entry(pending[0].read_bytes())
        if path == "/api/v1/runs":  # the run's registration: sent again if the service lost the run
            register = Control(path, json.loads(body))
    sender = Sender(transport=Transport(url, api_key), spool=spool, run_id=run_id, register=register)
    sender.send_spooled()
    delivery = sender.delivery()
    return Synced(
        run_id=run_id,
        requests=len(pending) + foreign,
        stored=delivery.stored,
        refused=delivery.refused,
        left=len(spool),
        foreign=foreign,
    )


def run(targets: Sequence[str], url: str, api_key: str | None) -> int:
    """Sync every folder named; 0 when all were sent, 1 when something was left (the service is away)."""
    try:
        folders = spool_folders(targets)
    except FileNotFoundError as exc:
        print(f"holter sync: {exc}", file=sys.stderr)
        return 2
    if not folders:
        print("holter sync: nothing to send")
        return 0
    status = 0
    for folder in folders:
        done = sync_folder(folder, url, api_key)
        sent = done.requests - done.left - done.foreign
        line = f"{done.run_id}: {sent} of {done.requests} requests sent, {done.stored:,} points stored"
        if done.foreign:
            print(
                f"holter sync: {folder}: {done.foreign} request(s) are not run {done.run_id!r}'s own (another run's "
                f"path, or no run's): not sent, kept in {folder / 'rejected'}",
                file=sys.stderr,
            )
            line += f", {done.foreign} not this run's own set aside (kept in {folder / 'rejected'})"
        if done.refused:
            line += f", {done.refused:,} refused (kept in {folder / 'rejected'})"
        if done.left:
            line += f"; {done.left} left in {folder} (the service at {url} is away: run holter sync again)"
            status = 1
        print(line)
    print(f"open: {url.rstrip('/')}/runs/<ID>")
    return status
