"""add runs.archived_at: an archived run is kept whole but left out of the runs list

Revision ID: a1c5e7d9b2f4
Revises: 5c9e2a7d4f10
Create Date: 2026-11-29 12:00:00

A run archived (`POST /runs/{id}/archive`) keeps every point, event and note, and its page and
reads work as before; `GET /runs` leaves it out unless asked (`archived=include` or `only`).
NULL: not archived.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a1c5e7d9b2f4"
down_revision: str | None = "5c9e2a7d4f10"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("archived_at")
