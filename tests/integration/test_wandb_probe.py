"""The wandb probe (tests/wandb_probe.py) against a live service on SQLite and Postgres: each of its
81 calls, made through `import holter as wandb` in a process of its own, is stored as wandb keeps
it or accepted and explained on stderr (issue 32)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import ServerProcess
from tests.wandb_probe import CALLS

PROBE = Path(__file__).parents[1] / "wandb_probe.py"

pytest.importorskip("torch")


def test_every_call_of_the_wandb_probe_works(server: ServerProcess, tmp_path: Path) -> None:
    report = tmp_path / "probe.json"
    done = subprocess.run(
        [sys.executable, str(PROBE), "--url", server.url, "--json", str(report)],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    outcome = json.loads(report.read_text())
    failed = [f"{r['call']}: {r['why']}" for r in outcome["results"] if not r["ok"]]
    assert not failed, "\n".join(failed) + done.stderr[-2000:]
    assert outcome["working"] == outcome["calls"] == len(CALLS) == 81
    assert done.returncode == 0
