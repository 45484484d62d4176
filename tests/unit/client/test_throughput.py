"""Throughput and step time: the meter's arithmetic, and what `Run` logs with it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import holter
from holter.throughput import SAMPLES_PER_S, STEP_TIME, TOKENS_PER_S, ThroughputMeter, rates
from holter_server.detect import infer_kind
from tests.servers import free_port


class FakeClock:
    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0)


@pytest.fixture
def offline_run(spool_dir: Path) -> Iterator[holter.Run]:
    """A run whose service is away: points go to the spool, `summary` still shows them."""
    run = holter.init(project="throughput", url=f"http://127.0.0.1:{free_port()}", connect_timeout=0.2)
    yield run
    run.finish(timeout=0.5)


def test_rates_divide_tokens_and_samples_by_the_step_time() -> None:
    assert rates(0.5, tokens=4096, samples=8) == {STEP_TIME: 0.5, TOKENS_PER_S: 8192.0, SAMPLES_PER_S: 16.0}


def test_rates_without_counts_give_the_step_time_only() -> None:
    assert rates(0.25) == {STEP_TIME: 0.25}


def test_first_mark_only_starts_the_clock() -> None:
    meter = ThroughputMeter(clock=FakeClock(10.0, 12.0))
    assert meter.mark(tokens=100) is None
    assert meter.mark(tokens=100) == {STEP_TIME: 2.0, TOKENS_PER_S: 50.0}


def test_restart_forgets_the_previous_mark() -> None:
    meter = ThroughputMeter(clock=FakeClock(0.0, 100.0, 101.0))
    meter.mark()
    meter.restart()
    assert meter.mark() is None
    assert meter.mark(samples=4) == {STEP_TIME: 1.0, SAMPLES_PER_S: 4.0}


def test_names_are_read_as_throughput_and_step_time_by_the_service() -> None:
    assert [infer_kind(name) for name in (TOKENS_PER_S, SAMPLES_PER_S, STEP_TIME)] == ["throughput", "throughput", "step_time"]


def test_log_throughput_logs_the_time_between_calls(offline_run: holter.Run) -> None:
    offline_run.log_throughput(tokens=1000, samples=10, step=0)
    assert dict(offline_run.summary) == {}
    time.sleep(0.05)
    offline_run.log_throughput(tokens=1000, samples=10, step=1)
    summary = offline_run.summary
    assert summary[STEP_TIME] >= 0.05
    assert summary[TOKENS_PER_S] == pytest.approx(1000 / summary[STEP_TIME])
    assert summary[SAMPLES_PER_S] == pytest.approx(10 / summary[STEP_TIME])


def test_timed_step_logs_the_block_duration(offline_run: holter.Run) -> None:
    with offline_run.timed_step(tokens=512, step=3):
        time.sleep(0.05)
    assert offline_run.summary[STEP_TIME] >= 0.05
    assert offline_run.summary[TOKENS_PER_S] == pytest.approx(512 / offline_run.summary[STEP_TIME])


def test_timed_step_logs_nothing_when_the_step_raises(offline_run: holter.Run) -> None:
    with pytest.raises(RuntimeError):
        with offline_run.timed_step(tokens=512):
            raise RuntimeError("out of memory")
    assert STEP_TIME not in offline_run.summary


def test_summary_keeps_the_last_value_of_each_metric(offline_run: holter.Run) -> None:
    offline_run.log({"loss": 2.0, "acc": 0.1}, step=0)
    offline_run.log({"loss": 1.5}, step=1)
    assert dict(offline_run.summary) == {"loss": 1.5, "acc": 0.1}
    with pytest.raises(TypeError):
        offline_run.summary["loss"] = 0.0  # type: ignore[index]
