"""`pip install .` with no extras gives a working client and nothing of the service."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHECK = """
import importlib.util, sys
import holter
assert holter.init and holter.Run
for name in ("fastapi", "sqlalchemy", "dash", "psycopg", "pydantic", "numpy", "holter_server"):
    assert importlib.util.find_spec(name) is None or name == "holter_server", name
for bare in ("client", "server", "dashboard"):
    assert importlib.util.find_spec(bare) is None, bare
# `holter follow` and sync_tensorboard read files with the readers shipped beside the client
import holter.follow, holter.tensorboard_sync, holter_readers.files
assert holter_readers.files.open_reader
print("ok")
"""


@pytest.mark.slow
def test_client_installs_alone_and_imports_without_service_dependencies(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(REPO)], capture_output=True, text=True, timeout=600, check=False
    )
    assert install.returncode == 0, install.stderr[-2000:]
    # Run outside the repository, where the source folders would shadow what was installed.
    check = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert check.stdout.strip() == "ok", check.stderr
    serve = subprocess.run([str(env_dir / "bin" / "holter"), "serve"], capture_output=True, text=True, check=False)
    assert serve.returncode == 2
    assert "pip install 'holter[server]'" in serve.stderr
    assert subprocess.run([str(env_dir / "bin" / "holter"), "--help"], capture_output=True, check=False).returncode == 0
    (tmp_path / "metrics.csv").write_text("step,loss\n0,2.0\n")
    follow = subprocess.run(
        [str(env_dir / "bin" / "holter"), "follow", str(tmp_path / "metrics.csv"), "--pattern", "("],
        check=False,
        capture_output=True,
        text=True,
    )
    assert follow.returncode == 2 and "not a regular expression" in follow.stderr
