"""add the batch counts that say which runs live detection has to look at

Revision ID: 4b8d2f61c3a7
Revises: e7a31c9d5f08
Create Date: 2026-11-28 12:00:00

`runs.stored_batches` counts the batches of points stored for the run, `runs.detected_batches`
how many of them live detection had read all of when it last looked: a run is due while the
first is ahead. Detection's claims looked at every metric of every run ever logged, each pass;
with a lab's history (thousands of finished runs) that cost Postgres more than the live runs
did. Every existing run starts due (1 against 0), so the first pass settles each one once.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "4b8d2f61c3a7"
down_revision: str | None = "e7a31c9d5f08"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("stored_batches", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("detected_batches", sa.BigInteger(), nullable=False, server_default="0"))
    op.execute("UPDATE runs SET stored_batches = 1")


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("detected_batches")
        batch.drop_column("stored_batches")
