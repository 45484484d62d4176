"""add reference runs

Revision ID: 8a4b3f6d0e54
Revises: 7f3a2e5c9d43
Create Date: 2026-11-22 00:05:00

A project (or a tag within it) names the trusted run its runs are compared against.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "8a4b3f6d0e54"
down_revision: str | None = "7f3a2e5c9d43"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "references",
        sa.Column("project", sa.String(length=128), nullable=False),
        sa.Column("tag", sa.String(length=128), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("set_by", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_references_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("project", "tag", name=op.f("pk_references")),
    )


def downgrade() -> None:
    op.drop_table("references")
