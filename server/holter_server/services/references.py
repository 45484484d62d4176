"""Reference runs as the API sets and reads them: a project's (or a tag's) known-good run that
its other runs are compared with (`services/reference_drift.py` does the comparing).

The routes call these rather than the store (the import contract `routes reach the store through
a service`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from holter_server.store import references as references_store
from holter_server.store.models import ReferenceRow, RunRow

NO_TAG = ""  # the project's own reference is stored under the empty tag


def set_reference(*, session: Session, project: str, tag: str | None, run: RunRow, by: str | None) -> ReferenceRow:
    """Make the run the reference of the project (`tag` None) or of a tag in it."""
    return references_store.set_reference(session=session, project=project, tag=tag or NO_TAG, run_id=run.id, by=by)


def references_of_project(*, session: Session, project: str) -> Sequence[ReferenceRow]:
    """The project's references, the project's own first, then by tag."""
    return references_store.list_references(session=session, project=project)


def remove_reference(*, session: Session, project: str, tag: str | None) -> bool:
    """Remove the project's (`tag` None) or a tag's reference; False when there was none."""
    return references_store.remove_reference(session=session, project=project, tag=tag or NO_TAG)


def reference_of_run(*, session: Session, run: RunRow) -> str | None:
    """The id of the run's reference: its first tag's that has one, else its project's (never itself)."""
    return references_store.reference_for(session=session, run=run)
