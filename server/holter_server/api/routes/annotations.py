"""Annotations: people's notes on a run, a range of a metric, or an event."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response

from holter_server.api.deps import PrincipalDep, RowId, SessionDep
from holter_server.api.routes.runs import require_run
from holter_server.schemas.annotations import AnnotationCreate, AnnotationPublic, AnnotationsPublic, AnnotationUpdate
from holter_server.services import annotations as notes
from holter_server.services.annotations import StoredNote, UnknownEventError
from holter_server.services.auth import OPEN, Principal

router = APIRouter(prefix="/runs/{run_id}/annotations", tags=["annotations"])


@router.get("", response_model=AnnotationsPublic, summary="A run's notes, oldest first")
def list_annotations(
    session: SessionDep, run_id: str, metric: str | None = None, event_id: RowId | None = None
) -> AnnotationsPublic:
    require_run(session, run_id)
    rows = notes.notes_of_run(session=session, run_id=run_id, metric=metric, event_id=event_id)
    return AnnotationsPublic(data=[AnnotationPublic.from_row(row) for row in rows], count=len(rows))


@router.post("", response_model=AnnotationPublic, status_code=201, summary="Add a note")
def add_annotation(
    session: SessionDep, principal: PrincipalDep, run_id: str, body: AnnotationCreate
) -> AnnotationPublic:
    require_run(session, run_id)
    try:
        row = notes.add_note(
            session=session,
            run_id=run_id,
            key_id=principal.key_id,
            author=principal.name,  # signed by the key, not by what the body claims
            **body.model_dump(exclude={"author"}),
        )
    except UnknownEventError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    session.commit()
    return AnnotationPublic.from_row(row)


def _own_annotation(session: SessionDep, principal: Principal, run_id: str, annotation_id: RowId) -> StoredNote:
    """The note, when the caller may change it. With auth on, the key that wrote it may (or an
    admin): a name anyone can send is no proof. With auth off there are no keys, only the one
    machine's person ("local"), who may change every note."""
    require_run(session, run_id)
    row = notes.find_note(session=session, run_id=run_id, note_id=annotation_id)
    if row is None:
        raise HTTPException(status_code=404, detail=f"run {run_id!r} has no annotation {annotation_id}")
    allowed = (
        principal is OPEN or principal.scope == "admin" or (row.key_id is not None and row.key_id == principal.key_id)
    )
    if not allowed:
        raise HTTPException(
            status_code=403,
            detail=f"annotation {annotation_id} is {row.author!r}'s; only they (the key that wrote it) can change it",
        )
    return row


@router.patch("/{annotation_id}", response_model=AnnotationPublic, summary="Edit one's own note")
def edit_annotation(
    session: SessionDep, principal: PrincipalDep, run_id: str, annotation_id: RowId, body: AnnotationUpdate
) -> AnnotationPublic:
    row = notes.edit_note(
        session=session, note=_own_annotation(session, principal, run_id, annotation_id), text=body.text
    )
    session.commit()
    return AnnotationPublic.from_row(row)


@router.delete("/{annotation_id}", status_code=204, summary="Delete one's own note")
def delete_annotation(
    session: SessionDep,
    principal: PrincipalDep,
    run_id: str,
    annotation_id: RowId,
    author: Annotated[str | None, Query(description="ignored (kept for older clients): the key decides")] = None,
) -> Response:
    notes.delete_note(session=session, note=_own_annotation(session, principal, run_id, annotation_id))
    session.commit()
    return Response(status_code=204)
