"""Migration 7c2e9a41f0d8 keys the run tables by run_id and keeps every row of a database made before it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from holter_server.detect.events import Event
from holter_server.store import annotations as annotations_store
from holter_server.store import events as events_store
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory, session_scope, upgrade
from sqlalchemy import Engine, MetaData, Table, insert, inspect, select
from sqlalchemy.exc import IntegrityError

from tests.conftest import PARTITION_POINTS

BEFORE = "d4f9a5b1c6e7"
MOMENT = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TABLES = [
    "runs",
    "metrics",
    "points",
    "rollups",
    "detector_states",
    "events",
    "annotations",
    "mutes",
    "channels",
    "alert_rules",
    "deliveries",
    "references",
]


def _event(run_id: str, event_id: int, key: str) -> dict[str, Any]:
    return {
        "id": event_id,
        "run_id": run_id,
        "event_key": key,
        "metric": "loss",
        "kind": "spike",
        "severity": "warning",
        "score": 3.5,
        "start_step": 10,
        "end_step": 12,
        "peak_step": 11,
        "period": None,
        "summary": f"spike {key}",
        "details": {"z": 9.0},
        "status": "open",
        "status_by": None,
        "status_reason": None,
        "status_at": None,
        "detector_version": "7",
        "created_at": MOMENT,
        "updated_at": MOMENT,
    }


def _rows_before() -> dict[str, list[dict[str, Any]]]:
    return {
        "runs": [
            {
                "id": run_id,
                "project": "p",
                "name": run_id,
                "config": {"lr": 0.1},
                "tags": ["a"],
                "notes": None,
                "status": "running",
                "created_at": MOMENT,
                "updated_at": MOMENT,
                "heartbeat_at": MOMENT,
                "finished_at": None,
                "last_step": 12,
                "metric_definitions": None,
                "summary": None,
            }
            for run_id in ("r1", "r2")
        ],
        "metrics": [
            {
                "run_id": run_id,
                "metric_id": 1,
                "name": "loss",
                "count": 3,
                "first_step": 10,
                "last_step": 12,
                "last_value": 0.5,
            }
            for run_id in ("r1", "r2")
        ],
        "points": [
            {"run_id": run_id, "metric_id": 1, "step": step, "value": step / 10, "wall_time": 1.0e9 + step}
            for run_id in ("r1", "r2")
            for step in (10, 11, 12)
        ],
        "rollups": [
            {
                "run_id": "r1",
                "metric_id": 1,
                "level": 0,
                "bucket": 10,
                "count": 1,
                "finite_sum": 1.0,
                "min_value": 1.0,
                "min_step": 10,
                "max_value": 1.0,
                "max_step": 10,
                "first_step": 10,
                "first_value": 1.0,
                "last_step": 10,
                "last_value": 1.0,
                "nan_count": 0,
                "posinf_count": 0,
                "neginf_count": 0,
            }
        ],
        "detector_states": [
            {
                "run_id": run_id,
                "metric_id": 1,
                "detected_step": 12,
                "detector_version": "7",
                "state": {"tail": [1.0, 2.0]},
                "updated_at": MOMENT,
            }
            for run_id in ("r1", "r2")
        ],
        "events": [
            _event("r1", 1, "loss:spike@10"),
            _event("r1", 2, "loss:spike@11"),
            _event("r2", 3, "loss:spike@10"),
        ],
        "annotations": [
            {
                "id": 1,
                "run_id": "r1",
                "metric": None,
                "start_step": None,
                "end_step": None,
                "event_id": 2,
                "author": "ana",
                "key_id": 4,
                "text": "that spike is the data loader",
                "created_at": MOMENT,
                "updated_at": MOMENT,
            },
            {
                "id": 2,
                "run_id": "r2",
                "metric": "loss",
                "start_step": 10,
                "end_step": 12,
                "event_id": None,
                "author": "bo",
                "key_id": None,
                "text": "lr warmup",
                "created_at": MOMENT,
                "updated_at": MOMENT,
            },
        ],
        "mutes": [
            {
                "run_id": "r2",
                "metric": "loss",
                "kind": "spike",
                "created_by": "bo",
                "reason": None,
                "created_at": MOMENT,
            }
        ],
        "channels": [
            {
                "id": 1,
                "name": "team",
                "kind": "webhook",
                "project": "p",
                "target": "http://127.0.0.1:9/hook",
                "signing_secret": None,
                "enabled": True,
                "created_at": MOMENT,
            }
        ],
        "alert_rules": [
            {
                "id": 1,
                "channel_id": 1,
                "name": "all",
                "project": None,
                "run_tag": None,
                "metric_pattern": None,
                "kinds": None,
                "min_severity": "warning",
                "threshold_op": None,
                "threshold_value": None,
                "cooldown_s": 300.0,
                "enabled": True,
                "created_at": MOMENT,
            }
        ],
        "deliveries": [
            {
                "id": 1,
                "channel_id": 1,
                "rule_id": 1,
                "run_id": "r1",
                "event_id": 1,
                "purpose": "alert",
                "idempotency_key": "k1",
                "alert": {"summary": "spike"},
                "status": "delivered",
                "attempts": 1,
                "not_before": MOMENT,
                "last_error": None,
                "group_key": None,
                "created_at": MOMENT,
                "delivered_at": MOMENT,
            },
            {
                "id": 2,
                "channel_id": 1,
                "rule_id": None,
                "run_id": None,
                "event_id": None,
                "purpose": "test",
                "idempotency_key": "k2",
                "alert": {"summary": "test"},
                "status": "pending",
                "attempts": 0,
                "not_before": MOMENT,
                "last_error": None,
                "group_key": None,
                "created_at": MOMENT,
                "delivered_at": None,
            },
        ],
        "references": [
            {"project": "p", "tag": "", "run_id": "r1", "set_by": "ana", "created_at": MOMENT},
            {"project": "p", "tag": "a", "run_id": "r2", "set_by": None, "created_at": MOMENT},
        ],
    }


def _read_all(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    metadata = MetaData()
    out = {}
    with engine.connect() as connection:
        for name in TABLES:
            table = Table(name, metadata, autoload_with=connection)
            rows = connection.execute(select(table).order_by(*table.primary_key.columns)).mappings().all()
            out[name] = [
                {
                    key: value.replace(tzinfo=UTC) if isinstance(value, datetime) and value.tzinfo is None else value
                    for key, value in row.items()
                }
                for row in rows
            ]
    return out


@pytest.fixture
def migrated_store(unmigrated_store_url: str) -> Any:
    """A store made at the revision before (its big tables partitioned under
    HOLTER_TEST_PARTITION_POINTS), filled, then upgraded: (url, engine, the rows put in)."""
    empty_store_url = unmigrated_store_url
    upgrade(empty_store_url, BEFORE, partition_points=PARTITION_POINTS)
    engine = make_engine(empty_store_url)
    written = _rows_before()
    metadata = MetaData()
    with engine.begin() as connection:
        for name in TABLES:
            connection.execute(insert(Table(name, metadata, autoload_with=connection)), written[name])
    if engine.dialect.name == "postgresql":  # the rows came with their ids: move the sequences past them
        with engine.begin() as connection:
            for name in ("events", "annotations", "deliveries", "channels", "alert_rules"):
                connection.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), (SELECT max(id) FROM {name}))"
                )
    engine.dispose()
    upgrade(empty_store_url)
    engine = make_engine(empty_store_url)
    yield empty_store_url, engine, written
    engine.dispose()


def test_every_row_is_kept_by_the_migration(migrated_store: Any) -> None:
    _, engine, written = migrated_store
    # the columns the rows were written with: later migrations may add more (runs.drift_due_at)
    read = {
        name: [{column: row[column] for column in written[name][0]} for row in rows] if written[name] else rows
        for name, rows in _read_all(engine).items()
    }
    assert read == {name: sorted(rows, key=lambda row: _key(name, row)) for name, rows in written.items()}


def _key(name: str, row: dict[str, Any]) -> tuple[Any, ...]:
    keys = {
        "runs": ("id",),
        "metrics": ("run_id", "metric_id"),
        "points": ("run_id", "metric_id", "step"),
        "rollups": ("run_id", "metric_id", "level", "bucket"),
        "detector_states": ("run_id", "metric_id"),
        "events": ("run_id", "id"),
        "annotations": ("run_id", "id"),
        "mutes": ("run_id", "metric", "kind"),
        "channels": ("id",),
        "alert_rules": ("id",),
        "deliveries": ("id",),
        "references": ("project", "tag"),
    }
    return tuple(row[k] for k in keys[name])


def test_the_run_tables_are_keyed_by_run_after_the_migration(migrated_store: Any) -> None:
    _, engine, _ = migrated_store
    schema = inspect(engine)
    assert schema.get_pk_constraint("events")["constrained_columns"] == ["run_id", "id"]
    assert schema.get_pk_constraint("annotations")["constrained_columns"] == ["run_id", "id"]
    keys = {(fk["referred_table"], tuple(fk["constrained_columns"])) for fk in schema.get_foreign_keys("annotations")}
    assert keys == {("runs", ("run_id",)), ("events", ("run_id", "event_id"))}
    assert [fk["referred_table"] for fk in schema.get_foreign_keys("references")] == []
    assert {fk["referred_table"] for fk in schema.get_foreign_keys("deliveries")} == {"channels", "alert_rules"}


def test_new_events_and_notes_get_ids_past_the_migrated_ones(migrated_store: Any) -> None:
    _, engine, _ = migrated_store
    factory = make_session_factory(engine)
    with session_scope(factory) as session:
        event, _ = events_store.upsert_event(
            session=session, run_id="r2", event_key="loss:spike@12", event=_spike(), detector_version="7"
        )
        note = annotations_store.add_annotation(
            session=session,
            run_id="r2",
            author="cy",
            text="again",
            metric=None,
            start_step=None,
            end_step=None,
            event_id=event.id,
        )
        ids = (event.id, note.id)
    assert ids == (4, 3)


def test_a_note_cannot_name_another_runs_event(migrated_store: Any) -> None:
    _, engine, _ = migrated_store
    with pytest.raises(IntegrityError), engine.begin() as connection:
        connection.execute(
            insert(Table("annotations", MetaData(), autoload_with=connection)),
            [
                {
                    "id": 9,
                    "run_id": "r2",
                    "event_id": 1,
                    "author": "x",
                    "text": "event 1 is r1's",
                    "created_at": MOMENT,
                    "updated_at": MOMENT,
                }
            ],
        )


def test_deleting_a_run_takes_its_notes_events_and_references_with_it(migrated_store: Any) -> None:
    _, engine, _ = migrated_store
    with session_scope(make_session_factory(engine)) as session:
        runs_store.delete_run(session=session, run_id="r1")
    after = _read_all(engine)
    assert [(row["run_id"], row["id"]) for row in after["events"]] == [("r2", 3)]
    assert [row["run_id"] for row in after["annotations"]] == ["r2"]
    assert [(row["tag"], row["run_id"]) for row in after["references"]] == [("a", "r2")]
    assert [row["purpose"] for row in after["deliveries"]] == [
        "test"
    ]  # r1's alert names it and goes; the channel test stays


def _spike() -> Event:
    return Event(
        kind="spike",
        metric="loss",
        start_step=12,
        end_step=12,
        severity="warning",
        score=4.0,
        summary="spike",
        peak_step=12,
    )
