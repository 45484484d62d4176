"""Gradient and activation norms as real small trainings log them: growth from init and slow
drift are healthy; unbounded growth is not."""

import json
from pathlib import Path

import numpy as np
import pytest
from holter_server.detect import classify_series, is_alarm, verdict
from holter_server.vocabulary import understand

DEMO = json.loads((Path(__file__).parent / "data" / "demo_healthy_norms.json").read_text())["series"]


def kinds_alarming(events):
    return [e.kind for e in events if e.severity != "info"]


def activation_from_init(n=120, every=5, start=0.58, growth=6.0, seed=0):
    """A head's activation RMS: 6x up from init, log-like, bounded (as in `holter demo --real`)."""
    t = np.arange(n) * every
    level = start * (1 + (growth - 1) * np.log1p(t / 30) / np.log1p(t[-1] / 30))
    return t, level * (1 + np.random.default_rng(seed).normal(0, 0.01, n))


@pytest.mark.parametrize("name", sorted(DEMO))
def test_norms_of_a_healthy_real_demo_training_raise_no_alarm(name):
    metric = name.split(":", 1)[1]
    series = DEMO[name]
    events = classify_series(series["steps"], series["values"], metric=metric, kind=understand(metric).kind)
    assert not is_alarm(verdict(events)), [e.summary for e in events]


def test_activation_norm_growing_6x_from_init_then_bounded_is_quiet():
    steps, values = activation_from_init()
    assert kinds_alarming(classify_series(steps, values, metric="act_norm/head")) == []


def test_activation_norm_growing_5x_in_the_first_50_steps_logged_every_step_is_quiet():
    t = np.arange(2000)
    values = 1.2 * (1 + 4 * (1 - np.exp(-t / 15))) * (1 + np.random.default_rng(1).normal(0, 0.01, 2000))
    assert kinds_alarming(classify_series(t, values, metric="act_norm/blocks.3")) == []


def test_activation_norm_growing_8x_in_the_last_quarter_is_divergence():
    steps, values = activation_from_init(n=160)
    values[120:] *= np.exp(np.log(8) * np.arange(40) / 40)
    events = classify_series(steps, values, metric="act_norm/head")
    assert "divergence" in kinds_alarming(events)
    (divergence,) = [e for e in events if e.kind == "divergence"]
    assert divergence.severity == "critical" and divergence.details["detected_step"] >= steps[120]


def test_activation_norm_blowing_up_from_init_is_divergence_even_before_it_settles():
    t = np.arange(200)
    values = np.exp(0.08 * t) * (1 + np.random.default_rng(2).normal(0, 0.01, 200))
    assert "divergence" in kinds_alarming(classify_series(t, values, metric="act_norm/layer.0"))


def test_activation_norm_going_to_inf_is_divergence():
    steps, values = activation_from_init()
    values[100:] = np.inf
    assert "divergence" in kinds_alarming(classify_series(steps, values, metric="act_norm/head"))


def test_per_layer_grad_norm_drifting_up_60_percent_is_quiet():
    t = np.arange(300)
    rng = np.random.default_rng(3)
    values = 0.03 * (1 + 0.6 * t / 300) * np.exp(rng.normal(0, 0.1, 300))
    assert kinds_alarming(classify_series(t * 5, values, metric="grad_norm/blocks.0")) == []


def test_per_layer_grad_norm_rising_and_easing_back_is_quiet():
    t = np.arange(120)
    rng = np.random.default_rng(4)
    hump = 1 + 0.9 * np.exp(-(((t - 45) / 15) ** 2))
    values = 0.03 * hump * np.exp(rng.normal(0, 0.1, 120))
    assert kinds_alarming(classify_series(t * 5, values, metric="grad_norm/tokens")) == []


def test_per_layer_grad_norm_jumping_to_a_new_regime_is_still_a_level_shift():
    rng = np.random.default_rng(5)
    values = 0.3 * np.exp(rng.normal(0, 0.08, 800))
    values[500:] *= 2.5
    events = classify_series(np.arange(800), values, metric="grad_norm/blocks.1")
    assert "level_shift" in kinds_alarming(events)
    assert [abs(e.start_step - 500) <= 2 for e in events if e.kind == "level_shift"] == [True]


def test_grad_norm_growing_toward_inf_after_a_growing_start_is_divergence():
    t = np.arange(1000)
    rng = np.random.default_rng(6)
    values = 0.1 * (1 + 2 * (1 - np.exp(-t / 20))) * np.exp(rng.normal(0, 0.05, 1000))
    values[500:] *= np.exp(0.02 * np.arange(500))
    assert "divergence" in kinds_alarming(classify_series(t, values, metric="grad_norm/blocks.1"))
