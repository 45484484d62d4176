"""Batch and incremental entry points agree; state survives a save and restore."""

import json

import numpy as np
import pytest
from detect_curves import decaying_loss, flat
from holter_server.detect import IncrementalDetector, classify_series
from holter_server.detect.events import Event
from holter_server.detect.incremental import TAIL_POINTS

from tests.real_curves import load_corpus


def synthetic_corpus():
    rng = np.random.default_rng(11)
    loss_spike = decaying_loss(1500)
    loss_spike[[700, 1100]] *= 1.6
    nan_loss = decaying_loss(900)
    nan_loss[700:] = np.nan
    saw = flat(1600, 170, 0.01)
    saw[np.arange(50, 1600, 150)] = 330
    shift = flat(1200, 5e4, 0.02)
    shift[800:] *= 0.6
    grow = 0.3 * np.exp(rng.normal(0, 0.05, 1200))
    grow[600:] *= np.exp(0.01 * np.arange(600))
    zig = decaying_loss(2500, noise=0.003) * (1 + 0.06 * ((np.arange(2500) % 90) / 90 - 0.5))
    short_saw = np.abs(rng.normal(0.004, 0.001, 600))
    short_saw[np.arange(100, 400, 6)] = 0.11
    short_saw[[40, 45]] = 0.2
    t = np.arange(400)
    act = 0.6 * (1 + 5 * np.log1p(t / 30) / np.log1p(400 / 30)) * (1 + rng.normal(0, 0.01, 400))
    act[300:] *= np.exp(np.log(8) * np.arange(100) / 100)
    layer = 0.3 * np.exp(rng.normal(0, 0.08, 800))
    layer[300:] *= 2.5
    layer[600:] /= 2.5
    return [
        ("loss", loss_spike),
        ("loss", nan_loss),
        ("step_time", saw),
        ("tokens_per_s", shift),
        ("grad_norm", grow),
        ("loss", zig),
        ("grad_norm", np.zeros(40)),
        ("eval_loss", 1.2 + np.abs(np.linspace(-1, 1, 30))),
        ("logprob_mismatch/abs_diff_mean", short_saw),
        ("act_norm/head", act),
        ("grad_norm/blocks.0", layer),
    ]


def corpus():
    """The synthetic cases above and every real series the classifier reads (tests/data/real_curves)."""
    cases = [(f"synthetic-{i}-{m}", m, None, np.arange(len(v)) * 3, v) for i, (m, v) in enumerate(synthetic_corpus())]
    for series in load_corpus():
        if series.kind != "other":
            cases.append((series.name, series.metric_name, series.kind, *series.arrays()))
    return cases


def feed_in_random_batches(metric, steps, values, seed, restore_every=None, kind=None):
    rng = np.random.default_rng(seed)
    detector = IncrementalDetector(metric, kind=kind)
    i = 0
    while i < len(steps):
        n = int(rng.integers(1, 80))
        order = rng.permutation(min(n, len(steps) - i))
        detector.add(steps[i : i + n][order], values[i : i + n][order])
        i += n
        if restore_every and rng.random() < restore_every:
            detector = IncrementalDetector.from_state(json.loads(json.dumps(detector.state())))
    return detector


@pytest.mark.parametrize("case", corpus(), ids=lambda c: c[0])
def test_incremental_in_random_out_of_order_batches_equals_batch(case):
    _, metric, kind, steps, values = case
    whole = IncrementalDetector(metric, kind=kind)
    whole.add(steps, values)
    batch = [e.to_dict() for e in classify_series(steps, values, metric=metric, kind=kind)]
    incremental = feed_in_random_batches(metric, steps, values, seed=len(steps), kind=kind)
    assert [e.to_dict() for e in incremental.events] == batch == [e.to_dict() for e in whole.events]
    # and the outline the run-level rules read (train vs eval loss) is the same too
    assert incremental.outline.state() == whole.outline.state()


@pytest.mark.parametrize("case", corpus()[:11], ids=lambda c: c[0])
def test_state_saved_and_restored_mid_stream_gives_identical_events(case):
    _, metric, kind, steps, values = case
    batch = [e.to_dict() for e in classify_series(steps, values, metric=metric, kind=kind)]
    restored = feed_in_random_batches(metric, steps, values, seed=3, restore_every=0.2, kind=kind)
    assert [e.to_dict() for e in restored.events] == batch


def test_state_is_json_serialisable_and_bounded():
    detector = IncrementalDetector("loss")
    detector.add(np.arange(50_000), decaying_loss(50_000))
    text = json.dumps(detector.state(), allow_nan=False)
    assert len(text) < 200_000


def test_growing_event_keeps_its_identity_and_is_not_duplicated():
    values = np.full(20, 0.0)
    detector = IncrementalDetector("grad_norm")
    first = detector.add(np.arange(5), values[:5]).changed
    second = detector.add(np.arange(5, 20), values[5:]).changed
    assert [e.event_id for e in first] == [e.event_id for e in second]
    assert len(detector.events) == 1 and detector.events[0].end_step == 19


def test_late_and_duplicate_steps_are_ignored_and_counted():
    detector = IncrementalDetector("loss")
    detector.add([1, 2, 3], [5.0, 4.0, 3.0])
    detector.add([2, 3, 4, 4], [9.0, 9.0, 2.9, 7.0])
    assert detector.late_points == 3 and detector.finite_seen == 4


def test_spikes_folded_into_a_sawtooth_are_withdrawn():
    values = flat(1500, 170, 0.01)
    values[np.arange(100, 1500, 189)] = 320
    detector = IncrementalDetector("step_time")
    withdrawn = []
    for i in range(0, 1500, 50):
        withdrawn += detector.add(np.arange(i, i + 50), values[i : i + 50]).withdrawn
    assert withdrawn and all(":spike@" in w for w in withdrawn)
    assert [e.kind for e in detector.events] == ["sawtooth"]


@pytest.mark.parametrize("metric,bad", [("loss", "nan"), ("loss", "rise"), ("grad_norm", "zero")])
def test_condition_that_ends_exactly_at_a_batch_boundary_is_not_left_still_going(metric, bad):
    values = decaying_loss()
    if bad == "nan":
        values[300:320] = np.nan
    elif bad == "rise":
        values[300:320] *= 3.0
    else:
        values[300:320] = 0.0
    end = {"nan": 320, "rise": 322, "zero": 320}[bad]  # the first point where the condition no longer holds
    batch = [e.to_dict() for e in classify_series(np.arange(800), values, metric=metric)]
    detector = IncrementalDetector(metric)
    detector.add(np.arange(end), values[:end])
    detector.add(np.arange(end, 800), values[end:])
    assert batch and [e.to_dict() for e in detector.events] == batch


def long_events_with_an_early_peak():
    """Events that outlast the detectors' bounded tail (TAIL_POINTS) with their peak near the
    start, so that the peak has scrolled out of the window long before the event ends."""
    rng = np.random.default_rng(5)
    rise = np.concatenate([3 * np.exp(-np.arange(2000) / 300) + 0.5, np.full(4000, 2.5)])
    rise[2000:2050] += 5
    rise += rng.normal(0, 0.01, len(rise))
    low = np.concatenate([3 * np.exp(-np.arange(500) / 100) + 1, np.full(3000, 1e-4)])
    low[600:620] = 1e-6
    low *= 1 + rng.normal(0, 0.01, len(low))
    mismatch = np.abs(rng.normal(0, 0.001, 5000))
    mismatch[2000:] += 0.2
    mismatch[2010:2030] += 1
    return [("loss", rise, "divergence"), ("loss", low, "too_good"), ("rollout_corr/kl", mismatch, "level_shift")]


@pytest.mark.parametrize(
    "metric,values,kind", long_events_with_an_early_peak(), ids=lambda c: c if isinstance(c, str) else ""
)
def test_an_event_longer_than_the_tail_keeps_its_early_peak_when_fed_ten_points_at_a_time(metric, values, kind):
    steps = np.arange(len(values))
    live = IncrementalDetector(metric)
    seen = {}
    for i in range(0, len(values), 10):
        seen.update({e.event_id: e.to_dict() for e in live.add(steps[i : i + 10], values[i : i + 10]).changed})
    whole = {e.event_id: e.to_dict() for e in IncrementalDetector(metric).add(steps, values).changed}
    assert seen == whole
    assert any(e["kind"] == kind and e["end_step"] - e["peak_step"] > TAIL_POINTS for e in seen.values())


def _episode(kind: str, start: int, end: int, named: int, **details: object):  # type: ignore[no-untyped-def]
    return Event(
        kind=kind,
        metric="grad_norm",
        start_step=start,
        end_step=end,
        severity="warning",
        score=1.0,
        summary=kind,
        details={"detected_step": named, **details},
    )


def test_a_level_shift_named_before_a_drift_over_the_same_steps_stands_for_the_episode():
    detector = IncrementalDetector("grad_norm")
    detector.shifts.events.append(_episode("level_shift", 1271, 2160, named=1279))
    detector.drift.events.append(_episode("divergence", 1136, 2024, named=2000, cause="drift"))
    assert [e.kind for e in detector.events] == ["level_shift"]


def test_a_drift_named_before_a_level_shift_over_the_same_steps_stands_for_the_episode():
    detector = IncrementalDetector("grad_norm")
    detector.shifts.events.append(_episode("level_shift", 1271, 2160, named=1900))
    detector.drift.events.append(_episode("divergence", 1136, 2024, named=1500, cause="drift"))
    assert [e.kind for e in detector.events] == ["divergence"]
