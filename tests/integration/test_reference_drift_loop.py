"""Reference drift after finish (services/reference_drift.py): the finish request only marks the
comparison due; the loop records the drift events afterwards. On SQLite and Postgres."""

from __future__ import annotations

import math
import random

import pytest
from holter_server.services import lifecycle
from holter_server.services.loops import ReferenceDriftLoop
from holter_server.store import events as events_store
from holter_server.store import points as points_store
from holter_server.store import references as references_store
from holter_server.store import runs as runs_store
from holter_server.store.database import session_scope
from holter_server.store.events import EventFilter
from sqlalchemy import event


def _log(session, run_id: str, eval_gap: float, seed: int) -> None:  # type: ignore[no-untyped-def]
    """Train and eval loss over 4,000 steps; from step 2,000 the eval loss runs `eval_gap` higher."""
    rng = random.Random(seed)
    steps = list(range(0, 4000, 10))
    loss = [2.0 + 8.0 * math.exp(-step / 600) + rng.gauss(0, 0.01) for step in steps]
    eval_steps = steps[::5]
    eval_loss = [
        loss[i * 5] + 0.1 + (eval_gap if step >= 2000 else 0.0) + rng.gauss(0, 0.005)
        for i, step in enumerate(eval_steps)
    ]
    runs_store.create_or_resume_run(session=session, run_id=run_id, project="p", name=None, config={}, tags=[])
    points_store.add_points(
        session=session,
        run_id=run_id,
        max_metrics=100,
        columns={
            "loss": (steps, loss, [None] * len(steps)),
            "eval_loss": (eval_steps, eval_loss, [None] * len(eval_steps)),
        },
    )


def _drift_events(sessions, run_id: str) -> list:  # type: ignore[no-untyped-def]
    with session_scope(sessions) as session:
        rows, _ = events_store.list_events(session=session, where=EventFilter(run_id=run_id), limit=100, offset=0)
        return [(row.metric, row.start_step) for row in rows if row.kind == "reference_drift"]


def test_finish_reads_no_points_and_the_loop_records_the_drift_after(sessions) -> None:  # type: ignore[no-untyped-def]
    with session_scope(sessions) as session:
        _log(session, "reference", eval_gap=0.0, seed=1)
        runs_store.finish_run(
            session=session, run=runs_store.get_run(session=session, run_id="reference"), status="finished"
        )
        references_store.set_reference(session=session, project="p", tag="", run_id="reference", by=None)
        _log(session, "drifting", eval_gap=0.12, seed=2)
    ReferenceDriftLoop(sessions).run_once()  # the reference's own finish: nothing to compare it with

    statements: list[str] = []
    engine = sessions.kw["bind"]

    def listen(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", listen)
    try:
        with session_scope(sessions) as session:
            lifecycle.finish(
                session=session, run=runs_store.get_run(session=session, run_id="drifting"), status="finished"
            )
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    assert not [s for s in statements if "FROM points" in s or "FROM rollups" in s], statements
    assert _drift_events(sessions, "drifting") == []

    assert ReferenceDriftLoop(sessions).run_once() == 1
    ((metric, start),) = _drift_events(sessions, "drifting")
    assert metric == "eval_loss" and 1950 <= start <= 2100
    assert ReferenceDriftLoop(sessions).run_once() == 0  # done once, not again


def test_a_run_claimed_by_one_worker_is_skipped_by_another(sessions, empty_store_url: str) -> None:  # type: ignore[no-untyped-def]
    if not empty_store_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer at a time: there is no second worker to skip")
    with session_scope(sessions) as session:
        for run_id in ("a", "b"):
            _log(session, run_id, eval_gap=0.0, seed=3)
            runs_store.finish_run(
                session=session, run=runs_store.get_run(session=session, run_id=run_id), status="finished"
            )
    with session_scope(sessions) as first, session_scope(sessions) as second:
        mine = [run.id for run in runs_store.claim_drift_due(session=first, limit=1)]
        theirs = [run.id for run in runs_store.claim_drift_due(session=second, limit=5)]
    assert len(mine) == 1 and theirs == [other for other in ("a", "b") if other not in mine]
