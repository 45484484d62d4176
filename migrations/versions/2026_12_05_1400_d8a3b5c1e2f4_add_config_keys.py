"""add config_keys: the dotted config keys of a project's runs, for choosing the runs table's columns

Revision ID: d8a3b5c1e2f4
Revises: c7f2a4b9d0e3
Create Date: 2026-12-05 14:00:00

The runs page listed its config columns by reading every run's config: 200 runs of 10,000 keys
each cost 41.9 CPU-s and 2 GB in one open tab and drew no row. Keys are recorded as runs are
created and offered from this table, a bounded page at a time. Runs stored before it are
indexed here, in batches, so that their keys are offered too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "d8a3b5c1e2f4"
down_revision: str | None = "c7f2a4b9d0e3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# as store/runs.py records them (a migration carries its own copy of what it needs: the code may move on)
MAX_KEYS_PER_RUN = 10_000
MAX_KEY_LENGTH = 512


def _keys(config: Any, prefix: str = "") -> list[str]:
    if not isinstance(config, dict):
        return []
    out: list[str] = []
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out += _keys(value, f"{name}.")
        else:
            out.append(name)
    return out


def upgrade() -> None:
    op.create_table(
        "config_keys",
        sa.Column("project", sa.String(128), nullable=False),
        sa.Column("key", sa.String(MAX_KEY_LENGTH), nullable=False),
        sa.PrimaryKeyConstraint("project", "key", name="pk_config_keys"),
    )
    bind = op.get_bind()
    table = sa.table("config_keys", sa.column("project"), sa.column("key"))
    seen: set[tuple[str, str]] = set()
    for project, stored in bind.execute(sa.text("SELECT project, config FROM runs")):
        config = json.loads(stored) if isinstance(stored, str) else stored  # SQLite hands JSON back as text
        rows = []
        for key in _keys(config)[:MAX_KEYS_PER_RUN]:
            if len(key) <= MAX_KEY_LENGTH and (project, key) not in seen:
                seen.add((project, key))
                rows.append({"project": project, "key": key})
        if rows:
            bind.execute(table.insert(), rows)


def downgrade() -> None:
    op.drop_table("config_keys")
