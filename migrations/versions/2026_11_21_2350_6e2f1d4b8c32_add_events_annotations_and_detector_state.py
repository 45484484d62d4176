"""add events, mutes, annotations, detector state and run notes

Revision ID: 6e2f1d4b8c32
Revises: 5d1e0c3a7b21
Create Date: 2026-11-21 23:50:00

Live detection persists its events and each metric's detector state together; people add
annotations and notes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "6e2f1d4b8c32"
down_revision: str | None = "5d1e0c3a7b21"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("notes", sa.Text(), nullable=True))

    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("event_key", sa.String(length=400), nullable=False),
        sa.Column("metric", sa.String(length=256), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("score", sa.Double(), nullable=False),
        sa.Column("start_step", sa.BigInteger(), nullable=True),
        sa.Column("end_step", sa.BigInteger(), nullable=True),
        sa.Column("peak_step", sa.BigInteger(), nullable=True),
        sa.Column("period", sa.Double(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_by", sa.String(length=128), nullable=True),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("status_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("detector_version", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_events_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    op.create_index("uq_events_run_id_event_key", "events", ["run_id", "event_key"], unique=True)
    op.create_index("ix_events_run_id_status", "events", ["run_id", "status"])
    op.create_index("ix_events_created_at", "events", ["created_at"])

    op.create_table(
        "mutes",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("metric", sa.String(length=256), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_mutes_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "metric", "kind", name=op.f("pk_mutes")),
    )

    op.create_table(
        "detector_states",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("metric_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("detected_step", sa.BigInteger(), nullable=False),
        sa.Column("detector_version", sa.String(length=16), nullable=True),
        sa.Column("state", sa.JSON(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "metric_id", name=op.f("pk_detector_states")),
    )

    op.create_table(
        "annotations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("metric", sa.String(length=256), nullable=True),
        sa.Column("start_step", sa.BigInteger(), nullable=True),
        sa.Column("end_step", sa.BigInteger(), nullable=True),
        sa.Column("event_id", sa.Integer(), nullable=True),
        sa.Column("author", sa.String(length=128), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_annotations_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_annotations_event_id_events"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_annotations")),
    )
    op.create_index("ix_annotations_run_id", "annotations", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_annotations_run_id", table_name="annotations")
    op.drop_table("annotations")
    op.drop_table("detector_states")
    op.drop_table("mutes")
    op.drop_index("ix_events_created_at", table_name="events")
    op.drop_index("ix_events_run_id_status", table_name="events")
    op.drop_index("uq_events_run_id_event_key", table_name="events")
    op.drop_table("events")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("notes")
