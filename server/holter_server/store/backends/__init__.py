"""One implementation per database of the statements whose fastest form differs (see base.py)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from holter_server.store.backends.base import Backend
from holter_server.store.backends.postgres import POSTGRES
from holter_server.store.backends.sqlite import SQLITE


def backend_for(session: Session) -> Backend:
    """The backend of the database the session is bound to."""
    return POSTGRES if session.get_bind().dialect.name == "postgresql" else SQLITE
