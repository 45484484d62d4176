"""The client runs on Python 3.9+: no syntax or standard-library use of a newer Python.

`vermin` reads the code and names the oldest Python each construct needs; `.ci/python39` also
runs the client's tests under a real Python 3.9.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[3] / "client" / "holter"
OLDEST = "3.9"


def test_client_code_needs_nothing_newer_than_python_3_9() -> None:
    pytest.importorskip("vermin")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, vermin; sys.exit(vermin.main())",
            "--no-tips",
            "--violations",
            "--eval-annotations",
            "--backport",
            "typing",
            f"-t={OLDEST}-",
            str(CLIENT),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
