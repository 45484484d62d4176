"""Event keys: how a run's events are told apart, and who wrote each.

A run's events are stored once per key (`events.event_key`, unique per run). The live
classifier's own events are keyed by the detector (`detect.Event.event_id`: `metric:kind@step`);
every other author prefixes its keys with its own name, listed here once, so that the store can
tell a classifier's event from a finding, a lifecycle status or a threshold rule's event.
"""

from __future__ import annotations

from enum import StrEnum

from holter_server.vocabulary.events import EventKind


class KeyPrefix(StrEnum):
    """The authors of events other than the live classifier, by the prefix of their keys."""

    FINDING = "finding:"  # cross-signal findings of the run (detect/findings.py)
    STATUS = "status:"  # the lifecycle: stalled, resumed, crashed (services/lifecycle.py)
    THRESHOLD = "threshold:"  # a threshold alert rule crossed (services/detection.py)
    TRIPWIRE = "tripwire:"  # the training job's NaN tripwire report (services/tripwires.py)
    REFERENCE = "reference:"  # drift from the reference run after the run finished (services/reference_drift.py)
    JOB_ALERT = "alert:"  # the job's own alert (services/job_alerts.py)

    def like(self) -> str:
        """The SQL LIKE pattern of the keys with this prefix."""
        return f"{self.value}%"


# Events judged from the latest values rather than from events: one per metric, first seen kept.
CURRENT_STATE_FINDINGS = (EventKind.LAYER_DOMINANCE,)


def finding_key(kind: str, metric: str | None, start_step: int | None) -> str:
    """A cross-signal finding's key: per start for most, one per metric for current-state ones."""
    if kind in CURRENT_STATE_FINDINGS:
        return f"{KeyPrefix.FINDING}{kind}:{metric}"
    return f"{KeyPrefix.FINDING}{kind}:{metric}@{start_step}"


def status_key(kind: str, moment: str) -> str:
    """A lifecycle event's key: its kind at the moment it happened (ISO time)."""
    return f"{KeyPrefix.STATUS}{kind}@{moment}"


def threshold_key(rule_id: int, metric: str) -> str:
    """A threshold rule's event: once per rule and metric of a run."""
    return f"{KeyPrefix.THRESHOLD}{rule_id}:{metric}"


def tripwire_key(what: str, step: int) -> str:
    """A tripwire report's event, by what it reports and at which step."""
    return f"{KeyPrefix.TRIPWIRE}{what}@{step}"


def reference_key(metric: str, start_step: int | None) -> str:
    """A drift from the reference run, by metric and where it starts."""
    return f"{KeyPrefix.REFERENCE}{metric}@{start_step}"


def job_alert_key(key: str) -> str:
    """The job's own alert, by the key the job gave it."""
    return f"{KeyPrefix.JOB_ALERT}{key}"
