"""commands/serve: what the API process does before it serves."""

from __future__ import annotations

import argparse
import gc
from pathlib import Path
from typing import Any

import pytest
from holter_server.commands import serve


def test_the_api_process_freezes_what_building_the_app_made_before_it_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the worker does: the app's start-up objects (Dash, FastAPI's routes, the ORM) live as long
    as the process, and a full collection that walks them again costs every request's CPU."""
    seen: dict[str, Any] = {}

    def serve_nothing(app: Any, **options: Any) -> None:
        seen.update(frozen=gc.get_freeze_count(), threshold=gc.get_threshold())

    before = gc.get_threshold()
    monkeypatch.setenv("HOLTER_BACKGROUND", "off")
    monkeypatch.setattr(serve.uvicorn, "run", serve_nothing)
    args = argparse.Namespace(
        host="127.0.0.1", port=1, database_url=f"sqlite:///{tmp_path / 'h.db'}", log_level="warning"
    )
    try:
        assert serve.run(args) == 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
    assert seen["frozen"] > 10_000
    assert seen["threshold"][0] > before[0]
