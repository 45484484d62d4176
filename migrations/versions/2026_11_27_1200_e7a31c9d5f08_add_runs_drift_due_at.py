"""add when a finished run's comparison with its reference is due

Revision ID: e7a31c9d5f08
Revises: 7c2e9a41f0d8
Create Date: 2026-11-27 12:00:00

`runs.drift_due_at`: set when the client finishes a run, cleared by the reference-drift loop once
it has compared the run's losses with its reference (services/reference_drift.py). Null for runs
finished before: their drift was computed when they finished.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e7a31c9d5f08"
down_revision: str | None = "7c2e9a41f0d8"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("drift_due_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_runs_drift_due_at", ["drift_due_at"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_drift_due_at")
        batch.drop_column("drift_due_at")
