"""An alert as the outbox stores it: written nested, read back also from rows older versions queued flat."""

from __future__ import annotations

from dataclasses import replace

from holter_server.alerts.message import Alert, stored_alert
from holter_server.detect.events import Event

# as the version before `Alert` carried its event queued it: flat, and the oldest without sparkline and event_id
OLD_FLAT = {
    "project": "gpt2",
    "run_id": "r1",
    "run_name": "baseline",
    "metric": "loss",
    "kind": "divergence",
    "severity": "critical",
    "summary": "loss became NaN at step 8,412",
    "step": 8420,
    "start_step": 8412,
    "end_step": 8431,
    "time": "2026-11-21T23:59:00+00:00",
}


def test_an_old_flat_row_reads_as_the_alert_it_described() -> None:
    alert = stored_alert(OLD_FLAT)
    assert (alert.project, alert.run_id, alert.run_name, alert.time) == (
        "gpt2",
        "r1",
        "baseline",
        "2026-11-21T23:59:00+00:00",
    )
    event = alert.event
    assert (event.kind, event.metric, event.severity, event.summary) == (
        "divergence",
        "loss",
        "critical",
        "loss became NaN at step 8,412",
    )
    assert (event.start_step, event.end_step, alert.step) == (8412, 8431, 8420)
    assert (alert.sparkline, alert.event_id) == ("", None)


def test_an_alert_reads_back_as_it_was_stored() -> None:
    event = Event(
        kind="run_stalled",
        metric=None,
        start_step=None,
        end_step=None,
        severity="warning",
        score=0.0,
        summary="run r1 stalled",
        details={"peak": "Infinity"},
    )
    alert = Alert(
        event=event,
        project="gpt2",
        run_id="r1",
        run_name=None,
        time="2026-11-21T23:59:00+00:00",
        sparkline="▁▂",
        event_id=7,
    )
    assert stored_alert(alert.to_json()) == alert


def test_the_step_an_alert_names_is_the_peak_else_the_start() -> None:
    event = Event(
        kind="spike", metric="loss", start_step=10, end_step=12, severity="warning", score=5.0, summary="spike"
    )
    alert = Alert(event=event, project="p", run_id="r", run_name=None, time="t")
    assert alert.step == 10
    assert replace(alert, event=replace(event, peak_step=11)).step == 11
