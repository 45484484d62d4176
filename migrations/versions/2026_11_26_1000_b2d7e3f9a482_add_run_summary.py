"""add a summary to runs

Revision ID: b2d7e3f9a482
Revises: a1c6d2e8f371
Create Date: 2026-11-26 10:00:00

What the training job said sums its run up (wandb's `run.summary["best_acc"] = 0.93`): a JSON
object merged key by key as the client sends it, shown on the run page beside the config.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b2d7e3f9a482"
down_revision: str | None = "a1c6d2e8f371"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("summary", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("summary")
