"""create runs, metrics and points

Revision ID: 4293c88113c2
Revises:
Create Date: 2026-11-21 23:26:30

The points table is keyed (run_id, metric_id, step): one row per value, stored once, and
partitionable by run.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "4293c88113c2"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=True),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_step", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_project"), "runs", ["project"])
    op.create_index(op.f("ix_runs_status"), "runs", ["status"])

    op.create_table(
        "metrics",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("metric_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("first_step", sa.BigInteger(), nullable=True),
        sa.Column("last_step", sa.BigInteger(), nullable=True),
        sa.Column("last_value", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_metrics_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "metric_id", name=op.f("pk_metrics")),
    )
    op.create_index("uq_metrics_run_id_name", "metrics", ["run_id", "name"], unique=True)

    op.create_table(
        "points",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("metric_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("step", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("wall_time", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "metric_id", "step", name=op.f("pk_points")),
    )


def downgrade() -> None:
    op.drop_table("points")
    op.drop_index("uq_metrics_run_id_name", table_name="metrics")
    op.drop_table("metrics")
    op.drop_index(op.f("ix_runs_status"), table_name="runs")
    op.drop_index(op.f("ix_runs_project"), table_name="runs")
    op.drop_table("runs")
