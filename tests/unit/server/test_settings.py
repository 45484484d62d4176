"""Settings pick the store and spell out the Postgres driver."""

from __future__ import annotations

from pathlib import Path

import pytest
from holter_server.settings import Settings


def test_default_store_is_an_sqlite_file_in_the_data_dir(tmp_path: Path) -> None:
    assert Settings(data_dir=tmp_path).resolved_database_url() == f"sqlite:///{tmp_path / 'holter.db'}"


@pytest.mark.parametrize("url", ["postgresql://u@h/db", "postgres://u@h/db"])
def test_postgres_urls_use_psycopg_3(url: str) -> None:
    assert Settings(database_url=url).resolved_database_url() == "postgresql+psycopg://u@h/db"


def test_environment_variables_configure_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLTER_DATABASE_URL", "postgresql://x@y/z")
    monkeypatch.setenv("HOLTER_PORT", "9999")
    settings = Settings()
    assert (settings.port, settings.resolved_database_url()) == (9999, "postgresql+psycopg://x@y/z")
