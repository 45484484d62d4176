"""Whether the service's database answers, for `GET /health`."""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from holter_server.store.database import database_kind, ping


def database_health(*, session: Session) -> tuple[str, str | None]:
    """Which database the session talks to ("postgresql", "sqlite"), and why it does not answer
    (None when it does)."""
    kind = database_kind(session)
    try:
        ping(session)
    except SQLAlchemyError as exc:
        return kind, str(exc.__cause__ or exc)
    return kind, None
