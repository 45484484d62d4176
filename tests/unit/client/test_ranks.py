"""A rank's own vitals (holter/ranks.py): its steps timed, its waits in collectives, its beat."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from holter.ranks import COMPUTE_S, STEP_S, WAIT_S, CollectiveClock, RankBeat, collective_on, main_thread_stack
from holter.transport import Transport


class Ticks:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def clock_with(ticks: Ticks, logged: list[tuple[dict[str, float], int]] | None = None) -> CollectiveClock:
    sink = (lambda values, step: logged.append((values, step))) if logged is not None else None
    return CollectiveClock(sink, perf=ticks, wall=ticks, mono=ticks)


def test_a_blocking_collective_is_the_steps_wait_and_the_rest_its_own_work() -> None:
    ticks = Ticks()
    clock = clock_with(ticks)
    clock.step_started(0)
    ticks.now += 0.030  # forward and backward
    started = clock.entered("all_reduce")
    assert clock.collective() == ("all_reduce", ticks.now)
    ticks.now += 0.020  # waiting for the other ranks
    clock.left(started)
    assert clock.collective() is None
    ticks.now += 0.005
    clock.step_started(1)
    window = clock.window()
    assert window is not None and window["steps"] == 1 and window["first_step"] == 0
    assert abs(window["step_s"] - 0.055) < 1e-9 and abs(window["wait_s"] - 0.020) < 1e-9
    assert abs(window["compute_s"] - 0.035) < 1e-9


def test_a_ddp_steps_wait_is_its_last_buckets_completion_after_its_last_launch() -> None:
    ticks = Ticks()
    clock = clock_with(ticks)
    clock.step_started(7)
    ticks.now += 0.010
    clock.launched("all_reduce (DDP gradients)")  # an early bucket, overlapped with the rest of backward
    ticks.now += 0.010
    clock.completed()
    ticks.now += 0.010
    clock.launched("all_reduce (DDP gradients)")  # the last bucket: backward is done, the rank waits
    assert clock.collective() is not None and clock.collective()[0] == "all_reduce (DDP gradients)"  # type: ignore[index]
    ticks.now += 0.040
    clock.completed()
    assert clock.collective() is None
    ticks.now += 0.002
    clock.step_started(8)
    window = clock.window()
    assert window is not None
    assert abs(window["wait_s"] - 0.040) < 1e-9 and abs(window["compute_s"] - 0.032) < 1e-9


def test_the_window_keeps_the_last_200_steps_and_gives_medians() -> None:
    ticks = Ticks()
    clock = clock_with(ticks)
    for step in range(300):
        clock.step_started(step)
        ticks.now += 0.1 if step < 100 else 0.01
    clock.step_started(300)
    window = clock.window()
    assert window is not None and window["steps"] == 200 and window["first_step"] == 100
    assert abs(window["step_s"] - 0.01) < 1e-9


def test_timings_reach_the_run_at_most_once_a_second_as_the_mean_of_the_steps_since() -> None:
    ticks = Ticks()
    logged: list[tuple[dict[str, float], int]] = []
    clock = clock_with(ticks, logged)
    for step in range(25):  # 0.1 s a step: a log every ~10 steps
        clock.step_started(step)
        ticks.now += 0.1
    assert [step for _, step in logged] == [9, 19]
    values, _ = logged[0]
    assert set(values) == {STEP_S, WAIT_S, COMPUTE_S} and abs(values[STEP_S] - 0.1) < 1e-9


def test_the_same_step_started_again_is_one_step() -> None:
    ticks = Ticks()
    clock = clock_with(ticks)
    clock.step_started(3)
    ticks.now += 1.0
    clock.step_started(3)  # a second forward of the step (gradient accumulation, an extra pass)
    assert clock.window() is None and clock.step == 3


def test_a_stack_inside_torch_distributed_is_inside_that_collective() -> None:
    stack = [
        {"file": "/job/train.py", "line": 10, "function": "main", "code": ""},
        {"file": "/venv/torch/distributed/distributed_c10d.py", "line": 2800, "function": "all_reduce", "code": ""},
        {"file": "/venv/torch/distributed/c10d_logger.py", "line": 81, "function": "wrapper", "code": ""},
    ]
    assert collective_on(stack) == "all_reduce"
    assert collective_on([{"file": "/job/train.py", "line": 3, "function": "all_reduce", "code": ""}]) is None


def test_the_main_threads_stack_is_read_from_another_thread() -> None:
    seen: list[list[dict[str, Any]]] = []
    reader = threading.Thread(target=lambda: seen.append(main_thread_stack()))
    reader.start()
    reader.join()
    (stack,) = seen
    (ours,) = [f for f in stack if f["function"] == "test_the_main_threads_stack_is_read_from_another_thread"]
    assert ours["file"].endswith("test_ranks.py") and "reader." in ours["code"]


class _Receiver:
    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.bodies.append((self.path, json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "15")
                self.end_headers()
                self.wfile.write(b'{"status":"ok"}')

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def test_a_quiet_rank_beats_its_step_its_collective_its_timings_and_its_stack() -> None:
    receiver = _Receiver()
    ticks = Ticks()
    clock = clock_with(ticks)
    for step in range(30):
        clock.step_started(step)
        ticks.now += 0.05
    clock.launched("all_reduce (DDP gradients)")  # stuck in step 29's gradients
    beat = RankBeat(
        transport=Transport(receiver.url),
        path="/api/v1/runs/r/ranks/2/beat",
        clock=clock,
        logged_step=lambda: 28,
        interval=5.0,
    )
    ticks.now += 40.0  # no step for 40 s
    assert beat.beat()
    receiver.server.shutdown()
    ((path, body),) = receiver.bodies
    assert path == "/api/v1/runs/r/ranks/2/beat"
    assert body["step"] == 29 and body["interval_s"] == 5.0
    assert body["collective"]["name"] == "all_reduce (DDP gradients)"
    assert body["timing"]["steps"] == 29 and abs(body["timing"]["step_s"] - 0.05) < 1e-6
    assert abs(body["quiet_s"] - 40.05) < 1e-6 and abs(body["collective"]["since_s"] - 40.0) < 1e-6
    # quiet: the main thread's stack goes with it (here the test's own, sending the beat)
    assert any(
        frame["function"] == "test_a_quiet_rank_beats_its_step_its_collective_its_timings_and_its_stack"
        for frame in body["stack"]
    )


def test_a_beat_the_service_does_not_take_is_dropped_without_a_word() -> None:
    beat = RankBeat(
        transport=Transport("http://127.0.0.1:9", timeout=0.5),  # the discard port: nothing listens
        path="/api/v1/runs/r/ranks/0/beat",
        clock=CollectiveClock(),
        logged_step=lambda: -1,
        interval=5.0,
    )
    assert beat.beat() is False and beat.sent == 0


def test_a_bigger_job_spaces_its_beats_so_it_offers_what_256_ranks_do(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from holter.ranks import rank_interval

    monkeypatch.delenv("HOLTER_RANK_INTERVAL", raising=False)
    assert [rank_interval(n) for n in (4, 256, 512, 1024, 100_000)] == [5.0, 5.0, 10.0, 20.0, 60.0]
    monkeypatch.setenv("HOLTER_RANK_INTERVAL", "2")
    assert rank_interval(1024) == 2.0
