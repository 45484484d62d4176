"""store/runs.py: the run's activity, written once per batch of every job."""

from __future__ import annotations

import uuid

import pytest
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory, upgrade
from sqlalchemy.orm import Session, sessionmaker


@pytest.fixture
def factory(store_url: str) -> sessionmaker[Session]:
    upgrade(store_url)
    return make_session_factory(make_engine(store_url))


def new_run(factory: sessionmaker[Session]) -> str:
    run_id = f"activity-{uuid.uuid4().hex[:8]}"
    with factory() as session:
        runs_store.create_or_resume_run(session=session, run_id=run_id, project="p", name=None, config={}, tags=[])
        session.commit()
    return run_id


def test_activity_moves_the_last_step_forward_only_and_a_heartbeat_keeps_it(factory: sessionmaker[Session]) -> None:
    run_id = new_run(factory)
    for step in (10, 4, None):
        with factory() as session:
            runs_store.record_activity(session=session, run_id=run_id, last_step=step)
            session.commit()
    with factory() as session:
        run = runs_store.get_run(session=session, run_id=run_id)
        assert run is not None and run.last_step == 10 and run.heartbeat_at >= run.created_at


def test_a_run_loaded_in_the_session_sees_its_activity(factory: sessionmaker[Session]) -> None:
    run_id = new_run(factory)
    with factory() as session:
        run = runs_store.get_run(session=session, run_id=run_id)
        assert run is not None and run.last_step is None
        before = run.heartbeat_at
        runs_store.record_activity(session=session, run_id=run_id, last_step=7)
        assert run.last_step == 7 and run.heartbeat_at >= before


def test_a_pending_change_to_the_run_is_written_before_its_activity(factory: sessionmaker[Session]) -> None:
    run_id = new_run(factory)
    with factory() as session:
        run = runs_store.get_run(session=session, run_id=run_id)
        assert run is not None
        run.notes = "changed in this transaction"
        runs_store.record_activity(session=session, run_id=run_id, last_step=3)
        session.commit()
    with factory() as session:
        run = runs_store.get_run(session=session, run_id=run_id)
        assert run is not None and run.notes == "changed in this transaction" and run.last_step == 3
