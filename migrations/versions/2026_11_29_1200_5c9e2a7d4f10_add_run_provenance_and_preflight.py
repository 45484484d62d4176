"""add the run's provenance (code version, environment) and its pre-flight checks

Revision ID: 5c9e2a7d4f10
Revises: 4b8d2f61c3a7
Create Date: 2026-11-29 12:00:00

`runs.provenance` holds what the client recorded about the code and the machine a run ran on
(git commit, dirty-diff hash, Python, torch, CUDA, key package versions, hostname): two runs that
should be the same can then be told apart by their code, and a regression bisected. `runs.preflight`
holds the results of the pre-flight checks the job ran before training (overfit one batch, causal
mask leakage, cached vs full forward), by check name. Both are null for runs that sent none.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5c9e2a7d4f10"
down_revision: str | None = "4b8d2f61c3a7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("provenance", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("preflight", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("preflight")
        batch.drop_column("provenance")
