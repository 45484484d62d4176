"""The integration code in docs/integrations.md runs as written."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from tests.unit.client.integrations.conftest import RecordingRun

DOC = Path(__file__).resolve().parents[4] / "docs" / "integrations.md"


def tested_block() -> str:
    match = re.search(r"<!-- tested: [^>]*-->\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert match, "docs/integrations.md lost its tested verl block"
    return match.group(1)


class FakeTracking:
    """verl's `Tracking` as far as backends see it: a `logger` dict, `log` fanned out to each."""

    def __init__(self, project_name, experiment_name, default_backend="console", config=None, **kwargs):  # type: ignore[no-untyped-def]
        self.logger = {}

    def log(self, data, step):  # type: ignore[no-untyped-def]
        for backend in self.logger.values():
            backend.log(data=data, step=step)


def test_verl_backend_forwards_verl_metrics_to_a_run(
    monkeypatch: pytest.MonkeyPatch, started: list[RecordingRun]
) -> None:
    tracking = types.ModuleType("verl.utils.tracking")
    tracking.Tracking = FakeTracking  # type: ignore[attr-defined]
    verl, utils = types.ModuleType("verl"), types.ModuleType("verl.utils")
    utils.tracking = tracking  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "verl", verl)
    monkeypatch.setitem(sys.modules, "verl.utils", utils)
    monkeypatch.setitem(sys.modules, "verl.utils.tracking", tracking)

    exec(compile(tested_block(), str(DOC), "exec"), {"__name__": "verl_holter"})
    tracker = tracking.Tracking("grpo", "jamba-3b", ["console"], config={"rollouts_num": 128})
    tracker.log(data={"training/rollout_probs_diff_mean": 0.11, "actor/grad_norm": 0.8, "note": "text"}, step=1)
    tracker.logger["holter"].finish(exit_code=1)

    (run,) = started
    assert run.init_kwargs == {"project": "grpo", "name": "jamba-3b", "config": {"rollouts_num": 128}}
    assert run.logged == [(1, {"training/rollout_probs_diff_mean": 0.11, "actor/grad_norm": 0.8})]
    assert run.status == "crashed"
