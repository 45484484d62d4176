"""The disk spool keeps batches in order, whole, until acknowledged."""

from __future__ import annotations

from pathlib import Path

from holter.spool import Spool


def test_batches_come_back_oldest_first(tmp_path: Path) -> None:
    spool = Spool(tmp_path, "run1")
    for i in range(50):
        spool.put(f"batch {i}".encode())
    assert [p.read_bytes() for p in spool.pending()] == [f"batch {i}".encode() for i in range(50)]


def test_a_second_spool_for_the_same_run_appends_after_the_first(tmp_path: Path) -> None:
    Spool(tmp_path, "run1").put(b"old")
    Spool(tmp_path, "run1").put(b"new")
    assert [p.read_bytes() for p in Spool(tmp_path, "run1").pending()] == [b"old", b"new"]


def test_removed_batches_are_not_replayed(tmp_path: Path) -> None:
    spool = Spool(tmp_path, "run1")
    first = spool.put(b"a")
    spool.put(b"b")
    spool.remove(first)
    assert [p.read_bytes() for p in spool.pending()] == [b"b"]
    assert len(spool) == 1


def test_half_written_files_are_ignored(tmp_path: Path) -> None:
    spool = Spool(tmp_path, "run1")
    spool.put(b"whole")
    (spool.path / ".00000000000000000001.123.tmp").write_bytes(b"half")
    assert [p.read_bytes() for p in spool.pending()] == [b"whole"]


def test_an_absent_spool_is_empty(tmp_path: Path) -> None:
    assert len(Spool(tmp_path, "never-used")) == 0


def test_a_spool_holds_its_own_runs_requests_only() -> None:
    from holter.spool import own_request

    assert own_request("r1", "/api/v1/runs", b'{"id": "r1", "project": "p"}')
    for name in ("points", "summary", "alerts", "nonfinite", "finish"):
        assert own_request("r1", f"/api/v1/runs/r1/{name}", b"{}")
    for path, body in [
        ("/api/v1/runs", b'{"id": "r2"}'),  # another run's registration
        ("/api/v1/runs", b"not json"),
        ("/api/v1/runs/r2/finish", b"{}"),  # another run's
        ("/api/v1/runs/r1/../r2/finish", b"{}"),
        ("/api/v1/channels", b"{}"),
        ("/api/v1/keys", b"{}"),
        ("@evil.example/api/v1/runs/r1/points", b"{}"),  # would send the key to another host
        ("/api/v1/runs/r1/heartbeat", b"{}"),
    ]:
        assert not own_request("r1", path, body), path
    assert not own_request("..", "/api/v1/runs/../points", b"{}")  # no run has such an id
