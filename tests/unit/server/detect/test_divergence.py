import numpy as np
from detect_curves import decaying_loss
from holter_server.detect import classify_series


def test_nan_is_divergence_naming_nan_and_the_first_bad_step():
    values = decaying_loss()
    values[600:] = np.nan
    events = classify_series(np.arange(800), values, metric="loss")
    assert [e.kind for e in events] == ["divergence"]
    assert events[0].start_step == 600 and events[0].severity == "critical"
    assert "became NaN at step 600" in events[0].summary


def test_positive_infinity_is_named_as_such():
    values = decaying_loss()
    values[600] = np.inf
    values[601:] = np.nan
    events = classify_series(np.arange(800), values, metric="loss")
    assert "became +Inf at step 600" in events[0].summary


def test_loss_that_shoots_up_and_stays_is_divergence_not_spike():
    values = decaying_loss()
    values[500:] *= 3.0
    events = classify_series(np.arange(800), values, metric="loss")
    assert [e.kind for e in events] == ["divergence"]
    assert "has not come back" in events[0].summary


def test_gradient_norm_growing_toward_inf_is_divergence():
    rng = np.random.default_rng(1)
    values = 0.3 * np.exp(rng.normal(0, 0.05, 1000))
    values[400:] *= np.exp(0.02 * np.arange(600))
    events = classify_series(np.arange(1000), values, metric="grad_norm")
    assert "divergence" in [e.kind for e in events]


def test_eval_loss_turning_up_is_divergence_on_the_eval_series():
    t = np.arange(40) / 40
    values = 1.2 + 2.5 * np.exp(-t / 0.05) + np.where(t > 0.25, (t - 0.25) * 3, 0)
    events = classify_series(np.arange(40) * 400, values, metric="eval_loss")
    assert [e.kind for e in events] == ["divergence"] and events[0].severity == "warning"


def test_gradient_norm_drifting_up_slowly_is_not_divergence():
    rng = np.random.default_rng(2)
    values = np.linspace(1.0, 2.6, 190) * np.exp(rng.normal(0, 0.1, 190))
    events = classify_series(np.arange(190) * 15, values, metric="grad_norm")
    assert all(e.severity == "info" for e in events)


def memorising_loss(n: int = 1500) -> np.ndarray:
    """A train loss driven to ~0.002 by memorisation, with its noise."""
    t = np.arange(n)
    return (0.002 + 2.0 * np.exp(-t / 60)) * (1 + np.random.default_rng(6).normal(0, 0.05, n))


def test_small_hump_on_a_memorising_loss_near_zero_that_recovered_is_not_a_divergence():
    values = memorising_loss()
    values[900:960] += 0.004 * np.hanning(60)  # 0.002 -> 0.006 -> 0.002
    events = classify_series(np.arange(1500), values, metric="loss")
    assert "divergence" not in [e.kind for e in events]


def test_memorising_loss_climbing_back_up_for_good_is_a_divergence():
    values = memorising_loss()
    values[900:] += 1.0
    events = classify_series(np.arange(1500), values, metric="loss")
    assert [e.kind for e in events if e.severity == "critical"] == ["divergence"]


def test_loss_rise_that_came_back_down_within_a_few_hundred_steps_is_a_spike_that_recovered():
    # up 3x for forty steps and back: an excursion, however wide, not a divergence (issue 29)
    values = decaying_loss()
    values[400:440] *= 3.0
    events = classify_series(np.arange(800), values, metric="loss")
    assert [e.kind for e in events if e.kind == "divergence"] == []
    (spike,) = [e for e in events if e.kind == "spike"]
    assert spike.severity == "info" and 400 <= spike.start_step <= 402 and spike.details["recovered_step"] <= 445
    assert "came back by step" in spike.summary


def test_loss_rise_that_came_back_after_more_than_a_few_hundred_steps_is_a_warning_not_critical():
    values = decaying_loss(1600)
    values[400:800] *= 3.0
    (event,) = [e for e in classify_series(np.arange(1600), values, metric="loss") if e.kind == "divergence"]
    assert event.severity == "warning" and "came back below" in event.summary


def test_nan_streak_that_finite_values_ended_is_a_warning():
    values = decaying_loss()
    values[400:420] = np.nan
    (event,) = classify_series(np.arange(800), values, metric="grad_norm")
    assert (
        event.kind == "divergence" and event.severity == "warning" and "before finite values returned" in event.summary
    )
