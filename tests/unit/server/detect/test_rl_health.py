"""An RL policy's own failures (detect/rl_health.py): PPO's KL leaving its band, the policy's
entropy collapsing, a clip fraction saturating, a reward collapsing; and the healthy runs and
untrained starts that must stay quiet."""

import numpy as np
import pytest
from holter_server.detect import IncrementalDetector, classify_series
from holter_server.vocabulary.events import EventKind

ALARMS = ("warning", "critical")
# (points, seed, noise): a short run, CleanRL's default CartPole run (976 updates), a long one
SHAPES = [(120, 0, 0.2), (300, 1, 0.35), (976, 2, 0.5)]


def ramp(n: int, start: float, end: float, begin: float, finish: float) -> np.ndarray:
    """`start` until `begin` (a share of the run), then geometrically to `end` at `finish`."""
    share = np.clip((np.arange(n) - begin * n) / ((finish - begin) * n), 0, 1)
    return start * (end / start) ** share


def alarms(events, kind=None):
    return [e for e in events if e.severity in ALARMS and (kind is None or e.kind == kind)]


@pytest.mark.parametrize(("n", "seed", "noise"), SHAPES)
def test_ppo_approx_kl_rising_from_001_to_08_is_named_a_kl_blow_up(n, seed, noise):
    rng = np.random.default_rng(seed)
    kl = ramp(n, 0.01, 0.8, 0.2, 0.8) * np.exp(rng.normal(0, noise, n))
    events = classify_series(np.arange(n) * 512, kl, metric="losses/approx_kl")
    named = alarms(events, EventKind.DIVERGENCE)
    assert [e.details["cause"] for e in named] == ["kl_band"] and named[0].severity == "critical"
    assert "KL to the old policy per update" in named[0].summary and "above 0.1" in named[0].summary


@pytest.mark.parametrize(("n", "seed", "noise"), SHAPES)
def test_ppo_entropy_falling_from_05_to_007_is_named_an_entropy_collapse(n, seed, noise):
    rng = np.random.default_rng(seed)
    entropy = ramp(n, 0.5, 0.07, 0.2, 0.8) * (1 + rng.normal(0, noise / 10, n))
    events = classify_series(np.arange(n) * 512, entropy, metric="losses/entropy", kind="entropy")
    assert [e.kind for e in alarms(events)] == [EventKind.ENTROPY_COLLAPSE]


def test_entropy_collapse_is_named_before_the_entropy_reaches_its_floor():
    rng = np.random.default_rng(3)
    entropy = ramp(400, 0.5, 0.07, 0.2, 0.8) * (1 + rng.normal(0, 0.03, 400))
    (event,) = alarms(classify_series(np.arange(400), entropy, metric="entropy", kind="entropy"))
    assert event.details["detected_step"] < 300  # the ramp reaches 0.07 at step 320


def test_entropy_at_a_tenth_of_its_high_is_critical():
    entropy = np.concatenate([np.full(100, 0.69), np.full(100, 0.03)])
    entropy *= 1 + np.random.default_rng(4).normal(0, 0.02, 200)
    (event,) = alarms(classify_series(np.arange(200), entropy, metric="entropy", kind="entropy"))
    assert event.severity == "critical"


@pytest.mark.parametrize(("n", "seed", "noise"), SHAPES)
def test_healthy_ppo_kl_between_001_and_002_is_not_named(n, seed, noise):
    rng = np.random.default_rng(seed)
    kl = rng.uniform(0.01, 0.02, n) * np.exp(rng.normal(0, noise, n))
    assert alarms(classify_series(np.arange(n) * 512, kl, metric="losses/approx_kl")) == []


@pytest.mark.parametrize(("n", "seed", "noise"), SHAPES)
def test_healthy_entropy_falling_slowly_from_07_to_04_is_not_named(n, seed, noise):
    rng = np.random.default_rng(seed)
    entropy = np.linspace(0.7, 0.4, n) * (1 + rng.normal(0, noise / 5, n))
    assert alarms(classify_series(np.arange(n) * 512, entropy, metric="losses/entropy", kind="entropy")) == []


def test_entropy_falling_fast_at_first_then_settling_is_not_named():
    rng = np.random.default_rng(5)
    entropy = (0.3 + 0.39 * np.exp(-np.arange(500) / 50)) * (1 + rng.normal(0, 0.05, 500))
    assert alarms(classify_series(np.arange(500), entropy, metric="entropy", kind="entropy")) == []


def test_a_gaussian_policys_differential_entropy_below_zero_is_not_judged():
    entropy = np.linspace(1.4, -2.0, 300) + np.random.default_rng(6).normal(0, 0.02, 300)
    assert alarms(classify_series(np.arange(300), entropy, metric="entropy", kind="entropy")) == []


def test_a_kl_high_for_the_first_updates_of_an_untrained_policy_is_not_named():
    rng = np.random.default_rng(7)
    kl = rng.uniform(0.01, 0.02, 200) * np.exp(rng.normal(0, 0.3, 200))
    kl[:6] = [0.4, 0.3, 0.2, 0.15, 0.12, 0.11]
    assert classify_series(np.arange(200) * 512, kl, metric="losses/approx_kl") == []


@pytest.mark.parametrize(("n", "seed", "noise"), [(120, 0, 0.05), (300, 1, 0.08), (976, 2, 0.12)])
def test_grpo_reward_falling_from_1_to_0_and_staying_is_named_a_reward_collapse(n, seed, noise):
    rng = np.random.default_rng(seed)
    reward = np.where(np.arange(n) < n // 2, 1.0, 0.0) + rng.normal(0, noise, n)
    named = alarms(classify_series(np.arange(n), reward, metric="reward"))
    assert [e.details["cause"] for e in named] == ["reward_collapse"] and named[0].severity == "critical"
    assert abs(named[0].start_step - n // 2) <= 10 and "has stayed down" in named[0].summary


def test_reward_that_rose_and_collapsed_back_to_its_start_is_critical():
    rng = np.random.default_rng(8)
    t = np.arange(300)
    reward = np.where(t < 150, np.minimum(0.2 + t / 100, 1.0), 0.2) + rng.normal(0, 0.05, 300)
    (event,) = alarms(classify_series(t, reward, metric="reward"))
    assert event.severity == "critical" and event.details["cause"] == "reward_collapse"


@pytest.mark.parametrize(("n", "seed"), [(120, 0), (300, 1), (976, 2)])
def test_reward_that_dips_and_recovers_is_not_named(n, seed):
    rng = np.random.default_rng(seed)
    reward = np.minimum(0.2 + np.arange(n) / (0.3 * n), 1.0)
    reward[n // 2 : n // 2 + n // 16] -= 0.5
    events = classify_series(np.arange(n), reward + rng.normal(0, 0.05, n), metric="reward")
    assert alarms(events) == []


def test_reward_rising_from_an_untrained_zero_is_not_named():
    rng = np.random.default_rng(9)
    reward = np.concatenate([np.zeros(20), np.linspace(0, 0.9, 120), np.full(60, 0.9)])
    reward += rng.normal(0, 0.05, 200)
    reward[0] = 1.0  # one lucky batch of the untrained policy
    assert alarms(classify_series(np.arange(200), reward, metric="reward")) == []


def test_clip_fraction_saturating_above_03_is_named():
    rng = np.random.default_rng(10)
    clipfrac = np.clip(ramp(300, 0.1, 0.6, 0.3, 0.7) + rng.normal(0, 0.02, 300), 0, 1)
    named = alarms(classify_series(np.arange(300), clipfrac, metric="losses/clipfrac", kind="clip_fraction"))
    assert [e.details["cause"] for e in named] == ["clip_saturation"]


def test_healthy_clip_fraction_between_01_and_02_is_not_named():
    clipfrac = np.random.default_rng(11).uniform(0.1, 0.2, 300)
    assert alarms(classify_series(np.arange(300), clipfrac, metric="losses/clipfrac", kind="clip_fraction")) == []


def test_kl_out_of_its_band_for_many_updates_is_one_event():
    rng = np.random.default_rng(12)
    kl = np.where(np.arange(400) < 100, 0.015, 0.3) * np.exp(rng.normal(0, 0.6, 400))
    named = [e for e in classify_series(np.arange(400), kl, metric="approx_kl") if e.kind == EventKind.DIVERGENCE]
    assert len(named) == 1


def test_kl_to_the_reference_growing_by_design_is_not_named():
    rng = np.random.default_rng(13)
    kl = (1e-5 + 0.05 * np.linspace(0, 1, 600) ** 2) * np.exp(rng.normal(0, 0.5, 600))
    assert alarms(classify_series(np.arange(600), kl, metric="kl", kind="kl")) == []


def test_a_kl_blow_up_is_not_also_named_a_spike():
    rng = np.random.default_rng(14)
    kl = np.where(np.arange(300) < 150, 0.015, 0.9) * np.exp(rng.normal(0, 0.2, 300))
    kinds = [e.kind for e in classify_series(np.arange(300), kl, metric="approx_kl")]
    assert kinds == [EventKind.DIVERGENCE]


@pytest.mark.parametrize("metric", ["losses/approx_kl", "entropy", "reward"])
def test_batches_and_a_saved_state_give_the_events_of_one_pass(metric):
    rng = np.random.default_rng(15)
    n = 500
    values = {
        "losses/approx_kl": ramp(n, 0.01, 0.8, 0.2, 0.8) * np.exp(rng.normal(0, 0.3, n)),
        "entropy": ramp(n, 0.5, 0.07, 0.2, 0.8) * (1 + rng.normal(0, 0.03, n)),
        "reward": np.where(np.arange(n) < 250, 1.0, 0.0) + rng.normal(0, 0.05, n),
    }[metric]
    kind = {"losses/approx_kl": "kl", "entropy": "entropy", "reward": "reward"}[metric]
    steps = np.arange(n)
    whole = classify_series(steps, values, metric=metric, kind=kind)
    detector = IncrementalDetector(metric, kind=kind)
    for lo in range(0, n, 37):
        detector.add(steps[lo : lo + 37], values[lo : lo + 37])
        detector = IncrementalDetector.from_state(detector.state())
    assert [e.to_dict() for e in detector.events] == [e.to_dict() for e in whole] and alarms(whole)
