"""`watch_loader`: the time each step waited for its batch, on a scripted clock and a real slow loader."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from holter.loader import COMPUTE, WAIT, WAIT_FRACTION, LoaderWatch, watch_loader


class RecordingRun:
    def __init__(self) -> None:
        self.logged: list[tuple[int | None, dict[str, float]]] = []

    def log(self, metrics, step=None) -> None:  # type: ignore[no-untyped-def]
        self.logged.append((step, dict(metrics)))


class ScriptedClock:
    """Advances only when the loader or the loop body says it spent time."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def slow_batches(clock: ScriptedClock, waits: list[float]) -> Iterator[int]:
    for index, wait in enumerate(waits):
        clock.now += wait
        yield index


def test_each_step_logs_its_wait_its_compute_and_the_share_spent_waiting() -> None:
    run, clock = RecordingRun(), ScriptedClock()
    for _ in LoaderWatch(slow_batches(clock, [0.01, 0.03, 0.3]), run, clock=clock):
        clock.now += 0.1  # the step's own work
    assert [step for step, _ in run.logged] == [0, 1, 2]
    for (_, metrics), wait in zip(run.logged, [0.01, 0.03, 0.3]):
        assert metrics[WAIT] == pytest.approx(wait)
        assert metrics[COMPUTE] == pytest.approx(0.1)
        assert metrics[WAIT_FRACTION] == pytest.approx(wait / (wait + 0.1))


class SlowToStart:
    """A loader whose `iter()` takes time, as a DataLoader's does while its workers start."""

    def __init__(self, clock: ScriptedClock) -> None:
        self.clock = clock

    def __iter__(self) -> Iterator[int]:
        self.clock.now += 2.0
        return iter([0, 1])


def test_starting_the_loader_counts_as_the_first_batchs_wait_and_steps_go_on_across_epochs() -> None:
    run, clock = RecordingRun(), ScriptedClock()
    loader = LoaderWatch(SlowToStart(clock), run, clock=clock)
    for _ in range(2):
        for _ in loader:
            clock.now += 0.5
    assert [step for step, _ in run.logged] == [0, 1, 2, 3]
    assert [m[WAIT] for _, m in run.logged] == pytest.approx([2.0, 0.0, 2.0, 0.0])


def test_the_step_function_is_read_when_the_batch_is_handed_over() -> None:
    run = RecordingRun()
    global_step = 41
    for _ in watch_loader(range(3), run, step=lambda: global_step):  # noqa: B023 — the live variable is the point
        global_step += 1  # the body moves the caller's step on before the loader logs
    assert [step for step, _ in run.logged] == [41, 42, 43]


def test_leaving_the_loop_early_logs_what_was_complete() -> None:
    run = RecordingRun()
    for index in watch_loader(range(10), run):
        if index == 3:
            break
    assert [step for step, _ in run.logged] == [0, 1, 2]


def test_a_real_slow_loader_shows_as_a_high_share_of_waiting() -> None:
    def throttled() -> Iterator[int]:
        for index in range(4):
            time.sleep(0.03)
            yield index

    run = RecordingRun()
    for _ in watch_loader(throttled(), run):
        sum(range(1000))  # a step far quicker than the loader
    assert all(metrics[WAIT_FRACTION] > 0.5 for _, metrics in run.logged)


def test_the_loaders_length_is_passed_through() -> None:
    assert len(watch_loader([1, 2, 3], RecordingRun())) == 3
