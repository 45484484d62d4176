"""Reference runs. All SQL about them lives here."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from holter_server.store.models import ReferenceRow, RunRow
from holter_server.store.runs import now


def set_reference(*, session: Session, project: str, tag: str, run_id: str, by: str | None) -> ReferenceRow:
    """Make `run_id` the reference of the project (tag "") or of a tag in it."""
    row = session.get(ReferenceRow, (project, tag))
    if row is None:
        row = ReferenceRow(project=project, tag=tag, run_id=run_id, set_by=by, created_at=now())
        session.add(row)
    else:
        row.run_id, row.set_by, row.created_at = run_id, by, now()
    session.flush()
    return row


def list_references(*, session: Session, project: str | None) -> Sequence[ReferenceRow]:
    query = select(ReferenceRow).order_by(ReferenceRow.project, ReferenceRow.tag)
    if project is not None:
        query = query.where(ReferenceRow.project == project)
    return session.scalars(query).all()


def remove_reference(*, session: Session, project: str, tag: str) -> bool:
    row = session.get(ReferenceRow, (project, tag))
    if row is None:
        return False
    session.delete(row)
    session.flush()
    return True


def reference_for(*, session: Session, run: RunRow) -> str | None:
    """The run's reference: the first of its tags that has one, else its project's."""
    rows = {row.tag: row.run_id for row in list_references(session=session, project=run.project)}
    for tag in [*(run.tags or []), ""]:
        if tag in rows and rows[tag] != run.id:
            return rows[tag]
    return None
