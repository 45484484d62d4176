"""Tripwire reports from the training job: where the first NaN or Inf of a step came from."""

from __future__ import annotations

from fastapi import APIRouter

from holter_server.api.deps import SessionDep
from holter_server.api.routes.runs import require_run
from holter_server.schemas.events import EventPublic
from holter_server.schemas.tripwires import NonFiniteReport
from holter_server.services import tripwires

router = APIRouter(prefix="/runs/{run_id}", tags=["tripwires"])


@router.post(
    "/nonfinite",
    response_model=EventPublic,
    summary="Report the first module output and gradient that became NaN or Inf at a step (stored once per step)",
    responses={404: {"description": "unknown run"}, 422: {"description": "malformed report"}},
)
def report_nonfinite(session: SessionDep, run_id: str, body: NonFiniteReport) -> EventPublic:
    require_run(session, run_id)
    row = tripwires.record_nonfinite(session=session, run_id=run_id, report=body)
    session.commit()
    return EventPublic.from_row(row)
