"""Integration tests record the runs an integration starts instead of sending them."""

from __future__ import annotations

import holter
import pytest
from holter.config import plain_config


class RecordingRun:
    """Stands in for `holter.Run`: what was logged, and how the run ended."""

    def __init__(self, **init_kwargs) -> None:  # type: ignore[no-untyped-def]
        self.init_kwargs = init_kwargs
        self.id = "recorded"
        self.name = init_kwargs.get("name")
        self.logged: list[tuple[int | None, dict[str, float]]] = []
        self.status = "running"
        self.summary: dict[str, float] = {}

    def log(self, metrics, step=None) -> None:  # type: ignore[no-untyped-def]
        self.logged.append((step, dict(metrics)))

    def update_config(self, values) -> None:  # type: ignore[no-untyped-def]
        self.init_kwargs["config"] = {**self.init_kwargs.get("config", {}), **plain_config(values)}

    def finish(self, status: str = "finished") -> None:
        self.status = status

    def series(self, name: str) -> list[tuple[int, float]]:
        return [(step, metrics[name]) for step, metrics in self.logged if name in metrics]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[RecordingRun]:
    """Runs started through `holter.init` while the test runs, recorded instead of sent."""
    runs: list[RecordingRun] = []

    def init(**kwargs) -> RecordingRun:  # type: ignore[no-untyped-def]
        runs.append(RecordingRun(**kwargs))
        return runs[-1]

    monkeypatch.setattr(holter, "init", init)
    return runs
