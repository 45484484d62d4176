"""Deleting and archiving runs.

Deleting removes the run and every row that belongs to it, in one transaction, after taking the
run's background work (detection, the stall watch, reference drift) so that no loop writes a
detector state or an event for it meanwhile. Archiving keeps everything and only leaves the run
out of the runs list.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from holter_server.store import claims
from holter_server.store import runs as runs_store
from holter_server.store.models import RunRow


def delete_run(*, session: Session, run: RunRow) -> dict[str, int]:
    """Delete the run with its points, rollups, metrics, events, notes, mutes, detector states,
    deliveries and reference choices; returns the rows removed per table. The caller commits."""
    for task in (claims.Task.DETECTION, claims.Task.STALL_WATCH, claims.Task.REFERENCE_DRIFT):
        claims.wait_for_run(session=session, task=task, run_id=run.id)
    return runs_store.delete_run(session=session, run_id=run.id)


def archive_run(*, session: Session, run: RunRow, archived: bool) -> RunRow:
    """Archive the run, or bring it back to the runs list. The caller commits."""
    return runs_store.set_archived(session=session, run=run, archived=archived)
