"""add metric definitions to runs

Revision ID: a1c6d2e8f371
Revises: 9b5c4e7f1a65
Create Date: 2026-11-24 10:00:00

What a run's client or its people declared about its metrics: per metric name or glob, its kind
(a declared kind always wins over the name's recognition) and wandb's `summary` and
`step_metric`. A metric's kind and where it came from (declared, recognised by which rule, or
unknown) are derived from these and from its name.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a1c6d2e8f371"
down_revision: str | None = "9b5c4e7f1a65"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("metric_definitions", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("metric_definitions")
