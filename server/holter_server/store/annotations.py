"""Annotations. All SQL about them lives here."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from holter_server.store.database import next_id
from holter_server.store.models import AnnotationRow
from holter_server.store.runs import now


def add_annotation(
    *,
    session: Session,
    run_id: str,
    author: str,
    text: str,
    metric: str | None,
    start_step: int | None,
    end_step: int | None,
    event_id: int | None,
    key_id: int | None = None,
) -> AnnotationRow:
    """Store a note (`key_id`: the API key that wrote it)."""
    moment = now()
    row = AnnotationRow(
        id=next_id(session, AnnotationRow.id),
        run_id=run_id,
        author=author,
        text=text,
        metric=metric,
        start_step=start_step,
        end_step=end_step,
        event_id=event_id,
        key_id=key_id,
        created_at=moment,
        updated_at=moment,
    )
    session.add(row)
    session.flush()
    return row


def list_annotations(
    *, session: Session, run_id: str, metric: str | None = None, event_id: int | None = None
) -> Sequence[AnnotationRow]:
    """A run's notes, oldest first, optionally for one metric or one event."""
    query = select(AnnotationRow).where(AnnotationRow.run_id == run_id)
    if metric is not None:
        query = query.where(AnnotationRow.metric == metric)
    if event_id is not None:
        query = query.where(AnnotationRow.event_id == event_id)
    return session.scalars(query.order_by(AnnotationRow.created_at, AnnotationRow.id)).all()


def get_annotation(*, session: Session, run_id: str, annotation_id: int) -> AnnotationRow | None:
    return session.scalar(
        select(AnnotationRow).where(AnnotationRow.run_id == run_id, AnnotationRow.id == annotation_id)
    )


def edit_annotation(*, session: Session, annotation: AnnotationRow, text: str) -> AnnotationRow:
    annotation.text = text
    annotation.updated_at = now()
    session.flush()
    return annotation


def delete_annotation(*, session: Session, annotation: AnnotationRow) -> None:
    session.delete(annotation)
    session.flush()
