"""add alert channels, rules and the delivery outbox

Revision ID: 7f3a2e5c9d43
Revises: 6e2f1d4b8c32
Create Date: 2026-11-21 23:55:00

Alerts are written to the outbox in the transaction that records their event and delivered
by a dispatcher with retries.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7f3a2e5c9d43"
down_revision: str | None = "6e2f1d4b8c32"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "channels",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("project", sa.String(length=128), nullable=True),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("signing_secret", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_channels")),
    )
    op.create_index(op.f("ix_channels_project"), "channels", ["project"])

    op.create_table(
        "alert_rules",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("channel_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("project", sa.String(length=128), nullable=True),
        sa.Column("run_tag", sa.String(length=128), nullable=True),
        sa.Column("metric_pattern", sa.String(length=256), nullable=True),
        sa.Column("kinds", sa.JSON(), nullable=True),
        sa.Column("min_severity", sa.String(length=16), nullable=False),
        sa.Column("threshold_op", sa.String(length=16), nullable=True),
        sa.Column("threshold_value", sa.Double(), nullable=True),
        sa.Column("cooldown_s", sa.Double(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["channel_id"], ["channels.id"], name=op.f("fk_alert_rules_channel_id_channels"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_rules")),
    )
    op.create_index(op.f("ix_alert_rules_channel_id"), "alert_rules", ["channel_id"])

    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("channel_id", sa.Integer(), nullable=False),
        sa.Column("rule_id", sa.Integer(), nullable=True),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("event_id", sa.Integer(), nullable=True),
        sa.Column("purpose", sa.String(length=16), nullable=False),
        sa.Column("idempotency_key", sa.String(length=128), nullable=False),
        sa.Column("alert", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("group_key", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["channel_id"], ["channels.id"], name=op.f("fk_deliveries_channel_id_channels"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["rule_id"], ["alert_rules.id"], name=op.f("fk_deliveries_rule_id_alert_rules"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_deliveries_event_id_events"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_deliveries_idempotency_key")),
    )
    op.create_index("ix_deliveries_status_not_before", "deliveries", ["status", "not_before"])
    op.create_index("ix_deliveries_rule_id_run_id", "deliveries", ["rule_id", "run_id"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_rule_id_run_id", table_name="deliveries")
    op.drop_index("ix_deliveries_status_not_before", table_name="deliveries")
    op.drop_table("deliveries")
    op.drop_index(op.f("ix_alert_rules_channel_id"), table_name="alert_rules")
    op.drop_table("alert_rules")
    op.drop_index(op.f("ix_channels_project"), table_name="channels")
    op.drop_table("channels")
