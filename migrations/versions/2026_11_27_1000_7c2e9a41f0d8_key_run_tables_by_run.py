"""key every table of a run by run_id: events, annotations; references and deliveries lose their
keys into runs and events

Revision ID: 7c2e9a41f0d8
Revises: d4f9a5b1c6e7
Create Date: 2026-11-27 10:00:00

So that every table that belongs to a run can be hash-partitioned or distributed (Citus) by
`run_id`, each one's primary key and foreign keys include `run_id`:
* `events`: primary key (run_id, id) (ids keep their values and their sequence on Postgres);
* `annotations`: primary key (run_id, id); its event is (run_id, event_id) in events;
* `detector_states`: a foreign key (run_id, metric_id) into metrics, so a state goes with its metric;
* `deliveries` (the channels' outbox and history, not a run's) and `references` (a project's
  setting) stay small unpartitioned tables, so they lose their foreign keys into events and runs,
  which such a table cannot hold; the store deletes a run's references with the run.
Every row is kept (detector states of metrics deleted before are dropped: nothing reads them).
On SQLite the tables are rebuilt (batch mode): the keys into `events` are dropped before it is
rebuilt (dropping the old table would otherwise cascade into `annotations`), and foreign keys
are off while migrating, then checked (`store.database.upgrade`).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "7c2e9a41f0d8"
down_revision: str | None = "d4f9a5b1c6e7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # the keys into events.id alone go first: Postgres will not drop the key they hang on
    with op.batch_alter_table("annotations") as batch:
        batch.drop_constraint("fk_annotations_event_id_events", type_="foreignkey")
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_constraint("fk_deliveries_event_id_events", type_="foreignkey")
    with op.batch_alter_table("references") as batch:
        batch.drop_constraint("fk_references_run_id_runs", type_="foreignkey")

    with op.batch_alter_table("events", recreate="always" if _sqlite() else "auto") as batch:
        batch.drop_constraint("pk_events", type_="primary")
        batch.create_primary_key("pk_events", ["run_id", "id"])

    with op.batch_alter_table("annotations", recreate="always" if _sqlite() else "auto") as batch:
        batch.drop_constraint("pk_annotations", type_="primary")
        batch.create_primary_key("pk_annotations", ["run_id", "id"])
        batch.create_foreign_key(
            "fk_annotations_run_id_events", "events", ["run_id", "event_id"], ["run_id", "id"], ondelete="CASCADE"
        )

    op.execute(
        "DELETE FROM detector_states WHERE NOT EXISTS (SELECT 1 FROM metrics"
        " WHERE metrics.run_id = detector_states.run_id AND metrics.metric_id = detector_states.metric_id)"
    )
    with op.batch_alter_table("detector_states") as batch:
        batch.create_foreign_key(
            "fk_detector_states_run_id_metrics",
            "metrics",
            ["run_id", "metric_id"],
            ["run_id", "metric_id"],
            ondelete="CASCADE",
        )


def downgrade() -> None:
    with op.batch_alter_table("detector_states") as batch:
        batch.drop_constraint("fk_detector_states_run_id_metrics", type_="foreignkey")
    with op.batch_alter_table("annotations", recreate="always" if _sqlite() else "auto") as batch:
        batch.drop_constraint("fk_annotations_run_id_events", type_="foreignkey")
        batch.drop_constraint("pk_annotations", type_="primary")
        batch.create_primary_key("pk_annotations", ["id"])
    with op.batch_alter_table("events", recreate="always" if _sqlite() else "auto") as batch:
        batch.drop_constraint("pk_events", type_="primary")
        batch.create_primary_key("pk_events", ["id"])
    op.execute('DELETE FROM "references" WHERE run_id NOT IN (SELECT id FROM runs)')
    with op.batch_alter_table("references") as batch:
        batch.create_foreign_key("fk_references_run_id_runs", "runs", ["run_id"], ["id"], ondelete="CASCADE")
    op.execute("UPDATE deliveries SET event_id = NULL WHERE event_id NOT IN (SELECT id FROM events)")
    with op.batch_alter_table("deliveries") as batch:
        batch.create_foreign_key("fk_deliveries_event_id_events", "events", ["event_id"], ["id"], ondelete="SET NULL")
    with op.batch_alter_table("annotations") as batch:
        batch.create_foreign_key("fk_annotations_event_id_events", "events", ["event_id"], ["id"], ondelete="CASCADE")


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"
