"""The code version and environment a run records: a real git repository in a temporary folder."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from holter import provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="no git here")


def git(folder: Path, *args: str) -> str:
    command = ["git", "-C", str(folder), "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args]
    return subprocess.run(command, capture_output=True, check=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    (folder / "train.py").write_text("lr = 3e-4\n")
    git(folder, "add", "train.py")
    git(folder, "commit", "-q", "-m", "first")
    return folder


def test_a_clean_checkout_records_its_commit_and_branch(repo: Path) -> None:
    found = provenance.code_version(repo)
    assert found is not None
    assert found["commit"] == git(repo, "rev-parse", "HEAD") and found["branch"] == "main"
    assert found["dirty"] is False and found["changed_files"] == 0 and "diff_hash" not in found


def test_local_changes_are_told_apart_by_their_hash(repo: Path) -> None:
    (repo / "train.py").write_text("lr = 6e-4\n")
    first = provenance.code_version(repo)
    (repo / "train.py").write_text("lr = 1e-3\n")
    second = provenance.code_version(repo)
    (repo / "train.py").write_text("lr = 6e-4\n")
    again = provenance.code_version(repo)
    assert first and second and again
    assert first["dirty"] and first["changed_files"] == 1 and len(first["diff_hash"]) == 64
    assert first["diff_hash"] != second["diff_hash"] and first["diff_hash"] == again["diff_hash"]
    (repo / "notes.txt").write_text("an untracked file")
    untracked = provenance.code_version(repo)
    assert untracked and untracked["changed_files"] == 2 and untracked["diff_hash"] != first["diff_hash"]


def test_outside_a_repository_only_the_script_is_recorded(tmp_path: Path) -> None:
    found = provenance.code_version(tmp_path)
    assert found is None or ("commit" not in found and "script_hash" in found)


def test_the_environment_names_python_the_host_and_the_packages_that_shape_training() -> None:
    import socket

    found = provenance.environment()
    assert found["python"] == ".".join(map(str, sys.version_info[:3])) and found["hostname"] == socket.gethostname()
    if importlib.util.find_spec("numpy") is not None:  # (the Python 3.9 run has none installed)
        assert "numpy" in found["packages"]
    if "torch" in sys.modules:
        assert found["torch"] == sys.modules["torch"].__version__


def test_a_git_that_hangs_costs_at_most_its_deadline(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import time

    slow = tmp_path / "bin"
    slow.mkdir()
    (slow / "git").write_text("#!/bin/sh\nsleep 5\n")
    (slow / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(provenance, "GIT_TIMEOUT", 0.2)
    started = time.monotonic()
    found = provenance.code_version(repo)
    assert time.monotonic() - started < 2 and (found is None or "commit" not in found)


class OlderService:
    """A loopback service of the version before provenance: its run schema forbids the field."""

    def __init__(self, port: int) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.registrations: list[dict] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status, answer = 200, {"stored": 0}
                if self.path == "/api/v1/runs":
                    service.registrations.append(body)
                    if "provenance" in body:
                        status = 422
                        answer = {
                            "detail": [
                                {
                                    "type": "extra_forbidden",
                                    "loc": ["body", "provenance"],
                                    "msg": "Extra inputs are not permitted",
                                }
                            ]
                        }
                    else:
                        answer = {"id": body["id"], "resumed": False, "last_step": None}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_an_older_service_that_refuses_provenance_still_gets_the_run(spool_dir: Path) -> None:
    import holter

    from tests.servers import free_port

    port = free_port()
    service = OlderService(port)
    try:
        run = holter.init(project="p", url=f"http://127.0.0.1:{port}")
        run.log({"loss": 1.0}, step=0)
        assert run.finish(timeout=10).spooled == 0
    finally:
        service.stop()
    assert "provenance" in service.registrations[0] and "provenance" not in service.registrations[1]


def test_a_registration_spooled_for_an_older_service_is_sent_without_provenance(spool_dir: Path) -> None:
    import holter

    from tests.servers import free_port

    port = free_port()
    run = holter.init(project="p", url=f"http://127.0.0.1:{port}", connect_timeout=0.2)  # the service is away
    run.log({"loss": 1.0}, step=0)
    service = OlderService(port)
    try:
        assert run.finish(timeout=30).spooled == 0
    finally:
        service.stop()
    assert [("provenance" in r) for r in service.registrations][-1] is False
