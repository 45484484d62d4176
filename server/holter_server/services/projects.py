"""What a project declares about its runs' configs (its seed keys)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from holter_server.store import projects as projects_store
from holter_server.store.models import ProjectSettingsRow


def project_settings(*, session: Session, project: str) -> ProjectSettingsRow | None:
    """The project's declared settings, or None when it declared none."""
    return projects_store.get_settings(session=session, project=project)


def declare_settings(
    *, session: Session, project: str, seed_keys: list[str], data_seed_keys: list[str]
) -> ProjectSettingsRow:
    """Declare the project's seed keys and data-seed keys (replacing what it declared before)."""
    return projects_store.set_settings(
        session=session, project=project, seed_keys=seed_keys, data_seed_keys=data_seed_keys
    )
