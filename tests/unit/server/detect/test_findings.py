"""Cross-signal findings fire on runs built to show them and stay quiet otherwise."""

from __future__ import annotations

import pytest
from holter_server.detect.events import Event
from holter_server.detect.findings import SeriesSnapshot, cross_signal_findings, nonfinite_origin


def event(
    kind: str, metric: str, start: int, end: int | None = None, severity: str = "warning", **details: object
) -> Event:
    return Event(
        kind=kind,
        metric=metric,
        start_step=start,
        end_step=end if end is not None else start,
        severity=severity,
        score=1.0,
        summary=f"{metric} {kind}",
        peak_step=start,
        details=dict(details),
    )


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
    found = cross_signal_findings(
        [event("plateau", "grad_norm", 1, 50, severity="critical", cause="zero")], [SeriesSnapshot("loss", 2.3)]
    )
    assert kinds(found) == ["no_learning_signal"]
    assert "exactly 0" in found[0].summary and "loss" in found[0].summary and found[0].severity == "critical"


def test_a_loss_flat_from_step_zero_means_no_learning_signal() -> None:
    found = cross_signal_findings([event("plateau", "loss", 0, 400, cause="flat")], [SeriesSnapshot("grad_norm", 0.0)])
    assert kinds(found) == ["no_learning_signal"] and "grad_norm" in found[0].summary


def test_a_flat_start_that_ended_is_no_longer_critical() -> None:
    found = cross_signal_findings([event("plateau", "loss", 0, 1400, severity="warning", cause="flat")], [])
    assert kinds(found) == ["no_learning_signal"] and found[0].severity == "warning"


def test_a_frozen_metric_alone_is_not_a_missing_learning_signal() -> None:
    assert cross_signal_findings([event("plateau", "loss", 500, 900, cause="frozen")], []) == []


def test_growing_activations_and_a_dominant_layer_are_named() -> None:
    layers = [SeriesSnapshot(f"act_norm/layer.{i}", 1.0 + 0.1 * i, 0, 900) for i in range(5)] + [
        SeriesSnapshot("act_norm/layer.5", 40.0, 0, 900)
    ]
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


def test_an_mfu_drop_with_a_quiet_loss_is_a_systems_problem() -> None:
    # MFU is a throughput as a share of the device's peak: its fall is the job slowing down
    drop = event("level_shift", "mfu", 6000, 7000, before=0.42, after=0.30)
    (found,) = cross_signal_findings([drop], [SeriesSnapshot("mfu", 0.30, kind="mfu")])
    assert found.kind == "systems_slowdown" and "fell 29%" in found.summary


def test_an_mfu_bleeding_away_with_a_quiet_loss_is_a_systems_problem() -> None:
    drift = event("divergence", "mfu", 6000, 9000, cause="drift", best=0.42, level=0.33)
    (found,) = cross_signal_findings([drift], [SeriesSnapshot("mfu", 0.33, kind="mfu")])
    assert found.kind == "systems_slowdown" and "has been falling since step 6,000, down 21%" in found.summary


def test_an_mfu_rising_is_no_slowdown() -> None:
    rise = event("level_shift", "mfu", 6000, 7000, before=0.30, after=0.42)
    assert cross_signal_findings([rise], [SeriesSnapshot("mfu", 0.42, kind="mfu")]) == []


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


def test_holters_own_gradient_norm_is_an_early_warning_too() -> None:
    # holter.torch.watch logs the whole-model norm as holter/grad_norm, beside the Trainer's grad_norm
    (found,) = cross_signal_findings(
        [event("spike", "holter/grad_norm", 1202, peak=8.1), event("spike", "loss", 1204)], []
    )
    assert found.kind == "grad_norm_precursor" and "holter/grad_norm" in found.summary


def test_one_layers_gradient_norm_spike_is_not_the_models_early_warning() -> None:
    assert (
        cross_signal_findings([event("spike", "holter/grad_norm/layer.3", 1202), event("spike", "loss", 1204)], [])
        == []
    )


def test_a_flat_loss_names_holters_gradient_norm_when_the_trainer_logs_none() -> None:
    series = [SeriesSnapshot("holter/grad_norm/layer.0", 0.0), SeriesSnapshot("holter/grad_norm", 0.0)]
    found = cross_signal_findings([event("plateau", "loss", 0, 400, cause="flat")], series)
    assert kinds(found) == ["no_learning_signal"] and "holter/grad_norm is 0" in found[0].summary


# --- input pipeline stalls ------------------------------------------------------------------------


def wait_share(start: int, end: int, peak: float, metric: str = "holter/loader/wait_fraction") -> Event:
    return event("level_shift", metric, start, end, tolerance=0.2, peak=peak)


def test_waiting_for_data_above_the_ceiling_with_steady_compute_is_an_input_stall() -> None:
    (found,) = cross_signal_findings([wait_share(4000, 4600, 0.62)], [])
    assert found.kind == "input_stall" and found.metric == "holter/loader/wait_fraction" and found.start_step == 4000
    assert found.summary.startswith("input pipeline stall: the step waited 62% of its time for data from step 4,000")


def test_a_small_rise_of_the_compute_time_does_not_hide_a_stall() -> None:
    compute = event("level_shift", "holter/loader/compute_s", 4010, 4600, before=0.0122, after=0.0148)
    (found,) = [f for f in cross_signal_findings([wait_share(4000, 4600, 0.8), compute], []) if f.kind == "input_stall"]
    assert "0.0122 → 0.0148" in found.summary


def test_a_step_whose_own_work_grew_as_much_as_its_waiting_is_not_a_stall() -> None:
    # waiting 25% of a 0.2 s step is 0.067 s; the work itself grew by 0.1 s
    compute = event("level_shift", "holter/loader/compute_s", 4010, 4600, before=0.1, after=0.2)
    found = cross_signal_findings([wait_share(4000, 4600, 0.25), compute], [])
    assert "input_stall" not in kinds(found)


def test_a_wait_share_in_percent_is_read_as_percent() -> None:
    (found,) = cross_signal_findings([wait_share(10, 90, 71.0, metric="time_metrics/data_loading(%)")], [])
    assert "waited 71% of its time" in found.summary


def test_a_single_slow_batch_is_not_a_stall() -> None:
    assert (
        cross_signal_findings([event("spike", "holter/loader/wait_fraction", 500, severity="info", peak=0.9)], []) == []
    )


# --- non-finite tripwire reports --------------------------------------------------------------------

FORWARD = {"name": "layers.7.attn.softmax", "value": "NaN"}
GRADIENT = {"name": "layers.7.attn.q_proj.weight", "value": "NaN"}


def test_a_tripwire_report_is_attached_to_the_loss_divergence_it_explains() -> None:
    events = [
        event("divergence", "grad_norm", 8410, 9000),
        event("divergence", "loss", 8412, 9000, severity="critical"),
    ]
    found = nonfinite_origin(step=8412, forward=FORWARD, gradient=GRADIENT, events=events)
    assert found.summary.startswith(
        "first non-finite output at step 8,412: `layers.7.attn.softmax` (forward, NaN); the gradients followed from it"
    )
    assert "q_proj" not in found.summary  # the gradient a forward NaN poisons names no cause
    assert found.details["gradient"] == GRADIENT  # but it is kept
    assert found.metric == "loss" and found.severity == "critical" and found.start_step == 8412
    assert found.details["divergence"] == {"metric": "loss", "start_step": 8412, "event_id": "loss:divergence@8412"}


def test_a_loss_logged_every_few_steps_still_gets_its_origin() -> None:
    found = nonfinite_origin(
        step=8412, forward=FORWARD, gradient=None, events=[event("divergence", "loss", 8450, 9000)]
    )
    assert found.metric == "loss" and "diverged from step 8,450" in found.summary


def test_a_tripwire_report_finds_the_divergence_of_a_loss_declared_under_its_own_name() -> None:
    # `my/objective` says nothing by its name; declared a loss, its divergence is the one explained
    events = [event("divergence", "my/objective", 8412, 9000, severity="critical")]
    assert nonfinite_origin(step=8412, forward=FORWARD, gradient=None, events=events).metric == ""
    declared = nonfinite_origin(
        step=8412, forward=FORWARD, gradient=None, events=events, kinds={"my/objective": "loss"}
    )
    assert declared.metric == "my/objective" and declared.severity == "critical"


def test_cross_signal_rules_read_each_metric_as_its_declared_kind() -> None:
    # a throughput named without a word Holter knows, declared so: its drop is a systems slowdown
    drop = event("level_shift", "speed/tgs", 5000, 5100, before=52_000.0, after=31_200.0)
    snapshots = [SeriesSnapshot("speed/tgs", 31_200.0, kind="throughput"), SeriesSnapshot("loss", 2.0, kind="loss")]
    assert "systems_slowdown" in kinds(cross_signal_findings([drop], snapshots))
    assert "systems_slowdown" not in kinds(cross_signal_findings([drop], [SeriesSnapshot("loss", 2.0)]))


def test_a_report_with_no_divergence_stands_alone() -> None:
    far = [event("divergence", "loss", 9000, 9500), event("spike", "loss", 8412)]
    found = nonfinite_origin(step=8412, forward=FORWARD, gradient=GRADIENT, events=far)
    assert found.metric == "" and found.severity == "warning" and found.details["divergence"] is None


def test_a_gradient_alone_is_information_and_points_outside_the_model() -> None:
    found = nonfinite_origin(step=3, forward=None, gradient=GRADIENT, events=[])
    assert found.severity == "info" and "every module's output finite" in found.summary


def test_a_module_that_received_non_finite_input_is_named_as_such() -> None:
    found = nonfinite_origin(step=3, forward={**FORWARD, "inputs_finite": False}, gradient=None, events=[])
    assert "whose input was already non-finite" in found.summary


def test_a_tripwire_report_is_not_read_as_a_loss_event_by_the_other_rules() -> None:
    report = nonfinite_origin(
        step=6000, forward=FORWARD, gradient=None, events=[event("divergence", "loss", 6000, 6100)]
    )
    drop = event("level_shift", "tokens_per_s", 6000, 7000, before=52000.0, after=31200.0)
    assert kinds(cross_signal_findings([drop, report], [])) == ["systems_slowdown"]


# the last activation RMS of each layer of a config-initialised 4-layer GPT-2 after 30 steps
# under holter.torch.watch (n_embd=64), as measured on CPU
GPT2_ACTIVATIONS = {
    "transformer.wte": 0.0204,
    "transformer.wpe": 0.021,
    "transformer.h.0": 0.0568,
    "transformer.h.1": 0.1292,
    "transformer.h.2": 0.2207,
    "transformer.h.3": 0.3222,
    "transformer.ln_f": 0.9903,
}


def gpt2_layers(**changed: float) -> list[SeriesSnapshot]:
    values = {**GPT2_ACTIVATIONS, **changed}
    return [SeriesSnapshot(f"holter/act_norm/{layer}", value, 0, 30) for layer, value in values.items()]


def test_a_final_layernorms_output_of_one_is_no_dominance() -> None:
    # the final LayerNorm's RMS is its gain (~1) whatever comes in; the embeddings' is the table's scale
    assert [e for e in cross_signal_findings([], gpt2_layers()) if e.kind == "layer_dominance"] == []


def test_a_block_dwarfing_its_stack_is_still_named() -> None:
    (found,) = [
        e for e in cross_signal_findings([], gpt2_layers(**{"transformer.h.2": 9.0})) if e.kind == "layer_dominance"
    ]
    assert found.metric == "holter/act_norm/transformer.h.2" and found.details["layer"] == "transformer.h.2"
    assert "other 3 layers" in found.summary


@pytest.mark.parametrize("layer", ["model.norm", "gpt_neox.final_layer_norm", "model.layers.3.input_layernorm", "bn1"])
def test_a_normalisation_layer_is_never_the_dominant_one(layer: str) -> None:
    layers = [SeriesSnapshot(f"act_norm/model.layers.{i}", 0.5 + 0.1 * i) for i in range(4)]
    layers.append(SeriesSnapshot(f"act_norm/{layer}", 60.0))
    assert [e for e in cross_signal_findings([], layers) if e.kind == "layer_dominance"] == []
