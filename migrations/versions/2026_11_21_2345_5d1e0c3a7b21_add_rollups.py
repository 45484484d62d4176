"""add rollups: per-metric summaries of power-of-two step buckets for chart reads

Revision ID: 5d1e0c3a7b21
Revises: 4293c88113c2
Create Date: 2026-11-21 23:45:00

Chart reads merge these summaries instead of scanning points. Ingest keeps them current; a
store that already holds points gets them built here, metric by metric.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.orm import Session

revision: str = "5d1e0c3a7b21"
down_revision: str | None = "4293c88113c2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rollups",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("metric_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("level", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("bucket", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("finite_sum", sa.Double(), nullable=False),
        sa.Column("min_value", sa.Double(), nullable=True),
        sa.Column("min_step", sa.BigInteger(), nullable=True),
        sa.Column("max_value", sa.Double(), nullable=True),
        sa.Column("max_step", sa.BigInteger(), nullable=True),
        sa.Column("first_step", sa.BigInteger(), nullable=False),
        sa.Column("first_value", sa.Double(), nullable=True),
        sa.Column("last_step", sa.BigInteger(), nullable=False),
        sa.Column("last_value", sa.Double(), nullable=True),
        sa.Column("nan_count", sa.BigInteger(), nullable=False),
        sa.Column("posinf_count", sa.BigInteger(), nullable=False),
        sa.Column("neginf_count", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id", "metric_id"],
            ["metrics.run_id", "metrics.metric_id"],
            name=op.f("fk_rollups_run_id_metrics"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "metric_id", "level", "bucket", name=op.f("pk_rollups")),
    )
    _build_for_existing_points()


def _build_for_existing_points() -> None:
    # The rebuild that ingest runs for a batch it cannot simply add: naming one step in every
    # finest bucket that holds points rebuilds every bucket of every level from the points.
    import numpy as np
    from holter_server.store.rollups import LEVELS, rebuild_rollups

    session = Session(bind=op.get_bind())
    series = session.execute(sa.text("SELECT DISTINCT run_id, metric_id FROM points ORDER BY run_id, metric_id")).all()
    for run_id, metric_id in series:
        buckets = (
            session.execute(
                sa.text(
                    f"SELECT DISTINCT step / {1 << LEVELS[0]} FROM points WHERE run_id = :run_id AND metric_id = "
                    ":metric_id"
                ),
                {"run_id": run_id, "metric_id": metric_id},
            )
            .scalars()
            .all()
        )
        steps = np.sort(np.asarray(buckets, dtype=np.int64)) << LEVELS[0]
        rebuild_rollups(session=session, run_id=run_id, touched={metric_id: steps})


def downgrade() -> None:
    op.drop_table("rollups")
