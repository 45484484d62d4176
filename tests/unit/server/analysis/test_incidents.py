"""Events that share a cause become one incident led by its root cause; unrelated ones stay apart."""

from __future__ import annotations

from typing import Any

from holter_server.analysis.incidents import Incident, group_incidents
from holter_server.detect.events import Event


def ev(
    kind: str,
    metric: str | None,
    start: int | None,
    end: int | None = None,
    *,
    severity: str = "warning",
    peak: int | None = None,
    period: float | None = None,
    summary: str = "",
    **details: Any,
) -> Event:
    return Event(
        kind=kind,
        metric=metric,
        start_step=start,
        end_step=end if end is not None else start,
        severity=severity,
        score=1.0,
        summary=summary or f"{kind} on {metric}",
        peak_step=peak,
        period=period,
        details=details,
    )


def nan(metric: str, start: int, end: int = 400) -> Event:
    return ev("divergence", metric, start, end, severity="critical", cause="nonfinite")


def tripwire(step: int, *, forward: str | None = "blocks.1.attn", attached: str | None = "loss") -> Event:
    return ev(
        "first_nonfinite",
        attached or "",
        step,
        severity="critical" if attached else "warning",
        forward={"name": forward, "value": "NaN"} if forward else None,
        gradient={"name": "lm_head.bias", "value": "NaN"},
        divergence={"metric": attached, "start_step": step, "event_id": f"{attached}:divergence@{step}"}
        if attached
        else None,
    )


def members(incident: Incident, events: list[Event]) -> list[str]:
    return [events[i].event_id for i in incident.members]


def one_with(incidents: list[Incident], events: list[Event], event: Event) -> Incident:
    (found,) = [inc for inc in incidents if event in [events[i] for i in inc.members]]
    return found


# --- non-finite -----------------------------------------------------------------------------------


def nan_run() -> list[Event]:
    return [
        nan("holter/act_norm/embed", 85),
        ev("activation_growth", "holter/act_norm/embed", 85, 400, source_event="holter/act_norm/embed:divergence@85"),
        nan("holter/grad_norm/layers.0", 80),
        nan("holter/grad_norm/layers.1", 80),
        nan("holter/grad_norm", 80),
        nan("loss", 80),
        tripwire(80),
    ]


def test_a_nan_and_everything_that_follows_from_it_are_one_incident_led_by_the_tripwire() -> None:
    events = nan_run()
    (incident,) = group_incidents(events)
    assert events[incident.leader].kind == "first_nonfinite"
    assert len(incident.folded) == 6 and incident.rule == "nonfinite"
    assert incident.title == "NaN from `blocks.1.attn` at step 80"
    assert incident.cause.startswith("the forward pass of `blocks.1.attn` made the first non-finite value at step 80")
    assert incident.severity == "critical" and (incident.start_step, incident.end_step) == (80, 400)


def test_the_folded_events_are_listed_earliest_first() -> None:
    events = nan_run()
    (incident,) = group_incidents(events)
    steps = [events[i].start_step for i in incident.folded]
    assert steps == sorted(steps)


def test_a_forward_nan_never_names_the_gradient_it_poisoned_as_its_cause() -> None:
    (incident,) = group_incidents(nan_run())
    assert "lm_head.bias" not in incident.title + incident.cause


def test_a_backward_only_nan_names_the_gradient() -> None:
    events = [tripwire(50, forward=None, attached=None), nan("holter/grad_norm", 50)]
    (incident,) = group_incidents(events)
    assert incident.title == "NaN in the gradient of `lm_head.bias` at step 50"


def test_what_went_wrong_before_the_nan_stays_apart() -> None:
    before = ev("spike", "loss", 40, peak=40)
    slow = ev("systems_slowdown", "throughput", 90, 120)  # the machine, not the model
    stalled = ev("run_stalled", None, 100)
    later = nan("eval_loss", 900, 1000)  # long after the tripwire: another story
    events = [*nan_run(), before, slow, stalled, later]
    incidents = group_incidents(events)
    assert len(incidents) == 5
    for alone in (before, slow, stalled, later):
        assert members(one_with(incidents, events, alone), events) == [alone.event_id]


def test_a_finite_whole_model_spike_after_the_tripwire_is_not_its_consequence() -> None:
    spike = ev("spike", "eval_loss", 100, peak=100)
    events = [tripwire(80), nan("loss", 80), spike]
    assert len(group_incidents(events)) == 2


def test_later_tripwire_reports_fold_into_the_first() -> None:
    events = [tripwire(80), tripwire(81, attached=None), nan("loss", 80)]
    (incident,) = group_incidents(events)
    assert events[incident.leader].start_step == 80


def test_the_nan_incident_comes_first() -> None:
    events = [ev("spike", "loss", 10, severity="critical", peak=10), *nan_run()]
    assert group_incidents(events)[0].rule == "nonfinite"


# --- divergence episodes --------------------------------------------------------------------------


def test_per_layer_divergences_of_one_episode_are_one_incident_led_by_the_earliest() -> None:
    events = [
        ev("divergence", "holter/grad_norm/layers.3", 512, 600),
        ev("divergence", "holter/grad_norm/layers.2", 510, 600),
        ev("divergence", "loss", 500, 600, severity="critical"),
        ev("divergence", "holter/grad_norm", 500, 600),
    ]
    (incident,) = group_incidents(events)
    assert events[incident.leader].metric == "loss" and incident.rule == "episode"
    assert incident.title == "loss and 3 more diverged from step 500"
    assert incident.severity == "critical"


def test_divergences_far_apart_are_two_episodes() -> None:
    events = [ev("divergence", "loss", 500, 520), ev("divergence", "holter/grad_norm/layers.3", 900, 950)]
    assert len(group_incidents(events)) == 2


def test_a_divergence_starting_after_the_first_recovered_is_another_episode() -> None:
    events = [ev("divergence", "loss", 500, 510), ev("divergence", "grad_norm", 540, 600)]
    assert len(group_incidents(events)) == 2


def test_a_finding_read_from_an_episode_member_follows_it() -> None:
    events = [
        ev("divergence", "holter/act_norm/h.0", 500, 600),
        ev("divergence", "loss", 500, 600),
        ev("activation_growth", "holter/act_norm/h.0", 500, 600, source_event="holter/act_norm/h.0:divergence@500"),
    ]
    (incident,) = group_incidents(events)
    assert len(incident.folded) == 2


# --- bad batches ----------------------------------------------------------------------------------


def test_a_bad_batch_seen_in_loss_and_grad_norm_is_one_incident() -> None:
    events = [
        ev("spike", "grad_norm", 300, peak=300),
        ev("spike", "loss", 300, 302, peak=301),
        ev("grad_norm_precursor", "loss", 300, 302, peak=301),
    ]
    (incident,) = group_incidents(events)
    assert incident.rule == "bad_batch" and events[incident.leader].metric == "loss"
    assert incident.title == "bad batch at step 301"
    assert "loss and grad_norm spiked at the same step" in incident.cause


def test_spikes_at_different_steps_are_not_one_batch() -> None:
    events = [ev("spike", "grad_norm", 300, peak=300), ev("spike", "loss", 340, peak=340)]
    assert len(group_incidents(events)) == 2


def test_two_loss_spikes_are_two_batches() -> None:
    events = [ev("spike", "loss", 300, peak=300), ev("spike", "eval_loss", 300, peak=300)]
    assert len(group_incidents(events)) == 2


# --- sawtooth -------------------------------------------------------------------------------------


def saw(metric: str, period: float, **details: Any) -> Event:
    return ev("sawtooth", metric, 0, 560, period=period, members=list(range(40, 560, 40)), **details)


def test_a_sawtooths_teeth_and_eval_pauses_fold_under_the_period_and_its_config_cause() -> None:
    events = [
        ev("spike", "loss", 120, peak=120),
        ev("too_good", "loss", 400, 420),
        ev("divergence", "loss", 440, 445, severity="critical"),
        saw("grad_norm", 40.5),
        saw(
            "loss",
            40.0,
            period_causes=[{"rule": "steps_per_epoch"}],
            period_note="period 40 = dataset_size / batch_size",
        ),
        ev("spike", "throughput", 281, peak=281, severity="info"),  # an eval pause on the beat
    ]
    (incident,) = group_incidents(events)
    assert incident.rule == "sawtooth" and events[incident.leader].metric == "loss"
    assert incident.title == "sawtooth, period 40 steps (period 40 = dataset_size / batch_size)"
    assert "period 40 = dataset_size / batch_size" in incident.cause
    assert len(incident.folded) == 5


def test_a_spike_of_another_signal_off_the_beat_stays_apart() -> None:
    off = ev("spike", "throughput", 300, peak=300)
    events = [saw("loss", 40.0), off]
    assert len(group_incidents(events)) == 2


def test_sawtooths_at_different_periods_stay_apart() -> None:
    assert len(group_incidents([saw("loss", 40.0), saw("throughput", 25.0)])) == 2


# --- singles --------------------------------------------------------------------------------------


def test_an_event_that_shares_no_cause_is_an_incident_of_its_own() -> None:
    events = [ev("plateau", "loss", 10, 90, summary="loss stopped moving"), ev("run_crashed", None, None)]
    incidents = group_incidents(events)
    assert [inc.rule for inc in incidents] == ["single", "single"]
    plateau = one_with(incidents, events, events[0])
    assert plateau.title == "plateau on loss" and plateau.cause == "loss stopped moving"


def test_no_events_no_incidents() -> None:
    assert group_incidents([]) == []


def test_only_the_kinds_a_rule_groups_are_ever_folded() -> None:
    # what the alerting service relies on to skip grouping for a stall or a job's own alert
    from holter_server.analysis.incidents import GROUPED_KINDS

    events = [*nan_run(), ev("run_stalled", None, 90), ev("alert", None, 85), ev("gpu_throttled", "gpu0", 81)]
    for incident in group_incidents(events):
        if incident.folded:
            assert all(events[i].kind in GROUPED_KINDS for i in incident.members)


# --- a distributed job's ranks ------------------------------------------------------------------


def test_a_lost_rank_leads_the_runs_crash_and_the_hang_that_came_of_it() -> None:
    lost = ev("rank_lost", None, 60, severity="critical", ranks=[3])
    crash = ev("run_crashed", None, 59, severity="critical")
    hung = ev("rank_hung", None, 60, severity="critical", ranks=[3])
    spike = ev("spike", "loss", 10)
    events = [crash, spike, hung, lost]
    incidents = group_incidents(events)
    stop = one_with(incidents, events, lost)
    assert stop.rule == "ranks" and events[stop.leader] is lost
    assert set(members(stop, events)) == {lost.event_id, crash.event_id, hung.event_id}
    assert stop.title == "rank 3 lost at step 60"
    assert one_with(incidents, events, spike).rule == "single"  # an earlier problem stays apart


def test_a_hung_job_with_no_lost_rank_is_led_by_the_hang() -> None:
    hung = ev("rank_hung", None, 100, severity="critical", ranks=[2])
    events = [hung, ev("straggler", None, 0, 90, ranks=[1])]
    incidents = group_incidents(events)
    stop = one_with(incidents, events, hung)
    assert stop.title == "job hung: rank 2 at step 100" and len(stop.members) == 1
    assert one_with(incidents, events, events[1]).rule == "single"  # a straggler is its own problem


def test_a_rank_non_finite_before_its_peers_leads_the_nan_that_followed() -> None:
    outlier = ev("rank_outlier", "loss", 80, severity="critical", ranks=[1], cause="nonfinite")
    divergence = nan("loss", 81)
    grads = nan("holter/grad_norm", 90)
    events = [divergence, grads, outlier]
    (incident,) = group_incidents(events)
    assert incident.rule == "nonfinite" and events[incident.leader] is outlier
    assert incident.title == "NaN from rank 1 at step 80"


def test_the_tripwire_leads_before_a_ranks_non_finite_loss_at_the_same_step() -> None:
    trip = tripwire(80)
    trip.details["rank"] = 1
    outlier = ev("rank_outlier", "loss", 80, severity="critical", ranks=[1], cause="nonfinite")
    events = [outlier, trip, nan("loss", 81)]
    (incident,) = group_incidents(events)
    assert events[incident.leader] is trip and incident.title == "NaN from `blocks.1.attn` on rank 1 at step 80"


def test_a_rank_apart_from_its_peers_by_a_finite_gap_is_a_problem_of_its_own() -> None:
    apart = ev("rank_outlier", "loss", 100, 300, ranks=[5])
    events = [apart, nan("loss", 400)]
    incidents = group_incidents(events)
    assert len(incidents) == 2


def test_a_creeping_loss_the_eval_loss_turning_up_after_it_and_their_finding_are_one_problem() -> None:
    # issue 46: three incidents (the drift, "drifting together", the eval loss) for one problem
    drift = ev("divergence", "loss", 1300, 2400, severity="critical")
    together = ev("drift_together", "loss", 1300, 2400, severity="critical")
    eval_up = ev("divergence", "eval_loss", 1700, 2300)
    events = [drift, together, eval_up]
    (incident,) = group_incidents(events)
    assert events[incident.leader] is drift and incident.rule == "episode"
    assert set(members(incident, events)) == {drift.event_id, together.event_id, eval_up.event_id}


def test_a_learning_problem_and_a_systems_one_at_the_same_time_stay_two() -> None:
    drift = ev("divergence", "loss", 1300, 2400, severity="critical")
    slower = ev("divergence", "holter/throughput/tokens_per_s", 1700, 2400)
    events = [drift, slower]
    assert len(group_incidents(events, {"holter/throughput/tokens_per_s": "throughput"})) == 2


def test_a_throughput_drop_and_the_step_time_rise_that_is_the_same_fact_are_one() -> None:
    slower = ev("divergence", "tokens_per_s", 500, 2000)
    longer = ev("divergence", "step_time", 900, 2000)
    events = [slower, longer]
    (incident,) = group_incidents(events, {"tokens_per_s": "throughput", "step_time": "step_time"})
    assert events[incident.leader] is slower
