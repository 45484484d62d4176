"""GPU vital detectors: a memory leak, a utilisation collapse while steps go on, throttling."""

from __future__ import annotations

import json

import numpy as np
import pytest
from holter_server.detect.classify import classify_series, detector_from_state, new_detector
from holter_server.vocabulary import understand
from holter_server.vocabulary.signals import signal

STEPS = np.arange(0, 3000, 10)  # one sample every ten steps
MEMORY = "holter/system/gpu.0.memory_used_frac"
UTIL = "holter/system/gpu.3.utilization"
THERMAL = "holter/system/gpu.0.throttle.thermal"


def healthy_memory(n: int = 300) -> np.ndarray:
    """Loading and warming up, then flat with a small jitter (the caching allocator holds it)."""
    rng = np.random.default_rng(0)
    return np.r_[np.linspace(0.05, 0.62, 15), 0.62 + rng.normal(0, 0.002, n - 15)]


def test_names_map_to_the_gpu_kinds_and_other_system_vitals_are_not_read():
    assert [understand(m).kind for m in (MEMORY, UTIL, THERMAL, "holter/system/gpu.1.throttle.power")] == [
        "gpu_memory",
        "gpu_utilization",
        "gpu_throttle",
        "gpu_throttle",
    ]
    assert not any(
        signal(understand(m).kind).analysed for m in ("holter/system/cpu.percent", "holter/system/gpu.0.temperature_c")
    )


def test_memory_creeping_to_the_limit_is_a_leak():
    memory = healthy_memory()
    memory[150:] += np.arange(150) * 0.0025  # +0.25 % of the card per sample from step 1,500
    (event,) = classify_series(STEPS, memory, metric=MEMORY)
    assert event.kind == "gpu_memory_leak" and 1_200 <= event.start_step <= 1_700
    assert event.severity == "critical"  # it ends above 95 %
    assert "GPU 0 memory keeps climbing" in event.summary


def test_flat_memory_after_warmup_is_healthy():
    assert classify_series(STEPS, healthy_memory(), metric=MEMORY) == []


def test_one_step_up_in_memory_is_not_a_leak():
    memory = healthy_memory()
    memory[200:] += 0.15  # an eval pass allocates once and keeps it cached
    assert classify_series(STEPS, memory, metric=MEMORY) == []


def test_utilisation_collapsing_while_steps_continue_is_named():
    util = np.r_[np.full(150, 97.0), np.full(20, 4.0), np.full(130, 96.0)]
    (event,) = classify_series(STEPS, util, metric=UTIL)
    assert (event.kind, event.start_step, event.end_step) == ("gpu_idle", 1500, 1690)
    assert "GPU 3 utilisation fell from 97% to 4%" in event.summary and "input pipeline" in event.summary


def test_a_dip_of_two_samples_or_an_idle_start_is_not_a_collapse():
    util = np.r_[np.full(5, 0.0), np.full(145, 95.0), np.full(2, 5.0), np.full(148, 95.0)]
    assert classify_series(STEPS, util, metric=UTIL) == []


def test_a_gpu_that_was_never_busy_is_not_collapsing():
    assert classify_series(STEPS, np.full(300, 8.0), metric=UTIL) == []


def test_throttling_for_several_samples_is_named_with_its_cause():
    flags = np.zeros(300)
    flags[100:106] = 1.0
    flags[50] = 1.0  # one sample: a blip
    (event,) = classify_series(STEPS, flags, metric=THERMAL)
    assert (event.kind, event.start_step, event.end_step) == ("gpu_throttled", 1000, 1050)
    assert "heat" in event.summary and event.details["cause"] == "thermal"


@pytest.mark.parametrize("metric", [MEMORY, UTIL, THERMAL])
def test_fed_in_batches_through_saved_state_the_events_are_the_same(metric):
    values = {
        MEMORY: np.r_[healthy_memory(150), 0.62 + np.arange(150) * 0.0025],
        UTIL: np.r_[np.full(150, 97.0), np.full(20, 4.0), np.full(130, 96.0)],
        THERMAL: np.r_[np.zeros(100), np.ones(6), np.zeros(3), np.ones(5), np.zeros(186)],
    }[metric]
    detector = new_detector(metric)
    for start in range(0, 300, 7):
        detector = detector_from_state(json.loads(json.dumps(detector.state())))
        detector.add(STEPS[start : start + 7], values[start : start + 7])
    assert [e.to_dict() for e in detector.events] == [
        e.to_dict() for e in classify_series(STEPS, values, metric=metric)
    ]
    assert detector.events
