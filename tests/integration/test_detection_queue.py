"""Live detection's work queue (store/detection_queue.claim_detection_work) on each store."""

from __future__ import annotations

from holter_server.schemas.points import read_batch
from holter_server.services import detection
from holter_server.services.ingest import ingest_batch
from holter_server.store import detection_queue
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory, session_scope, upgrade
from holter_server.store.models import DetectorStateRow, RunRow
from sqlalchemy import update


def test_a_run_with_thousands_of_new_metrics_does_not_hold_back_another_run(empty_store_url: str) -> None:
    # one job logging per-layer norms for 2,000 layers, then an ordinary job's loss: a pass of
    # 50 claims must reach the ordinary job at once, not after 40 passes of the big one
    upgrade(empty_store_url)
    engine = make_engine(empty_store_url)
    factory = make_session_factory(engine)
    try:
        for run_id, names in [
            ("wide", [f"layer.{i}/act_norm" for i in range(2_000)]),
            ("plain", ["loss", "grad_norm"]),
        ]:
            with session_scope(factory) as session:
                runs_store.create_or_resume_run(
                    session=session, run_id=run_id, project="p", name=None, config={}, tags=[]
                )
                points_store.add_points(
                    session=session,
                    run_id=run_id,
                    max_metrics=10_000,
                    columns={name: ([1, 2], [1.0, 2.0], [None, None]) for name in names},
                )
                runs_store.record_activity(
                    session=session, run_id=run_id, last_step=2
                )  # as ingest does: due for detection
            with session_scope(factory) as session:  # the queue has met the run's metrics
                detection_queue.claim_detection_work(session=session, limit=1)
        with session_scope(factory) as session:
            claimed = detection_queue.claim_detection_work(session=session, limit=50)
        assert len(claimed) == 50
        assert {(w.run_id, w.metric) for w in claimed} >= {("plain", "loss"), ("plain", "grad_norm")}
    finally:
        engine.dispose()


def test_a_pass_looks_only_at_runs_with_batches_it_has_not_read(empty_store_url: str) -> None:
    # a lab's database holds thousands of finished runs: once detection has read a run, its
    # metrics are out of the claims' sight until a batch is stored for it again (or its
    # detection is reset), however their progress rows read
    upgrade(empty_store_url)
    engine = make_engine(empty_store_url)
    factory = make_session_factory(engine)
    live_detectors = detection.LiveDetectors()  # this test's detection loop

    def log(start: int) -> None:
        with session_scope(factory) as session:
            ingest_batch(
                session=session,
                run_id="done",
                max_metrics=100,
                batch=read_batch(
                    {
                        "metrics": {
                            "loss": {
                                "steps": list(range(start, start + 50)),
                                "values": [2.0 - s / 1000 for s in range(start, start + 50)],
                            }
                        }
                    }
                ),
            )

    def claimed() -> list[str]:
        with session_scope(factory) as session:
            return [w.metric for w in detection_queue.claim_detection_work(session=session, limit=50)]

    try:
        with session_scope(factory) as session:
            runs_store.create_or_resume_run(session=session, run_id="done", project="p", name=None, config={}, tags=[])
        log(0)
        while detection.detect_pending(session_factory=factory, live=live_detectors):
            pass
        with session_scope(factory) as session:
            run = session.get(RunRow, "done")
            assert run is not None and run.detected_batches == run.stored_batches == 1
            # what no pass would look at again: progress rows behind the points, written behind its back
            session.execute(update(DetectorStateRow).values(detected_step=-1))
        assert claimed() == []
        log(50)  # a batch: due again, and read from where its progress says
        assert claimed() == ["loss"]
        while detection.detect_pending(session_factory=factory, live=live_detectors):
            pass
        assert claimed() == []
        with session_scope(factory) as session:  # a reset (a kind declared since): read again, with no batch
            detection_queue.reset_detection(session=session, run_id="done", metric_ids=[1])
        assert claimed() == ["loss"]
    finally:
        engine.dispose()
