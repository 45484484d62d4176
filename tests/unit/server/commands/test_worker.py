"""The worker process starts with only what it runs: every `holter serve` spawns one, so what its
import costs is paid on every start (and by every test that starts a service)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_the_worker_imports_neither_the_web_app_nor_scipy_stats() -> None:
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, holter_server.commands.worker; "
            "heavy = ('fastapi', 'dash', 'scipy.stats', 'holter_server.app'); "
            "print(json.dumps(sorted(m for m in heavy if m in sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(loaded.stdout) == []
