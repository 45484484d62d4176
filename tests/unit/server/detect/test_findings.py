"""Cross-signal findings fire on runs built to show them and stay quiet otherwise."""

from __future__ import annotations

from holter_server.detect.events import Event
from holter_server.detect.findings import SeriesSnapshot, cross_signal_findings


def event(kind: str, metric: str, start: int, end: int | None = None, severity: str = "warning", **details: object) -> Event:
    return Event(kind=kind, metric=metric, start_step=start, end_step=end if end is not None else start, severity=severity,
                 score=1.0, summary=f"{metric} {kind}", peak_step=start, details=dict(details))


def kinds(findings: list[Event]) -> list[str]:
    return [f.kind for f in findings]


def test_a_grad_norm_spike_just_before_a_loss_spike_is_an_early_warning() -> None:
    (found,) = cross_signal_findings([event("spike", "grad_norm", 1202, peak=8.1), event("spike", "loss", 1204)], [])
    assert found.kind == "grad_norm_precursor"
    assert "2 steps before" in found.summary and "grad_norm" in found.summary and "loss" in found.summary


def test_a_grad_norm_spike_long_before_or_after_a_loss_spike_is_not_a_precursor() -> None:
    assert cross_signal_findings([event("spike", "grad_norm", 1100), event("spike", "loss", 1204)], []) == []
    assert cross_signal_findings([event("spike", "grad_norm", 1206), event("spike", "loss", 1204)], []) == []


def test_a_zero_gradient_norm_means_no_learning_signal() -> None:
    found = cross_signal_findings([event("plateau", "grad_norm", 1, 50, cause="zero")], [SeriesSnapshot("loss", 2.3)])
    assert kinds(found) == ["no_learning_signal"]
    assert "exactly 0" in found[0].summary and "loss" in found[0].summary and found[0].severity == "critical"


def test_a_loss_flat_from_step_zero_means_no_learning_signal() -> None:
    found = cross_signal_findings([event("plateau", "loss", 0, 400, cause="flat")], [SeriesSnapshot("grad_norm", 0.0)])
    assert kinds(found) == ["no_learning_signal"] and "grad_norm" in found[0].summary


def test_a_frozen_metric_alone_is_not_a_missing_learning_signal() -> None:
    assert cross_signal_findings([event("plateau", "loss", 500, 900, cause="frozen")], []) == []


def test_growing_activations_and_a_dominant_layer_are_named() -> None:
    layers = [SeriesSnapshot(f"act_norm/layer.{i}", 1.0 + 0.1 * i, 0, 900) for i in range(5)] + [SeriesSnapshot("act_norm/layer.5", 40.0, 0, 900)]
    found = cross_signal_findings([event("divergence", "act_norm/layer.5", 600, 900)], layers)
    assert kinds(found) == ["activation_growth", "layer_dominance"]
    assert "layer.5" in found[1].summary and found[1].details["layer"] == "layer.5"


def test_layers_of_similar_size_raise_nothing() -> None:
    layers = [SeriesSnapshot(f"act_norm/layer.{i}", 1.0 + 0.5 * i) for i in range(6)]
    assert cross_signal_findings([], layers) == []


def test_a_throughput_drop_with_a_quiet_loss_is_a_systems_problem() -> None:
    drop = event("level_shift", "tokens_per_s", 6000, 7000, before=52000.0, after=31200.0)
    (found,) = cross_signal_findings([drop], [])
    assert found.kind == "systems_slowdown" and "40%" in found.summary and "not a learning one" in found.summary


def test_a_throughput_drop_beside_a_loss_problem_is_not_called_a_systems_problem() -> None:
    drop = event("level_shift", "tokens_per_s", 6000, 7000, before=52000.0, after=31200.0)
    assert cross_signal_findings([drop, event("divergence", "loss", 6050, 7000, severity="critical")], []) == []


def test_a_recurring_logprob_mismatch_reports_its_period() -> None:
    saw = event("sawtooth", "logprob_mismatch", 1856, 2944)
    saw.period = 64.0
    (found,) = cross_signal_findings([saw], [])
    assert found.kind == "mismatch_off_zero" and found.period == 64.0 and "every 64 steps" in found.summary
    assert found.severity == "critical"


def test_nothing_is_found_on_a_run_without_events() -> None:
    assert cross_signal_findings([], [SeriesSnapshot("loss", 2.0), SeriesSnapshot("grad_norm", 0.9)]) == []
