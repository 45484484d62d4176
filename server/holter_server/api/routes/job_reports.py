"""What the training job says about its own run besides points: its summary, its alerts
(wandb's `run.summary[...] = ...` and `wandb.alert(...)`) and its pre-flight checks."""

from __future__ import annotations

import json

from fastapi import APIRouter, HTTPException

from holter_server.api.deps import SessionDep, SettingsDep
from holter_server.api.routes.runs import require_run
from holter_server.schemas.events import EventPublic, JobAlert
from holter_server.schemas.runs import PreflightPublic, PreflightReport, SummaryPublic, SummaryUpdate
from holter_server.services import job_alerts, job_reports

router = APIRouter(prefix="/runs/{run_id}", tags=["runs"])


@router.post(
    "/summary",
    response_model=SummaryPublic,
    summary="Merge values into the run's summary (wandb's run.summary); a null removes a key",
    responses={404: {"description": "unknown run"}, 413: {"description": "summary too large"}},
)
def update_summary(session: SessionDep, settings: SettingsDep, run_id: str, body: SummaryUpdate) -> SummaryPublic:
    run = require_run(session, run_id)
    merged = {**(run.summary or {}), **body.values}
    size = len(json.dumps(merged))
    if size > settings.max_summary_bytes:
        raise HTTPException(
            status_code=413, detail=f"summary of {size} bytes exceeds the limit of {settings.max_summary_bytes}"
        )
    summary = job_reports.update_summary(session=session, run=run, values=body.values)
    session.commit()
    return SummaryPublic(summary=summary)


@router.post(
    "/alerts",
    response_model=EventPublic,
    summary="Raise an alert from the training job (wandb's wandb.alert): an `alert` event, sent to chat by the rules",
    responses={404: {"description": "unknown run"}, 422: {"description": "malformed alert"}},
)
def raise_alert(session: SessionDep, run_id: str, body: JobAlert) -> EventPublic:
    run = require_run(session, run_id)
    row = job_alerts.raise_alert(session=session, run=run, alert=body)
    session.commit()
    return EventPublic.from_row(row)


@router.post(
    "/preflight",
    response_model=PreflightPublic,
    summary="Store the pre-flight checks the job ran before training (holter.torch.preflight), by check name",
    responses={404: {"description": "unknown run"}, 422: {"description": "malformed report"}},
)
def report_preflight(session: SessionDep, run_id: str, body: PreflightReport) -> PreflightPublic:
    run = require_run(session, run_id)
    stored = job_reports.record_preflight(session=session, run=run, checks=[c.model_dump() for c in body.checks])
    session.commit()
    return PreflightPublic(checks=stored["checks"])
