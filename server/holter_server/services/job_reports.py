"""What a training job reports about itself besides its points: its summary values and its pre-flight checks."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from holter_server.store import runs as runs_store
from holter_server.store.models import RunRow


def update_summary(*, session: Session, run: RunRow, values: dict[str, Any]) -> dict[str, Any]:
    """Merge `values` into the run's summary; returns the whole summary."""
    return runs_store.update_summary(session=session, run=run, values=values)


def record_preflight(*, session: Session, run: RunRow, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """Store the pre-flight checks the job ran, by check name; returns what the run now holds."""
    return runs_store.record_preflight(session=session, run=run, checks=checks)
