"""API keys. All SQL about them lives here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from holter_server.store.models import ApiKeyRow
from holter_server.store.runs import now

TOUCH_EVERY = timedelta(seconds=60)  # last-used time is kept to the minute, not written per request


def add_key(
    *, session: Session, name: str, prefix: str, secret_hash: str, scope: str, project: str | None
) -> ApiKeyRow:
    row = ApiKeyRow(name=name, prefix=prefix, secret_hash=secret_hash, scope=scope, project=project, created_at=now())
    session.add(row)
    session.flush()
    return row


def key_by_prefix(*, session: Session, prefix: str) -> ApiKeyRow | None:
    return session.scalar(select(ApiKeyRow).where(ApiKeyRow.prefix == prefix))


def list_keys(*, session: Session) -> Sequence[ApiKeyRow]:
    return session.scalars(select(ApiKeyRow).order_by(ApiKeyRow.id)).all()


def get_key(*, session: Session, key_id: int) -> ApiKeyRow | None:
    return session.get(ApiKeyRow, key_id)


def active_key_count(*, session: Session) -> int:
    return session.scalar(select(func.count()).select_from(ApiKeyRow).where(ApiKeyRow.revoked_at.is_(None))) or 0


def touch(*, session: Session, key: ApiKeyRow) -> None:
    """Record that the key was used (at most once a minute)."""
    moment = now()
    if key.last_used_at is None or moment - key.last_used_at > TOUCH_EVERY:
        key.last_used_at = moment
        session.commit()


def revoke(*, session: Session, key: ApiKeyRow) -> ApiKeyRow:
    key.revoked_at = now()
    session.flush()
    return key
