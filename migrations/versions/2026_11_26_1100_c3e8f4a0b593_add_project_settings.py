"""add project settings

Revision ID: c3e8f4a0b593
Revises: b2d7e3f9a482
Create Date: 2026-11-26 11:00:00

A project declares its own seed keys and which of them set the data order, for seed groups,
ablation verdicts and twin-run spike attribution.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c3e8f4a0b593"
down_revision: str | None = "b2d7e3f9a482"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "project_settings",
        sa.Column("project", sa.String(length=128), nullable=False),
        sa.Column("seed_keys", sa.JSON(), nullable=False),
        sa.Column("data_seed_keys", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("project", name=op.f("pk_project_settings")),
    )


def downgrade() -> None:
    op.drop_table("project_settings")
