"""The service's own secrets. All SQL about them lives here."""

from __future__ import annotations

import secrets

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from holter_server.store.models import ServiceSecretRow


def secret(*, session: Session, name: str) -> str:
    """The named secret, made the first time any process asks for it (in a session of its own,
    so the caller's transaction is neither committed nor rolled back here)."""
    row = session.get(ServiceSecretRow, name)
    if row is not None:
        return row.value
    with Session(bind=session.get_bind()) as own:
        try:
            own.add(ServiceSecretRow(name=name, value=secrets.token_hex(32)))
            own.commit()
        except IntegrityError:
            own.rollback()  # another process made it first: use theirs
        made = own.get(ServiceSecretRow, name)
        assert made is not None
        return made.value
