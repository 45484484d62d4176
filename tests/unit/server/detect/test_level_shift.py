import numpy as np

from holter_server.detect import classify_series

from detect_curves import flat


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
