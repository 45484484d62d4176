"""The sender batches by size and by time, keeps order, and survives refusals.

A real HTTP receiver on loopback stands in for the service.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import holter
import pytest


class Receiver:
    """Records every request; answers like the service (run creation gives no last step)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict]] = []
        self.refuse_points = False
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                receiver.requests.append((self.path, body))
                status, answer = 200, {"resumed": False, "last_step": None}
                if receiver.refuse_points and self.path.endswith("/points"):
                    status, answer = 422, {"detail": "no thanks"}
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def points_requests(self) -> list[dict]:
        return [body for path, body in self.requests if path.endswith("/points")]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.httpd.shutdown()


def test_points_are_sent_columnar_per_metric(receiver: Receiver, spool_dir: Path) -> None:
    run = holter.init(project="p", url=receiver.url)
    run.log({"loss": 2.0, "acc": 0.1}, step=3)
    run.log({"loss": 1.5}, step=4)
    run.finish()
    (batch,) = receiver.points_requests()
    assert batch["metrics"]["loss"]["steps"] == [3, 4]
    assert batch["metrics"]["loss"]["values"] == [2.0, 1.5]
    assert batch["metrics"]["acc"]["steps"] == [3]
    assert batch["step_times"]["steps"] == [3, 4]  # one wall time per step, shared by its metrics
    assert batch["step_times"]["times"][0] <= batch["step_times"]["times"][1]


def test_requests_keep_the_order_of_the_training_loop(receiver: Receiver, spool_dir: Path) -> None:
    run = holter.init(project="p", url=receiver.url)
    run.log({"loss": 1.0}, step=0)
    run.finish("crashed")
    paths = [path for path, _ in receiver.requests]
    assert paths == ["/api/v1/runs", f"/api/v1/runs/{run.id}/points", f"/api/v1/runs/{run.id}/finish"]
    assert receiver.requests[-1][1] == {"status": "crashed"}


def test_a_quiet_run_still_sends_within_the_flush_interval(receiver: Receiver, spool_dir: Path) -> None:
    run = holter.init(project="p", url=receiver.url, flush_interval=0.2)
    run.log({"loss": 1.0}, step=0)
    deadline = time.monotonic() + 5
    while not receiver.points_requests():
        assert time.monotonic() < deadline, "nothing was sent without a flush"
        time.sleep(0.02)
    run.finish()


def test_large_bursts_are_split_into_bounded_batches(receiver: Receiver, spool_dir: Path) -> None:
    run = holter.init(project="p", url=receiver.url, flush_interval=60)
    for step in range(30_000):
        run.log({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0}, step=step)
    run.finish()
    sizes = [sum(len(s["steps"]) for s in batch["metrics"].values()) for batch in receiver.points_requests()]
    assert sum(sizes) == 150_000
    assert max(sizes) <= 50_000 and len(sizes) >= 3


def test_non_numeric_values_are_skipped_and_the_rest_kept(
    receiver: Receiver, spool_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = holter.init(project="p", url=receiver.url)
    run.log({"loss": 1.0, "note": "hello"}, step=0)
    run.log({"loss": 2.0, "note": 3}, step=1)
    run.finish()
    (batch,) = receiver.points_requests()
    assert batch["metrics"]["loss"]["values"] == [1.0, 2.0]
    assert batch["metrics"]["note"] == {"steps": [1], "values": [3.0]}
    assert "non-numeric" in capsys.readouterr().err


def test_a_refused_batch_is_kept_on_disk_and_not_retried(receiver: Receiver, spool_dir: Path) -> None:
    receiver.refuse_points = True
    run = holter.init(project="p", url=receiver.url)
    run.log({"loss": 1.0}, step=0)
    run.finish()
    assert len(receiver.points_requests()) == 1
    (kept,) = (spool_dir / run.id / "rejected").iterdir()
    assert kept.read_bytes().startswith(f"/api/v1/runs/{run.id}/points\n".encode())


def test_fractional_steps_are_refused_at_log_time(receiver: Receiver, spool_dir: Path) -> None:
    run = holter.init(project="p", url=receiver.url)
    with pytest.raises(TypeError):
        run.log({"loss": 1.0}, step=1.5)  # type: ignore[arg-type]
    run.finish()


def test_memory_stays_bounded_when_logging_outruns_sending(receiver: Receiver, spool_dir: Path) -> None:
    run = holter.init(project="p", url=receiver.url, max_queued_calls=1000, flush_interval=60)
    for step in range(20_000):
        run.log({"loss": 1.0}, step=step)
        assert len(run._queue) <= 1000
    run.finish()
    assert sum(len(b["metrics"]["loss"]["steps"]) for b in receiver.points_requests()) == 20_000


def test_a_metric_name_that_is_not_text_is_refused_loudly_and_the_rest_sent(
    receiver: Receiver, spool_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = holter.init(project="p", url=receiver.url)
    run.log({"loss": 1.0, ("a", 1): 2.0}, step=0)
    run.log({"loss": 0.9, ("a", 1): 2.0}, step=1)
    delivery = run.finish()
    (batch,) = receiver.points_requests()
    assert list(batch["metrics"]) == ["loss"] and delivery.refused == 2
    assert capsys.readouterr().err.count("metric name ('a', 1) is not text") == 1
