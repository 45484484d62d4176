"""add deleted_runs: a deleted run's id is remembered, so a job still writing it cannot bring it back

Revision ID: c7f2a4b9d0e3
Revises: b6e1f3a8c9d2
Create Date: 2026-12-05 13:00:00

Deleting a running run did not stick: its client, answered 404, registered the id again and the
run came back holding only the points logged after the delete. A registration naming a deleted
run's id is now answered 410, and the client stops sending it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c7f2a4b9d0e3"
down_revision: str | None = "b6e1f3a8c9d2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "deleted_runs",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("project", sa.String(128), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_deleted_runs"),
    )


def downgrade() -> None:
    op.drop_table("deleted_runs")
