"""Throughput and step time: the meter's arithmetic, and what `Run` logs with it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import holter
import pytest
from holter.loader import watch_loader
from holter.throughput import (
    COMPUTE_MFU,
    COMPUTE_SAMPLES_PER_S,
    COMPUTE_TIME,
    COMPUTE_TOKENS_PER_S,
    MFU,
    SAMPLES_PER_S,
    STEP_TIME,
    TOKENS_PER_S,
    StepClock,
    ThroughputMeter,
    peak_flops_for,
    rates,
)
from holter_server.vocabulary import understand
from holter_server.vocabulary.signals import panel_of

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
    names = (TOKENS_PER_S, SAMPLES_PER_S, COMPUTE_TOKENS_PER_S, COMPUTE_SAMPLES_PER_S, STEP_TIME, COMPUTE_TIME)
    kinds = ["throughput"] * 4 + ["step_time", "compute_time"]
    assert [understand(name).kind for name in names] == kinds


def test_the_step_clock_counts_the_wait_between_steps_in_the_whole_step_only() -> None:
    # step 0's block 0.0-0.1; a 0.5 s wait for data; step 1's block 0.6-0.7
    clock = StepClock(clock=FakeClock(0.0, 0.1, 0.6, 0.7))
    first = clock.step(clock.now(), tokens=100)
    assert first == {COMPUTE_TIME: pytest.approx(0.1), COMPUTE_TOKENS_PER_S: pytest.approx(1000)}
    second = clock.step(clock.now(), tokens=100)
    assert second[COMPUTE_TIME] == pytest.approx(0.1) and second[COMPUTE_TOKENS_PER_S] == pytest.approx(1000)
    assert second[STEP_TIME] == pytest.approx(0.6) and second[TOKENS_PER_S] == pytest.approx(100 / 0.6)


def test_the_first_steps_whole_time_takes_the_wait_a_loader_watch_noted() -> None:
    clock = StepClock(clock=FakeClock(1.0, 1.25))
    clock.note_wait(0.75)
    found = clock.step(clock.now(), samples=8)
    assert found[STEP_TIME] == pytest.approx(1.0) and found[SAMPLES_PER_S] == pytest.approx(8.0)
    assert found[COMPUTE_SAMPLES_PER_S] == pytest.approx(32.0)


def test_restarting_the_step_clock_leaves_a_pause_out() -> None:
    clock = StepClock(clock=FakeClock(0.0, 0.1, 50.0, 50.1))
    clock.step(clock.now(), tokens=10)
    clock.restart()  # an evaluation ran in between
    assert STEP_TIME not in clock.step(clock.now(), tokens=10)


def test_mfu_is_drawn_on_a_chart_of_its_own_not_the_tokens_per_second_one() -> None:
    assert understand(MFU).kind == understand(COMPUTE_MFU).kind == "mfu"
    assert panel_of("mfu") == "mfu" and panel_of(understand(TOKENS_PER_S).kind) == "throughput"


def test_log_throughput_logs_the_time_between_calls(offline_run: holter.Run) -> None:
    offline_run.log_throughput(tokens=1000, samples=10, step=0)
    assert dict(offline_run.summary) == {}
    time.sleep(0.05)
    offline_run.log_throughput(tokens=1000, samples=10, step=1)
    summary = offline_run.summary
    assert summary[STEP_TIME] >= 0.05
    assert summary[TOKENS_PER_S] == pytest.approx(1000 / summary[STEP_TIME])
    assert summary[SAMPLES_PER_S] == pytest.approx(10 / summary[STEP_TIME])


def test_timed_step_logs_the_block_and_the_whole_step(offline_run: holter.Run) -> None:
    with offline_run.timed_step(tokens=512, step=3):
        time.sleep(0.05)
    assert offline_run.summary[COMPUTE_TIME] >= 0.05 and STEP_TIME not in offline_run.summary  # no step before it
    assert offline_run.summary[COMPUTE_TOKENS_PER_S] == pytest.approx(512 / offline_run.summary[COMPUTE_TIME])
    time.sleep(0.1)  # waiting for the next batch
    with offline_run.timed_step(tokens=512, step=4):
        time.sleep(0.05)
    whole, compute = offline_run.summary[STEP_TIME], offline_run.summary[COMPUTE_TIME]
    assert whole >= compute + 0.1 and offline_run.summary[TOKENS_PER_S] == pytest.approx(512 / whole)


def test_a_loader_stall_shows_in_the_whole_step_throughput_not_in_the_compute(offline_run: holter.Run) -> None:
    def batches() -> Iterator[int]:
        for i in range(6):
            if i == 3:
                time.sleep(0.3)  # the loader stalls before batch 3
            yield i

    logged: dict[int, dict[str, float]] = {}
    for step in watch_loader(batches(), offline_run):
        with offline_run.timed_step(tokens=1000, step=step):
            time.sleep(0.02)
        logged[step] = dict(offline_run.summary)
    whole = {s: m[TOKENS_PER_S] for s, m in logged.items()}
    compute = {s: m[COMPUTE_TOKENS_PER_S] for s, m in logged.items()}
    assert set(whole) == set(range(6))  # the first step's whole time is its wait plus its block
    assert whole[3] < 0.2 * min(w for s, w in whole.items() if s != 3)
    assert compute[3] > 0.5 * max(compute.values())


def test_timed_step_logs_nothing_when_the_step_raises(offline_run: holter.Run) -> None:
    with pytest.raises(RuntimeError), offline_run.timed_step(tokens=512):
        raise RuntimeError("out of memory")
    assert STEP_TIME not in offline_run.summary and COMPUTE_TIME not in offline_run.summary


def test_summary_keeps_the_last_value_of_each_metric(offline_run: holter.Run) -> None:
    offline_run.log({"loss": 2.0, "acc": 0.1}, step=0)
    offline_run.log({"loss": 1.5}, step=1)
    assert dict(offline_run.summary) == {"loss": 1.5, "acc": 0.1}


def test_mfu_is_the_models_flops_per_second_over_the_peak() -> None:
    # 4,096 tokens in 0.5 s of a model doing 6 x 124M + 12 x 12 x 768 x 1024 FLOPs per token on an A100:
    # 8,192 tokens/s x 857,246,208 FLOPs = 7.023e12 FLOP/s, 2.251% of 312e12
    flops = 6 * 124e6 + 12 * 12 * 768 * 1024
    metrics = rates(0.5, tokens=4096, flops_per_token=flops, peak_flops=312e12)
    assert flops == 857_246_208
    assert metrics[MFU] == pytest.approx(8192 * 857_246_208 / 312e12)
    assert metrics[MFU] == pytest.approx(0.02251, rel=1e-3)


def test_the_peak_can_be_given_by_the_gpus_name() -> None:
    assert rates(1.0, tokens=1000, flops_per_token=1e9, peak_flops="H100")[MFU] == pytest.approx(1e12 / 989e12)


# Device names as nvidia-smi and torch.cuda.get_device_name print them (RunPod's GPU type ids are
# these names, e.g. "NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL", "NVIDIA A100 80GB PCIe").
@pytest.mark.parametrize(
    ("name", "tflops"),
    [
        ("NVIDIA H100 80GB HBM3", 989),
        ("NVIDIA H100 PCIe", 756),
        ("NVIDIA H100 NVL", 835),
        ("NVIDIA H200", 989),
        ("NVIDIA H200 NVL", 835),
        ("NVIDIA A100-SXM4-80GB", 312),
        ("NVIDIA A100 80GB PCIe", 312),
        ("NVIDIA A10G", 125),
        ("NVIDIA A10", 125),
        ("NVIDIA L4", 121),
        ("NVIDIA L40S", 362),
        ("NVIDIA GeForce RTX 4090", 165.2),
        ("NVIDIA GeForce RTX 3090", 71),
        ("Tesla V100-SXM2-16GB", 125),
        ("Tesla V100-PCIE-32GB", 112),
        ("Tesla T4", 65),
        ("AMD Instinct MI300X", 1307.4),
        ("NVIDIA B200", 2250),
    ],
)
def test_peak_flops_of_common_gpus_by_name(name: str, tflops: float) -> None:
    assert peak_flops_for(name) == pytest.approx(tflops * 1e12)


def test_an_unknown_device_is_refused_rather_than_guessed() -> None:
    with pytest.raises(ValueError, match="give peak_flops as a number"):
        peak_flops_for("NVIDIA A40")  # a card not in the table: no guess from its neighbours
    with pytest.raises(ValueError, match="peak_flops"):
        rates(1.0, tokens=10, flops_per_token=1e6)


def test_timed_step_logs_mfu_over_the_whole_step_and_the_compute(offline_run: holter.Run) -> None:
    for step in range(2):
        with offline_run.timed_step(tokens=2048, step=step, flops_per_token=1e9, peak_flops=1e12):
            time.sleep(0.02)
        time.sleep(0.02)
    summary = offline_run.summary
    assert summary[MFU] == pytest.approx(2048 * 1e9 / summary[STEP_TIME] / 1e12)
    assert summary[COMPUTE_MFU] == pytest.approx(2048 * 1e9 / summary[COMPUTE_TIME] / 1e12)
    assert summary[MFU] < summary[COMPUTE_MFU]


def test_timed_step_refuses_an_unknown_peak_before_the_step_runs(offline_run: holter.Run) -> None:
    ran = False
    with (
        pytest.raises(ValueError),
        offline_run.timed_step(tokens=2048, flops_per_token=1e9, peak_flops="a pocket calculator"),
    ):
        ran = True
    assert not ran
