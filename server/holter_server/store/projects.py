"""Project settings. All SQL about them lives here."""

from __future__ import annotations

from sqlalchemy.orm import Session

from holter_server.store.models import ProjectSettingsRow
from holter_server.store.runs import now


def get_settings(*, session: Session, project: str) -> ProjectSettingsRow | None:
    """The project's settings, or None when it never declared any."""
    return session.get(ProjectSettingsRow, project)


def set_settings(
    *, session: Session, project: str, seed_keys: list[str], data_seed_keys: list[str]
) -> ProjectSettingsRow:
    """Replace the project's declared seed keys and data-seed keys."""
    row = session.get(ProjectSettingsRow, project)
    if row is None:
        row = ProjectSettingsRow(project=project)
        session.add(row)
    row.seed_keys, row.data_seed_keys, row.updated_at = list(seed_keys), list(data_seed_keys), now()
    session.flush()
    return row
