import numpy as np

from holter_server.detect import classify_series

from detect_curves import decaying_loss, flat


def kinds(events):
    return [e.kind for e in events]


def test_one_step_loss_spike_is_reported_with_its_step_and_recovery():
    values = decaying_loss()
    values[500] *= 1.5
    events = classify_series(np.arange(800), values, metric="loss")
    assert kinds(events) == ["spike"]
    assert events[0].peak_step == 500
    assert "recovered by step 501" in events[0].summary


def test_recovered_one_step_spike_is_info_not_an_alarm():
    values = decaying_loss()
    values[500] *= 1.5
    assert classify_series(np.arange(800), values, metric="loss")[0].severity == "info"


def test_spike_summary_gives_values_and_robust_sigma():
    values = decaying_loss()
    values[500] *= 1.5
    summary = classify_series(np.arange(800), values, metric="loss")[0].summary
    assert "jumped from" in summary and "robust σ" in summary and "step 500" in summary


def test_spike_steps_follow_the_logging_interval():
    values = decaying_loss()
    values[500] *= 1.5
    events = classify_series(np.arange(800) * 10, values, metric="loss")
    assert events[0].peak_step == 5000


def test_spike_that_lasts_several_points_is_a_warning():
    values = decaying_loss()
    values[500:505] *= 1.5
    events = classify_series(np.arange(800), values, metric="loss")
    assert kinds(events) == ["spike"] and events[0].severity == "warning"


def test_throughput_dip_is_a_spike_in_the_bad_direction():
    values = flat(600, 50000, 0.02)
    values[300] = 20000
    events = classify_series(np.arange(600), values, metric="tokens_per_s")
    assert kinds(events) == ["spike"] and "dropped" in events[0].summary


def test_logprob_mismatch_excursion_above_tolerance_is_a_warning_spike():
    values = np.abs(np.random.default_rng(0).normal(0.004, 0.001, 400))
    values[200] = 0.12
    events = classify_series(np.arange(400), values, metric="sampling/sampling_logp_difference/mean")
    assert kinds(events) == ["spike"] and events[0].severity == "warning"


def test_logprob_mismatch_jitter_below_tolerance_is_quiet():
    values = np.abs(np.random.default_rng(0).normal(0.004, 0.001, 400))
    values[200] = 0.03  # many σ, but still under the tolerance
    assert classify_series(np.arange(400), values, metric="vllm_kl") == []
