"""Live detection's work queue (store/events.claim_detection_work) on each store."""

from __future__ import annotations

from holter_server.store import events as events_store
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory, session_scope, upgrade


def test_a_run_with_thousands_of_new_metrics_does_not_hold_back_another_run(empty_store_url: str) -> None:
    # one job logging per-layer norms for 2,000 layers, then an ordinary job's loss: a pass of
    # 50 claims must reach the ordinary job at once, not after 40 passes of the big one
    upgrade(empty_store_url)
    engine = make_engine(empty_store_url)
    factory = make_session_factory(engine)
    try:
        for run_id, names in [("wide", [f"layer.{i}/act_norm" for i in range(2_000)]), ("plain", ["loss", "grad_norm"])]:
            with session_scope(factory) as session:
                runs_store.create_or_resume_run(session=session, run_id=run_id, project="p", name=None, config={}, tags=[])
                points_store.add_points(session=session, run_id=run_id, max_metrics=10_000,
                                        columns={name: ([1, 2], [1.0, 2.0], [None, None]) for name in names})
            with session_scope(factory) as session:  # the queue has met the run's metrics
                events_store.claim_detection_work(session=session, limit=1)
        with session_scope(factory) as session:
            claimed = events_store.claim_detection_work(session=session, limit=50)
        assert len(claimed) == 50
        assert {(w.run_id, w.metric) for w in claimed} >= {("plain", "loss"), ("plain", "grad_norm")}
    finally:
        engine.dispose()
