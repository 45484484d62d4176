"""Hard healthy cases: a monitor that cries wolf gets switched off."""

import numpy as np
from detect_curves import decaying_loss, flat
from holter_server.detect import classify_series, is_alarm, verdict


def alarms(steps, values, metric):
    return is_alarm(verdict(classify_series(steps, values, metric=metric)))


def test_steep_early_drop_is_quiet():
    assert classify_series(np.arange(800), decaying_loss(), metric="loss") == []


def test_warmup_bump_is_quiet():
    t = np.arange(1000)
    values = decaying_loss(1000) * (1 + 0.08 * np.exp(-(((t - 50) / 10) ** 2)))
    assert not alarms(t, values, "loss")


def test_learning_rate_cooldown_drop_at_the_end_is_quiet():
    values = decaying_loss()
    values[640:] *= 1 - 0.1 * np.arange(160) / 160
    assert classify_series(np.arange(800), values, metric="loss") == []


def test_noisy_small_batch_run_raises_no_alarm():
    rng = np.random.default_rng(5)
    values = decaying_loss(3000) + 0.15 * rng.standard_t(6, 3000)
    assert not alarms(np.arange(3000), values, "loss")


def test_logging_every_k_steps_is_quiet():
    assert classify_series(np.arange(800) * 50, decaying_loss(), metric="loss") == []


def test_short_run_is_quiet():
    assert classify_series(np.arange(12), decaying_loss(12), metric="loss") == []


def test_flat_step_time_is_quiet():
    assert classify_series(np.arange(2000), flat(2000, 170, 0.02), metric="step_time") == []


def test_mismatch_near_zero_is_quiet():
    values = np.abs(np.random.default_rng(0).normal(0.004, 0.002, 2000))
    assert classify_series(np.arange(2000), values, metric="vllm_kl") == []


def test_empty_series_gives_no_events():
    assert classify_series([], [], metric="loss") == []
