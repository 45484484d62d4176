"""Notes as the API reads and writes them: a run's notes (on the run, a range of a metric, or an
event), adding one, and editing or deleting one's own.

The routes call these rather than the store (the import contract `routes reach the store through
a service`); who may change a note is the route's question (it knows the caller's key)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from holter_server.store import annotations as annotations_store
from holter_server.store import events as events_store
from holter_server.store.models import AnnotationRow

# A note as the services hand it to the API: the store's row, until the schemas are built from
# domain objects (issue 34).
StoredNote = AnnotationRow


class UnknownEventError(LookupError):
    """A note names an event the run does not have."""


def notes_of_run(
    *, session: Session, run_id: str, metric: str | None = None, event_id: int | None = None
) -> Sequence[AnnotationRow]:
    """The run's notes, oldest first, optionally of one metric or one event."""
    return annotations_store.list_annotations(session=session, run_id=run_id, metric=metric, event_id=event_id)


def add_note(
    *,
    session: Session,
    run_id: str,
    author: str,
    key_id: int | None,
    text: str,
    metric: str | None,
    start_step: int | None,
    end_step: int | None,
    event_id: int | None,
) -> AnnotationRow:
    """Store a note signed by `author` (the key's name; `key_id`: the key, which alone may change
    it); `UnknownEventError` when it comments on an event the run does not have."""
    if event_id is not None and events_store.get_event(session=session, run_id=run_id, event_id=event_id) is None:
        raise UnknownEventError(f"run {run_id!r} has no event {event_id}")
    return annotations_store.add_annotation(
        session=session,
        run_id=run_id,
        author=author,
        key_id=key_id,
        text=text,
        metric=metric,
        start_step=start_step,
        end_step=end_step,
        event_id=event_id,
    )


def find_note(*, session: Session, run_id: str, note_id: int) -> AnnotationRow | None:
    """The run's note of that id, or None."""
    return annotations_store.get_annotation(session=session, run_id=run_id, annotation_id=note_id)


def edit_note(*, session: Session, note: AnnotationRow, text: str) -> AnnotationRow:
    """Replace the note's text (its time of change moves)."""
    return annotations_store.edit_annotation(session=session, annotation=note, text=text)


def delete_note(*, session: Session, note: AnnotationRow) -> None:
    """Remove the note."""
    annotations_store.delete_annotation(session=session, annotation=note)
