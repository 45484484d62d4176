import numpy as np
import pytest
from detect_curves import decaying_loss, flat
from holter_server.detect import classify_series


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


def test_dip_right_after_a_throughput_drop_is_a_spike_that_recovers_to_the_new_level():
    values = flat(800, 52000, 0.02)
    values[400:] *= 0.6
    values[440:442] = 3000  # an outage 40 points after the drop, back to the new level
    events = classify_series(np.arange(800), values, metric="tokens_per_s")
    spikes = [e for e in events if e.kind == "spike"]
    assert [e.start_step for e in spikes] == [440] and "level_shift" in kinds(events)


def test_spike_among_the_first_points_needs_no_doubling():
    values = decaying_loss()
    values[9] *= 1.4
    events = classify_series(np.arange(800), values, metric="loss")
    assert [(e.kind, e.peak_step) for e in events] == [("spike", 9)]


def test_blow_up_at_the_third_point_is_a_spike_from_step_one():
    values = decaying_loss()
    values[2] = 8 * values[1]
    events = classify_series(np.arange(800), values, metric="loss")
    assert [(e.kind, e.peak_step) for e in events] == [("spike", 2)]
    assert "7.9x the first values" in events[0].summary and "σ" not in events[0].summary


def test_rise_from_init_among_the_first_points_of_a_norm_is_not_a_spike():
    t = np.arange(400)
    values = 0.6 * (1 + 4 * (1 - np.exp(-t / 3))) * (1 + np.random.default_rng(4).normal(0, 0.01, 400))
    assert classify_series(t, values, metric="act_norm/layer.3") == []


def test_one_print_unit_wiggle_of_a_rounded_loss_near_zero_is_not_a_spike():
    rng = np.random.default_rng(1)
    values = np.round(0.05 + rng.normal(0, 0.002, 600), 2)  # logged to 2 decimals: 0.05, now and then 0.04/0.06
    values[:40] = np.round(np.linspace(2.0, 0.05, 40), 2)
    assert "spike" not in kinds(classify_series(np.arange(600), values, metric="loss"))


def test_spike_after_a_run_of_exact_zeros_reports_no_absurd_sigma():
    values = np.zeros(300)
    values[:100] = 0.3 + np.random.default_rng(2).normal(0, 0.01, 100)
    values[200] = 0.5
    (spike,) = [e for e in classify_series(np.arange(300), values, metric="grad_norm") if e.kind == "spike"]
    assert spike.score <= 1000 and "e+" not in spike.summary


def test_step_time_blip_that_doubles_is_info():
    values = flat(2000, 170, 0.02)
    values[1000] = 900
    (spike,) = classify_series(np.arange(2000), values, metric="step_time_ms")
    assert spike.kind == "spike" and spike.severity == "info"


def test_slow_step_that_lands_on_a_slightly_higher_level_is_a_spike():
    # verl's step time as a resumed run's first validation step lands: 9.8 s, 34 s, then ~11.3 s
    values = flat(200, 9.8, 0.02)
    values[100:] = flat(100, 11.3, 0.02, seed=1)
    values[100] = 34.2
    events = classify_series(np.arange(200), values, metric="timing_s/step")
    assert [(e.kind, e.start_step) for e in events if e.kind == "spike"] == [("spike", 100)]


def test_a_critic_value_loss_jumping_tenfold_for_one_update_is_noted_at_info():
    # a PPO critic's squared error (stable-baselines3 `train/value_loss`): falling, never negative;
    # read with the RL losses, yet a one-update jump is a bad batch of returns worth a note
    rng = np.random.default_rng(5)
    values = (0.03 * np.exp(-np.arange(150) / 15) + 0.005) * np.exp(rng.normal(0, 0.5, 150))
    values[60] = 0.09  # ~18 robust σ over a level of ~0.005
    events = classify_series(np.arange(150), values, metric="train/value_loss")
    assert [(e.kind, e.severity, e.peak_step) for e in events] == [("spike", "info", 60)]


def test_a_policy_surrogate_swinging_around_zero_keeps_its_wide_outlier_threshold():
    rng = np.random.default_rng(5)
    values = rng.normal(0.0, 0.03, 300)
    values[200] = 0.3  # 10 σ: a swing of a surrogate that crosses zero all the time, no note
    assert classify_series(np.arange(300), values, metric="train/policy_gradient_loss") == []


@pytest.mark.parametrize("jump, back", [(0.12, 3), (0.3, 12), (0.6, 25), (1.2, 60), (0.5, 200)])
def test_a_loss_that_jumps_and_decays_back_over_tens_of_steps_is_a_spike_with_its_recovery_time(jump, back):
    # neither a divergence that "came back" nor a level shift that "stayed there" while it decayed
    values = decaying_loss(3000, noise=0.005)
    k = np.arange(3000 - 2000)
    values[2000:] *= 1 + np.where(k <= back, jump * np.exp(-3.5 * k / back), 0.0)
    events = classify_series(np.arange(3000), values, metric="loss")
    spikes = [e for e in events if e.kind == "spike"]
    assert [e.start_step for e in spikes] == [2000], [(e.kind, e.start_step, e.summary) for e in events]
    assert {"divergence", "level_shift"}.isdisjoint(kinds(events))
    assert spikes[0].details["recovered_step"] <= 2000 + back
    if back > 3:
        assert "steps after it began" in spikes[0].summary
