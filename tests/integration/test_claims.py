"""Background work claimed by run (store/claims.py): two workers on one Postgres never hold the
same run, a dead worker's claim goes with it, and no claim locks rows across runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from holter_server.services.lifecycle import mark_stalled
from holter_server.store import detection_queue
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory, session_scope, upgrade
from holter_server.store.models import EventRow, RunRow
from sqlalchemy import Engine, event, func, select, text
from sqlalchemy.orm import Session, sessionmaker

RUNS = ["r1", "r2", "r3", "r4"]


@pytest.fixture
def factory(empty_store_url: str) -> Iterator[sessionmaker[Session]]:
    """Four runs with two metrics each that detection has not read, on a Postgres database."""
    if not empty_store_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer, and one process does its background work")
    upgrade(empty_store_url)
    engine = make_engine(empty_store_url)
    made = make_session_factory(engine)
    for run_id in RUNS:
        with session_scope(made) as session:
            runs_store.create_or_resume_run(session=session, run_id=run_id, project="p", name=None, config={}, tags=[])
            points_store.add_points(
                session=session,
                run_id=run_id,
                max_metrics=100,
                columns={name: ([1, 2], [1.0, 2.0], [None, None]) for name in ("loss", "lr")},
            )
            runs_store.record_activity(session=session, run_id=run_id, last_step=2)  # as ingest does: due for detection
    with session_scope(made) as session:  # the queue has met the metrics (its first rows are written once, not claimed)
        detection_queue.claim_detection_work(session=session, limit=0)
    yield made
    engine.dispose()


def test_a_run_claimed_by_one_worker_is_not_given_to_another(factory: sessionmaker[Session]) -> None:
    with session_scope(factory) as first:
        mine = {w.run_id for w in detection_queue.claim_detection_work(session=first, limit=1)}
        with session_scope(factory) as second:
            theirs = {w.run_id for w in detection_queue.claim_detection_work(session=second, limit=100)}
    assert len(mine) == 1
    assert theirs == set(RUNS) - mine


def test_a_claim_ends_with_its_transaction(factory: sessionmaker[Session]) -> None:
    with session_scope(factory) as first:
        detection_queue.claim_detection_work(session=first, limit=100)
    with session_scope(factory) as second:
        assert {w.run_id for w in detection_queue.claim_detection_work(session=second, limit=100)} == set(RUNS)


def test_a_dead_workers_claim_goes_with_its_connection(factory: sessionmaker[Session]) -> None:
    dead = factory()
    try:
        assert {w.run_id for w in detection_queue.claim_detection_work(session=dead, limit=100)} == set(RUNS)
        pid = dead.scalar(text("SELECT pg_backend_pid()"))
        with session_scope(factory) as other:
            other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        deadline = time.monotonic() + 10
        claimed: set[str] = set()
        while claimed != set(RUNS) and time.monotonic() < deadline:
            with session_scope(factory) as survivor:
                claimed = {w.run_id for w in detection_queue.claim_detection_work(session=survivor, limit=100)}
        assert claimed == set(RUNS)
    finally:
        dead.invalidate()


def test_two_concurrent_workers_never_hold_the_same_run(factory: sessionmaker[Session]) -> None:
    holding: dict[str, str] = {}
    overlaps: list[str] = []
    claimed_by: dict[str, set[str]] = {"a": set(), "b": set()}
    guard = threading.Lock()
    stop = time.monotonic() + 3.0

    def work(name: str) -> None:
        while time.monotonic() < stop:
            with session_scope(factory) as session:
                runs = {w.run_id for w in detection_queue.claim_detection_work(session=session, limit=2)}
                with guard:
                    overlaps.extend(run_id for run_id in runs if run_id in holding)
                    holding.update(dict.fromkeys(runs, name))
                    claimed_by[name] |= runs
                time.sleep(0.02)  # working on them, claims held
                with guard:
                    for run_id in runs:
                        holding.pop(run_id, None)

    workers = [threading.Thread(target=work, args=(name,)) for name in claimed_by]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert overlaps == []
    assert claimed_by["a"] and claimed_by["b"]


def test_two_stall_watchers_report_a_silent_run_once(factory: sessionmaker[Session]) -> None:
    with session_scope(factory) as first:
        with session_scope(factory) as second:
            theirs = mark_stalled(session=second, stall_after=timedelta(0))
        mine = mark_stalled(session=first, stall_after=timedelta(0))
    assert sorted(mine + theirs) == RUNS
    with session_scope(factory) as session:
        assert session.scalar(select(func.count()).select_from(EventRow).where(EventRow.kind == "run_stalled")) == len(
            RUNS
        )
        assert set(session.scalars(select(RunRow.status))) == {"stalled"}


def test_no_claim_locks_rows(factory: sessionmaker[Session]) -> None:
    # a distributed (Citus) table refuses FOR UPDATE across shards, and a claim spans runs
    engine: Engine = factory.kw["bind"]
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        with session_scope(factory) as session:
            work = detection_queue.claim_detection_work(session=session, limit=100)
            detection_queue.lock_detection_rows(session=session, keys=[(w.run_id, w.metric_id) for w in work])
            mark_stalled(session=session, stall_after=timedelta(0))
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert len(work) == 2 * len(RUNS)
    assert [s for s in statements if "FOR UPDATE" in s.upper() or "FOR SHARE" in s.upper()] == []
