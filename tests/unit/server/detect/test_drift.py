"""Drift (detect/drift.py): a vital sign creeping the wrong way from its best level is named early,
in noise units and persistence, with what to do; it ends when the drift stops or comes back; the
healthy shapes that look like it stay quiet; and live detection in any batches finds the same."""

from __future__ import annotations

import numpy as np
import pytest
from detect_curves import decaying_loss, flat
from holter_server.detect import IncrementalDetector, classify_series
from holter_server.detect.drift import wander_factor
from holter_server.detect.findings import cross_signal_findings
from holter_server.postmortem.summary import write_summary


def drifts(events) -> list:  # type: ignore[no-untyped-def]
    return [e for e in events if e.kind == "divergence" and e.details.get("cause") == "drift"]


def alarms(events) -> list:  # type: ignore[no-untyped-def]
    return [(e.kind, e.severity, e.summary) for e in events if e.severity != "info"]


def creeping_loss(
    n: int = 4000, onset: int = 2500, rise: float = 0.3, noise: float = 0.01, seed: int = 0
) -> np.ndarray:
    """A healthy decay that turns at `onset` and climbs linearly to `rise` above its level there."""
    values = decaying_loss(n, seed=seed, noise=noise)
    level = decaying_loss(n, seed=seed, noise=0.0)
    ramp = np.clip((np.arange(n) - onset) / (n - 1 - onset), 0, 1)
    return values + rise * level[onset] * ramp


def detected_step(event) -> int:  # type: ignore[no-untyped-def]
    return int(event.details["detected_step"])


# -- named, and named early ------------------------------------------------------------------------


def test_a_loss_climbing_for_a_thousand_steps_is_a_divergence_named_well_before_half_way() -> None:
    values = creeping_loss()
    (drift,) = drifts(classify_series(np.arange(4000), values, metric="train/loss"))
    assert drift.severity in ("warning", "critical")
    assert 2300 <= drift.start_step <= 2700
    assert detected_step(drift) < 2500 + 0.5 * 1500


def test_the_drift_says_how_far_from_its_best_where_in_noise_units_and_how_fast_it_still_rises() -> None:
    (drift,) = drifts(classify_series(np.arange(4000), creeping_loss(), metric="train/loss"))
    text = drift.summary
    assert text.startswith("train/loss has risen ")
    assert "from its best" in text and "σ)" in text and "still rising at" in text and "per 100 steps" in text
    assert "best checkpoint is near step" in text
    assert drift.details["relative"] > 0.2 and drift.details["ongoing"] is True


def test_severity_grows_with_the_size_of_a_drift_still_under_way() -> None:
    small = drifts(classify_series(np.arange(4000), creeping_loss(rise=0.08), metric="loss"))
    large = drifts(classify_series(np.arange(4000), creeping_loss(rise=0.4), metric="loss"))
    assert [e.severity for e in small] == ["warning"] and [e.severity for e in large] == ["critical"]


def test_a_drift_that_stops_ends_there_and_says_so() -> None:
    values = creeping_loss(n=5000, onset=2000, rise=0.25)
    level = decaying_loss(5000, noise=0.0)
    values[3500:] = (
        values[3500:]
        - (values[3500:] - values[3499])
        + 0.01 * level[3500:] * np.random.default_rng(1).normal(size=1500)
    )
    (drift,) = drifts(classify_series(np.arange(5000), values, metric="loss"))
    assert drift.details["state"] == "stopped" and drift.details["ongoing"] is False
    assert 3300 <= drift.end_step <= 3900
    assert "then stopped rising" in drift.summary


def test_a_drift_that_comes_back_to_its_best_is_no_failure_that_creeps() -> None:
    # up for 600 steps, back down by 1,200 steps later: reported, not left as a divergence under way
    n = 6000
    level = decaying_loss(n, noise=0.0)
    hump = 0.15 * level[3000] * np.interp(np.arange(n), [3000, 3600, 4200], [0, 1, 0], left=0, right=0)
    values = decaying_loss(n, noise=0.005) + hump
    events = classify_series(np.arange(n), values, metric="loss")
    assert [e for e in drifts(events) if e.details.get("ongoing")] == []


def test_an_eval_loss_rising_45_percent_over_five_evals_is_named_with_no_train_loss_beside_it() -> None:
    steps = np.arange(1, 13) * 500
    values = np.array([3.2, 2.6, 2.3, 2.15, 2.08, 2.05, 2.04, 2.25, 2.5, 2.7, 2.85, 2.96])
    (drift,) = drifts(classify_series(steps, values, metric="eval/loss", kind="eval_loss"))
    assert drift.start_step == 3500 and drift.severity == "warning"
    assert detected_step(drift) <= 5000  # by the third eval up


def test_an_eval_loss_turning_up_slowly_at_first_is_named_by_its_third_eval_up() -> None:
    # the first eval after the best only 1.4% above it, then 3.4% and 5.9%
    steps = np.arange(1, 8) * 400
    values = np.array([5.784, 5.288, 4.999, 4.84, 4.906, 5.005, 5.125])
    (drift,) = drifts(classify_series(steps, values, metric="eval/loss", kind="eval_loss"))
    assert drift.severity == "warning" and drift.details["best_step"] == 1600


def test_a_converged_eval_loss_wobbling_within_its_noise_raises_nothing() -> None:
    steps = np.arange(1, 41) * 250
    level = np.maximum(2.1 + 3 * np.exp(-steps / 1500), 2.1 + 3 * np.exp(-4))
    for seed in range(20):
        values = level * (1 + 0.004 * np.random.default_rng(seed).normal(size=40))
        assert alarms(classify_series(steps, values, metric="eval/loss", kind="eval_loss")) == [], seed


def test_a_converged_eval_loss_rising_only_against_its_luckiest_eval_raises_nothing() -> None:
    # the lowest eval of a flat stretch (0.7695) sits 2.5 noise units under its neighbours; the
    # evals after it run at the stretch's level, a few of them in a row upward by chance
    values = [2.3817, 1.0945, 0.873, 0.8253, 0.7915, 0.7909, 0.7917, 0.7832, 0.7811, 0.7796, 0.7695, 0.7808]
    values += [0.7781, 0.7829, 0.7858, 0.7885, 0.7733, 0.7913, 0.7901, 0.7882, 0.7733, 0.7838, 0.7937, 0.78]
    values += [0.7942, 0.784, 0.7851, 0.7826, 0.7894, 0.787]
    steps = np.arange(1, 31) * 150
    assert alarms(classify_series(steps, np.array(values), metric="eval/loss", kind="eval_loss")) == []


def test_an_eval_loss_doubling_from_a_one_eval_minimum_over_eighteen_evals_is_named() -> None:
    # the shape of nano-gpt's val loss every 250 steps: one lowest eval, then a steady climb
    steps = np.arange(0, 26) * 250
    down = [4.2, 3.1, 2.6, 2.3, 2.15, 2.08, 2.03]
    up = [2.03 * (1 + 0.06 * k + 0.001 * (-1) ** k) for k in range(1, 20)]
    (drift,) = drifts(classify_series(steps, np.array(down + up), metric="val_loss", kind="eval_loss"))
    assert drift.start_step == 1500 and drift.details["peak"] / drift.details["best"] > 1.8


def test_throughput_bleeding_away_is_a_divergence_and_a_systems_slowdown_beside_a_steady_loss() -> None:
    n = 6000
    rng = np.random.default_rng(2)
    throughput = 52000 * (1 + 0.02 * rng.normal(size=n)) * (1 - 0.3 * np.clip((np.arange(n) - 3000) / 3000, 0, 1))
    loss = decaying_loss(n)
    t, lo = IncrementalDetector("tokens_per_s"), IncrementalDetector("loss")
    t.add(np.arange(n), throughput)
    lo.add(np.arange(n), loss)
    (drift,) = drifts(t.events)
    assert "has fallen" in drift.summary and "still falling" in drift.summary and detected_step(drift) < 4500
    findings = cross_signal_findings(t.events + lo.events, [t.snapshot(), lo.snapshot()])
    assert [f.kind for f in findings] == ["systems_slowdown"]


def test_a_logprob_mismatch_growing_from_a_flat_thousandth_is_named() -> None:
    n = 1200
    rng = np.random.default_rng(4)
    level = 1e-3 * (1 + 5 * np.clip((np.arange(n) - 500) / 700, 0, 1))
    values = level * np.exp(0.2 * rng.normal(size=n))
    events = classify_series(np.arange(n), values, metric="train_rollout_logprob_abs_diff")
    (drift,) = drifts(events)
    assert drift.severity == "warning" and detected_step(drift) < 500 + 0.6 * 700


# -- quiet where it must be ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_healthy_decaying_loss_raises_nothing(seed: int) -> None:
    assert alarms(classify_series(np.arange(8000), decaying_loss(8000, seed=seed), metric="loss")) == []


def test_a_warm_up_bump_while_the_loss_still_falls_from_its_start_raises_nothing() -> None:
    n = 8000
    t = np.arange(n)
    values = decaying_loss(n, noise=0.005) * (1 + 0.1 * np.exp(-(((t - 150) / 60.0) ** 2)))
    assert alarms(classify_series(t, values, metric="loss")) == []


def test_a_converged_flat_tail_and_a_wsd_cool_down_raise_nothing() -> None:
    n = 8000
    level = decaying_loss(n, noise=0.0)
    level[2000:] = level[2000]
    level[7000:] *= 1 - 0.08 * np.linspace(0, 1, 1000)
    values = level * (1 + 0.01 * np.random.default_rng(5).normal(size=n))
    assert alarms(classify_series(np.arange(n), values, metric="loss")) == []


def test_a_data_mix_step_that_the_loss_learns_down_raises_nothing() -> None:
    n = 8000
    t = np.arange(n)
    level = decaying_loss(n, noise=0.0) * np.where(t > 5000, 1 + 0.05 * np.exp(-(t - 5000) / 1500), 1)
    values = level * (1 + 0.005 * np.random.default_rng(6).normal(size=n))
    assert alarms(classify_series(t, values, metric="loss")) == []


def test_a_step_up_that_holds_is_a_level_shift_not_a_drift() -> None:
    values = flat(4000, 170, 0.02, seed=7)
    values[2500:] *= 1.35
    events = classify_series(np.arange(4000), values, metric="step_time")
    assert drifts(events) == [] and "level_shift" in {e.kind for e in events}


def test_a_step_time_rising_from_its_first_points_follows_a_schedule_and_raises_nothing() -> None:
    # modded-nanogpt's attention window grows through training: its step time with it
    n = 1500
    values = (160 + 21 * np.sqrt(np.arange(n) / n)) * (1 + 0.01 * np.random.default_rng(8).normal(size=n))
    assert alarms(classify_series(np.arange(n), values, metric="step_time_ms")) == []


def test_a_grpo_loss_swinging_around_zero_as_its_kl_term_grows_raises_nothing() -> None:
    n = 4000
    rng = np.random.default_rng(9)
    values = 0.03 * 0.4 * np.sqrt(np.arange(n) / n) + 0.02 * rng.standard_t(4, n)
    assert alarms(classify_series(np.arange(n), values, metric="loss")) == []


def test_a_gradient_norm_doubling_while_the_loss_falls_is_information_only() -> None:
    n = 6000
    t = np.arange(n)
    grad = (
        (1 + 3 * np.exp(-t / 60))
        * (1 + 1.2 * np.clip((t - 2500) / 3500, 0, 1))
        * np.exp(0.08 * np.random.default_rng(10).normal(size=n))
    )
    g, lo = IncrementalDetector("grad_norm"), IncrementalDetector("loss")
    g.add(t, grad)
    lo.add(t, decaying_loss(n))
    findings = cross_signal_findings(g.events + lo.events, [g.snapshot(), lo.snapshot()])
    assert [e.severity for e in drifts(g.events)] == ["info"] and alarms(findings) == []


def test_the_same_gradient_norm_with_no_loss_logged_is_a_norm_growth_warning() -> None:
    n = 6000
    t = np.arange(n)
    grad = (
        (1 + 3 * np.exp(-t / 60))
        * (1 + 1.2 * np.clip((t - 2500) / 3500, 0, 1))
        * np.exp(0.08 * np.random.default_rng(10).normal(size=n))
    )
    g = IncrementalDetector("grad_norm")
    g.add(t, grad)
    (finding,) = cross_signal_findings(g.events, [g.snapshot()])
    assert finding.kind == "norm_growth" and finding.severity == "warning" and "no loss logged" in finding.summary


# -- what moved with it ----------------------------------------------------------------------------


def test_a_loss_drift_names_the_gradient_norm_and_eval_loss_that_moved_with_it_and_the_throughput_that_held() -> None:
    # the issue's run: loss 2.0 -> 2.63 over its last 1,000 steps, grad norm 1 -> 3, eval loss 2.35 -> 3.1
    rng = np.random.default_rng(0)
    steps = np.arange(3000)
    base = 2.0 + 8.8 * np.exp(-steps / 150) + 0.3 / (1 + steps / 300)
    base = base - base[2000] + 2.0
    loss = np.where(steps < 2000, base, 2.0 + 0.63 * (steps - 2000) / 1000) * (1 + rng.normal(0, 0.015, 3000))
    grad = np.where(steps < 2000, 1 + 3 * np.exp(-steps / 50), 1 + 2 * (steps - 2000) / 1000)
    grad = grad * np.exp(rng.normal(0, 0.1, 3000))
    evals = np.arange(100, 3001, 100)
    eval_loss = np.maximum(
        np.where(evals < 2000, 2.35 + 6 * np.exp(-evals / 300), 2.35 + 0.75 * (evals - 2000) / 1000), 2.35
    )
    series = {
        "loss": (steps, loss),
        "grad_norm": (steps, grad),
        "eval_loss": (evals, eval_loss + rng.normal(0, 0.005, len(evals))),
        "tokens_per_s": (steps, 50000 * (1 + 0.02 * rng.normal(size=3000))),
    }
    detectors = {}
    for name, (s, v) in series.items():
        detectors[name] = IncrementalDetector(name)
        detectors[name].add(s, v)
    events = [e for d in detectors.values() for e in d.events]
    (together,) = [
        f
        for f in cross_signal_findings(events, [d.snapshot() for d in detectors.values()])
        if f.kind == "drift_together"
    ]
    assert together.metric == "loss" and set(together.details["signals"]) == {"loss", "grad_norm", "eval_loss"}
    assert "tokens_per_s held" in together.summary and "a learning problem" in together.summary
    (loss_drift,) = drifts(detectors["loss"].events)
    assert detected_step(loss_drift) < 2500


def test_the_issue_s_run_gets_a_warning_naming_the_drift_and_a_post_mortem_that_says_so() -> None:
    # the issue's run (see above): no event at all before, "INFO · 3", and "1 loss spike" in the post-mortem
    rng = np.random.default_rng(5)
    steps = np.arange(3000)
    base = 2.0 + 8.8 * np.exp(-steps / 150) + 0.3 / (1 + steps / 300)
    base = base - base[2000] + 2.0
    loss = np.where(steps < 2000, base, 2.0 + 0.63 * (steps - 2000) / 1000) * (1 + rng.normal(0, 0.015, 3000))
    grad = np.where(steps < 2000, 1 + 3 * np.exp(-steps / 50), 1 + 2 * (steps - 2000) / 1000)
    grad = grad * np.exp(rng.normal(0, 0.1, 3000))
    evals = np.arange(100, 3001, 100)
    eval_loss = np.maximum(
        np.where(evals < 2000, 2.35 + 6 * np.exp(-evals / 300), 2.35 + 0.75 * (evals - 2000) / 1000), 2.35
    ) + rng.normal(0, 0.005, len(evals))
    detectors = {name: IncrementalDetector(name) for name in ("loss", "grad_norm", "eval_loss")}
    for name, (s, v) in {"loss": (steps, loss), "grad_norm": (steps, grad), "eval_loss": (evals, eval_loss)}.items():
        detectors[name].add(s, v)
    events = [e for d in detectors.values() for e in d.events]
    events += cross_signal_findings(events, [d.snapshot() for d in detectors.values()])
    (loss_drift,) = drifts(detectors["loss"].events)
    assert loss_drift.severity in ("warning", "critical") and loss_drift.summary.startswith("loss has risen ")
    assert [e.kind for e in detectors["loss"].events if e.kind == "spike"] == []
    text = write_summary(
        name="creeper", status="finished", last_step=2999, events=[{**e.to_dict(), "status": "open"} for e in events]
    )
    assert "loss crept up" in text and "and is still rising" in text and "loss spike" not in text
    assert "eval_loss crept up" in text or "eval_loss moving with it" in text


# -- live: any batches, the same events ------------------------------------------------------------


@pytest.mark.parametrize("metric, values", [("loss", creeping_loss()), ("tokens_per_s", None)])
def test_fed_in_random_batches_and_restored_from_its_state_midway_the_detector_finds_the_same_drift(
    metric, values
) -> None:  # type: ignore[no-untyped-def]
    n = 4000
    if values is None:
        values = (
            52000
            * (1 + 0.02 * np.random.default_rng(3).normal(size=n))
            * (1 - 0.3 * np.clip((np.arange(n) - 2000) / 2000, 0, 1))
        )
    whole = classify_series(np.arange(n), values, metric=metric)
    rng = np.random.default_rng(11)
    detector = IncrementalDetector(metric)
    i = 0
    while i < n:
        size = int(rng.integers(1, 300))
        detector.add(np.arange(i, min(i + size, n)), values[i : i + size])
        if i > n // 2 and i - size <= n // 2:
            detector = IncrementalDetector.from_state(detector.state())
        i += size
    assert [e.to_dict() for e in detector.events] == [e.to_dict() for e in whole]
    assert drifts(whole)


def _hump() -> np.ndarray:
    n = 6000
    level = decaying_loss(n, noise=0.0)
    bump = 0.15 * level[3000] * np.interp(np.arange(n), [3000, 3600, 4200], [0, 1, 0], left=0, right=0)
    return decaying_loss(n, noise=0.005) + bump


@pytest.mark.parametrize(
    "metric, values",
    [
        ("loss", creeping_loss()),
        ("loss", _hump()),
        ("eval_loss", np.array([3.2, 2.6, 2.3, 2.15, 2.08, 2.05, 2.04, 2.25, 2.5, 2.7, 2.85, 2.96])),
    ],
    ids=["creep", "hump", "eval"],
)
def test_at_every_moment_of_a_stream_the_live_events_are_those_of_a_batch_analysis_of_the_points_so_far(
    metric, values
) -> None:  # type: ignore[no-untyped-def]
    steps = np.arange(1, len(values) + 1) * (500 if metric == "eval_loss" else 1)
    rng = np.random.default_rng(12)
    detector = IncrementalDetector(metric)
    i = 0
    while i < len(values):
        size = int(rng.integers(1, max(2, len(values) // 15)))
        detector.add(steps[i : i + size], values[i : i + size])
        i = min(i + size, len(values))
        batch = classify_series(steps[:i], values[:i], metric=metric)
        assert [e.to_dict() for e in detector.events] == [e.to_dict() for e in batch], f"after {i} points"


def test_the_noise_of_bins_that_wander_counts_them_as_fewer_independent_ones() -> None:
    rng = np.random.default_rng(8)
    white = rng.normal(size=400)
    ar = np.empty(400)
    ar[0] = white[0]
    for i in range(1, 400):
        ar[i] = 0.8 * ar[i - 1] + 0.6 * white[i]
    assert wander_factor(white) < 1.2 and wander_factor(white + 0.05 * np.arange(400)) < 1.2
    assert wander_factor(ar) == pytest.approx(3**0.5)  # ρ read as 0.8, capped at 0.5
