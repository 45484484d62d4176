import numpy as np

from holter_server.detect import classify_series

from detect_curves import decaying_loss, flat


def test_step_time_spike_every_n_steps_is_a_sawtooth_with_its_period():
    values = flat(1500, 170, 0.01)
    values[np.arange(100, 1500, 189)] = 320
    events = classify_series(np.arange(1500), values, metric="step_time_ms")
    saws = [e for e in events if e.kind == "sawtooth"]
    assert len(saws) == 1 and abs(saws[0].period - 189) <= 18.9


def test_periodic_spikes_are_folded_into_the_sawtooth_not_listed_one_by_one():
    values = flat(1500, 170, 0.01)
    values[np.arange(100, 1500, 189)] = 320
    events = classify_series(np.arange(1500), values, metric="step_time_ms")
    assert [e.kind for e in events] == ["sawtooth"]


def test_logprob_mismatch_spiking_every_12_steps_is_a_sawtooth():
    values = np.abs(np.random.default_rng(0).normal(0.004, 0.001, 300))
    values[np.arange(12, 300, 12)] = 0.11
    events = classify_series(np.arange(300), values, metric="training/rollout_probs_diff_mean")
    saw = [e for e in events if e.kind == "sawtooth"]
    assert saw and abs(saw[0].period - 12) <= 1.2


def test_epoch_zigzag_on_the_loss_is_a_sawtooth_with_its_period():
    n, period = 2000, 100
    values = decaying_loss(n, noise=0.003) * (1 + 0.06 * ((np.arange(n) % period) / period - 0.5))
    saw = [e for e in classify_series(np.arange(n) * 5, values, metric="loss") if e.kind == "sawtooth"]
    assert saw and abs(saw[0].period - 500) <= 50


def test_irregular_spikes_are_not_a_sawtooth():
    values = flat(1500, 170, 0.01)
    values[[100, 260, 300, 700, 1290]] = 320
    assert "sawtooth" not in [e.kind for e in classify_series(np.arange(1500), values, metric="step_time")]


def test_spikes_six_steps_apart_are_a_sawtooth_with_that_period_not_one_merged_spike():
    values = np.abs(np.random.default_rng(0).normal(0.004, 0.001, 300))
    values[np.arange(60, 114, 6)] = 0.11  # 9 spikes, closer than the spike merge gap
    events = classify_series(np.arange(300), values, metric="logprob_mismatch/abs_diff_mean")
    assert [e.kind for e in events] == ["sawtooth"]
    assert events[0].period == 6 and events[0].start_step == 60 and "every 6 steps" in events[0].summary


def test_step_time_spiking_every_3_steps_is_a_sawtooth():
    values = flat(600, 170, 0.01)
    values[np.arange(200, 320, 3)] = 330
    events = classify_series(np.arange(600) * 10, values, metric="step_time")
    saws = [e for e in events if e.kind == "sawtooth"]
    assert saws and saws[0].period == 30 and "spike" not in [e.kind for e in events]


def test_close_spikes_at_irregular_gaps_stay_one_spike_event():
    values = flat(600, 170, 0.01)
    values[[300, 303, 307, 309, 314, 316]] = 330
    assert [e.kind for e in classify_series(np.arange(600), values, metric="step_time")] == ["spike"]


def test_four_close_periodic_spikes_are_too_few_for_a_sawtooth():
    values = flat(600, 170, 0.01)
    values[[300, 306, 312, 318]] = 330
    assert [e.kind for e in classify_series(np.arange(600), values, metric="step_time")] == ["spike"]
