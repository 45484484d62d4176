"""add run_ranks: the ranks of a distributed job's run, one row each, rewritten by its beats

Revision ID: b6e1f3a8c9d2
Revises: a1c5e7d9b2f4
Create Date: 2026-12-05 12:00:00

A job of many ranks (torchrun, SLURM, MPI) is one run; each rank that joins it gets a row here,
keyed by (run_id, rank) like every table of a run, so it is distributed with the run on Citus.
Its beats rewrite the row in place: the step it is in, its collective, its stack, its timings.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b6e1f3a8c9d2"
down_revision: str | None = "a1c5e7d9b2f4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_ranks",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("world_size", sa.Integer(), nullable=True),
        sa.Column("local_rank", sa.Integer(), nullable=True),
        sa.Column("node_rank", sa.Integer(), nullable=True),
        sa.Column("host", sa.String(256), nullable=True),
        sa.Column("pid", sa.BigInteger(), nullable=True),
        sa.Column("launcher", sa.String(32), nullable=True),
        sa.Column("job", sa.String(256), nullable=True),
        sa.Column("restart", sa.Integer(), server_default="0", nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("beat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("beat_interval", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("step_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("collective", sa.String(128), nullable=True),
        sa.Column("collective_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("stack", sa.JSON(), nullable=True),
        sa.Column("timing", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_ranks_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "rank", name="pk_run_ranks"),
    )


def downgrade() -> None:
    op.drop_table("run_ranks")
