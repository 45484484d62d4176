import numpy as np
from detect_curves import flat
from holter_server.detect import classify_series


def test_throughput_dropping_and_staying_down_is_a_level_shift():
    values = flat(800, 50000, 0.02)
    values[500:] *= 0.6
    events = classify_series(np.arange(800), values, metric="tokens_per_s")
    assert [e.kind for e in events] == ["level_shift"]
    assert events[0].severity == "warning" and abs(events[0].start_step - 500) <= 2


def test_throughput_rising_is_not_a_level_shift():
    values = flat(800, 50000, 0.02)
    values[500:] *= 1.4
    assert classify_series(np.arange(800), values, metric="tokens_per_s") == []


def test_logprob_mismatch_settling_above_tolerance_is_a_level_shift():
    values = np.abs(np.random.default_rng(0).normal(0.004, 0.001, 400))
    values[250:] += 0.1
    events = classify_series(np.arange(400), values, metric="train_rollout_logprob_abs_diff")
    assert [e.kind for e in events] == ["level_shift"] and abs(events[0].start_step - 250) <= 2


def test_mismatch_of_a_route_with_its_own_numerical_floor_drifting_up_threefold_is_not_off_zero():
    # the shape of a real GRPO route whose kernels differ from the trainer's (tests/data/real_curves
    # rlk_g10): a gap of ~0.033 at every step, rising to ~0.09 as the policy moves, then back
    rng = np.random.default_rng(3)
    level = 0.033 + 0.055 * np.exp(-(((np.arange(200) - 120) / 25) ** 2))
    values = level * (1 + rng.normal(0, 0.15, 200))
    assert [
        e
        for e in classify_series(np.arange(200), values, metric="train/train_rollout_logprob_abs_diff")
        if e.severity != "info"
    ] == []


def test_mismatch_leaving_its_own_floor_for_good_is_off_zero():
    values = 0.033 * (1 + np.random.default_rng(3).normal(0, 0.15, 300))
    values[150:] += 0.15
    events = classify_series(np.arange(300), values, metric="train/train_rollout_logprob_abs_diff")
    assert [(e.kind, e.severity) for e in events] == [("level_shift", "warning")] and abs(
        events[0].start_step - 150
    ) <= 2


def test_mismatch_off_zero_from_the_first_step_keeps_the_tolerance():
    values = 0.11 * (1 + np.random.default_rng(3).normal(0, 0.05, 300))
    events = classify_series(np.arange(300), values, metric="train/train_rollout_logprob_abs_diff")
    assert [(e.kind, e.start_step) for e in events] == [("level_shift", 0)]
