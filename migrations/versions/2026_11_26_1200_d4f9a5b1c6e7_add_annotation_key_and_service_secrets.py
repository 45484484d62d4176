"""add the key that wrote an annotation, and the service's own secrets

Revision ID: d4f9a5b1c6e7
Revises: c3e8f4a0b593
Create Date: 2026-11-26 12:00:00

`annotations.key_id`: the API key that wrote a note (null with auth off, and for notes written
before). Only that key edits or deletes it; the `author` field is a name, not proof.
`service_secrets`: secrets the service makes for itself once (the key that signs the chart
links in chat messages), shared by every process on the store.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d4f9a5b1c6e7"
down_revision: str | None = "c3e8f4a0b593"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("annotations") as batch:
        batch.add_column(sa.Column("key_id", sa.Integer(), nullable=True))
    op.create_table(
        "service_secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(128), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("service_secrets")
    with op.batch_alter_table("annotations") as batch:
        batch.drop_column("key_id")
