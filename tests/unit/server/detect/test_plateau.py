import numpy as np
from detect_curves import decaying_loss
from holter_server.detect import classify_series


def test_gradient_norm_of_exactly_zero_is_a_critical_plateau():
    events = classify_series(np.arange(1, 7), np.zeros(6), metric="grad_norm")
    assert [e.kind for e in events] == ["plateau"]
    assert events[0].severity == "critical" and "exactly 0" in events[0].summary


def test_loss_flat_from_step_zero_is_a_plateau():
    values = 10.8 + np.random.default_rng(0).normal(0, 0.05, 300)
    events = classify_series(np.arange(300), values, metric="loss")
    assert [e.kind for e in events] == ["plateau"] and events[0].start_step == 0


def test_frozen_loss_value_is_a_plateau():
    values = decaying_loss()
    values[400:] = 4.1234
    events = classify_series(np.arange(800), values, metric="loss")
    assert "plateau" in [e.kind for e in events]


def test_loss_converging_at_the_end_is_not_a_plateau():
    values = decaying_loss(noise=0.002)
    values[600:] = values[600] * (1 + np.random.default_rng(3).normal(0, 0.002, 200))
    assert classify_series(np.arange(800), values, metric="loss") == []
