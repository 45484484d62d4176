"""Saving live detection's progress: the step of every metric read, its saved state kept."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from holter_server.schemas.points import read_batch
from holter_server.services.ingest import ingest_batch
from holter_server.store import detection_queue
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory, upgrade
from holter_server.store.models import DetectorStateRow
from sqlalchemy import select


def test_progress_saved_without_a_state_sets_each_metrics_step_and_keeps_its_state(empty_store_url: str) -> None:
    upgrade(empty_store_url)
    engine = make_engine(empty_store_url)
    factory = make_session_factory(engine)
    run_ids = [f"progress-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        with factory() as session:
            for run_id in run_ids:
                runs_store.create_or_resume_run(
                    session=session, run_id=run_id, project="progress", name=None, config={}, tags=[]
                )
                body = {"metrics": {f"m{i}": {"steps": [0, 1, 2], "values": [1.0, 2.0, 3.0]} for i in range(3)}}
                ingest_batch(session=session, run_id=run_id, batch=read_batch(body), max_metrics=100)
            session.commit()
            keys = session.execute(
                select(DetectorStateRow.run_id, DetectorStateRow.metric_id).where(DetectorStateRow.run_id.in_(run_ids))
            ).all()
            metric_ids = {
                run_id: sorted(m.metric_id for m in runs_store.list_metrics(session=session, run_id=run_id))
                for run_id in run_ids
            }
            for run_id in run_ids:
                for metric_id in metric_ids[run_id]:
                    if (run_id, metric_id) not in keys:
                        session.add(
                            DetectorStateRow(
                                run_id=run_id,
                                metric_id=metric_id,
                                detected_step=-1,
                                state={"saved": metric_id},
                                detector_version="v0",
                                updated_at=datetime(2020, 1, 1, tzinfo=UTC),
                            )
                        )
            session.commit()
            progress = [
                detection_queue.DetectionProgress(
                    run_id=run_id,
                    metric_id=metric_id,
                    detected_step=metric_id + 10,
                    state=detection_queue.KEEP_STATE,
                    detector_version="v1",
                )
                for run_id in run_ids
                for metric_id in metric_ids[run_id]
            ]
            before = datetime.now(UTC)
            detection_queue.save_detection_states(session=session, progress=progress)
            session.commit()
            rows = session.scalars(select(DetectorStateRow).where(DetectorStateRow.run_id.in_(run_ids))).all()
        assert len(rows) == 6
        for row in rows:
            assert row.detected_step == row.metric_id + 10
            assert row.state == {"saved": row.metric_id} and row.detector_version == "v0"  # the state is kept
            assert row.updated_at >= before.replace(microsecond=0)
    finally:
        engine.dispose()
