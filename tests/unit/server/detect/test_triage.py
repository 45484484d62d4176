"""detect/triage.py: which new points can wait for their detector's next call."""

from __future__ import annotations

import math

import numpy as np
import pytest
from holter_server.detect import triage
from holter_server.detect.classify import new_detector
from holter_server.detect.incremental import IncrementalDetector
from holter_server.detect.triage import can_wait


def quiet_loss(points: int = 400) -> IncrementalDetector:
    detector = IncrementalDetector("train/loss")
    rng = np.random.default_rng(3)
    detector.add(np.arange(points), 2.0 + rng.normal(0, 0.02, points))
    return detector


def test_points_close_to_the_level_can_wait() -> None:
    assert can_wait(quiet_loss(), [400, 401, 402, 403], [2.01, 1.99, 2.0, 2.02])


def test_an_outlier_a_nan_or_an_inf_is_read_at_once() -> None:
    detector = quiet_loss()
    assert not can_wait(detector, [400, 401, 402], [2.0, 2.01, 2.6])  # 30 noise units: a spike in the making
    assert not can_wait(detector, [400, 401], [2.0, math.nan])
    assert not can_wait(detector, [400, 401], [2.0, math.inf])


def test_points_on_a_smooth_trend_can_wait_and_a_break_in_it_cannot() -> None:
    detector = IncrementalDetector("tokens_per_second")
    detector.add(np.arange(400), 1000.0 + 5.0 * np.arange(400))  # a steady climb the block level lags behind
    assert can_wait(detector, [400, 401, 402], [3000.0, 3005.0, 3010.0])
    assert not can_wait(detector, [400, 401, 402], [3000.0, 3005.0, 1500.0])


def test_a_detector_that_has_described_no_level_yet_reads_everything() -> None:
    assert not can_wait(IncrementalDetector("train/loss"), [0], [2.0])
    restored = IncrementalDetector.from_state(quiet_loss().state())  # what it last described is not part of its state
    assert not can_wait(restored, [400], [2.0])


def test_nothing_new_and_other_detectors_never_wait() -> None:
    assert not can_wait(quiet_loss(), [], [])
    vitals = new_detector("system/gpu.0.memory_allocated", kind="gpu_memory")
    assert vitals is not None and not isinstance(vitals, IncrementalDetector)
    assert not can_wait(vitals, [0], [60.0])


def test_waiting_changes_no_event_only_when_it_is_found() -> None:
    """Points that waited are read later in one call: the detectors give the same events."""
    rng = np.random.default_rng(5)
    values = 2.0 + rng.normal(0, 0.02, 1200)
    values[700:] = 2.0  # flat from step 700: a plateau, a slow pattern that may wait
    every_second, waiting = IncrementalDetector("train/loss"), IncrementalDetector("train/loss")
    held: list[int] = []
    waited = 0
    for start in range(0, 1200, 10):
        steps = list(range(start, start + 10))
        every_second.add(steps, values[start : start + 10])
        held += steps
        if not can_wait(waiting, held, values[held]) or len(held) >= 50:
            waiting.add(held, values[held])
            held = []
        else:
            waited += 1
    waiting.add(held, values[held])
    assert waited > 50 and ("plateau", 700) in {(e.kind, e.start_step) for e in every_second.events}
    assert [e.to_dict() for e in waiting.events] == [e.to_dict() for e in every_second.events]


def test_small_batches_get_the_same_answer_in_plain_floats_as_in_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handful of points is checked one float at a time (`PLAIN_POINTS`); the answer is numpy's,
    near the band's edges, on trends, with NaN, infinities and extreme values."""
    rng = np.random.default_rng(11)
    detectors = [quiet_loss(), IncrementalDetector("tokens_per_second")]
    detectors[1].add(np.arange(400), 1000.0 + 5.0 * np.arange(400))
    huge = IncrementalDetector("train/loss")
    huge.add(np.arange(400), 1e300 * (1.0 + rng.normal(0, 0.02, 400)))
    detectors.append(huge)
    cases = []
    for detector in detectors:
        base, scale = detector.baseline.last_level() or (0.0, 1.0)
        last = float(detector.tail_values[-1])
        for _ in range(300):
            n = int(rng.integers(1, 12))
            steps = list(range(400, 400 + n))
            around = (
                base if rng.random() < 0.5 else last + (last - float(detector.tail_values[-2])) * np.arange(1, n + 1)
            )
            values = list(np.asarray(around + rng.normal(0, 3.0 * scale, n) * rng.choice([0.5, 0.99, 1.0, 1.01, 2.0])))
            if rng.random() < 0.05:
                values[int(rng.integers(0, n))] = float(rng.choice([math.nan, math.inf, -math.inf, 1e308, -1e308]))
            cases.append((detector, steps, values))
    plain = [can_wait(detector, steps, values) for detector, steps, values in cases]
    monkeypatch.setattr(triage, "PLAIN_POINTS", 0)
    arrays = [can_wait(detector, steps, values) for detector, steps, values in cases]
    assert plain == arrays and 100 < sum(plain) < len(plain) - 100
