"""Turning events into alerts: match the rules and queue deliveries in the outbox, in the same
transaction that records the event (so an event is never stored without its alerts, nor the
other way round)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlencode

from sqlalchemy.orm import Session

from holter_server.alerts.message import Alert, LinkedAlert
from holter_server.alerts.rules import DEFAULT_RULES, EventFacts, RuleSpec, first_crossing, matches, threshold_applies
from holter_server.alerts.sparkline import text_sparkline
from holter_server.analysis.incidents import GROUPED_KINDS
from holter_server.services import reads
from holter_server.services.incidents import incident_of
from holter_server.store import alerts as alerts_store
from holter_server.store import events as events_store
from holter_server.store import runs as runs_store
from holter_server.store.models import AlertRuleRow, EventRow, RunRow
from holter_server.store.runs import now
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.severities import Level, rank
from holter_server.vocabulary.statuses import EventStatus
from holter_server.vocabulary.zoom import zoom_window

COURSE_POINTS = 240  # points of an event's picture (min and max per bucket: a spike is never lost)


@dataclass(frozen=True)
class Course:
    """An event's course on its metric, with the level before it: what its pictures draw."""

    steps: list[int]
    values: list[float]
    start_index: int | None  # where the event starts and ends among the points
    end_index: int | None
    level: float | None  # the metric's level before the event (median of the points before it)


def picture_window(start: int, end: int | None, first_step: int, last_step: int) -> tuple[int, int]:
    """The steps an event's picture shows: the window every page opens the event on (`zoom_window`:
    the run page's Zoom button, the chat link, the post-mortem), within the metric's points."""
    window = zoom_window(start, end)
    assert window is not None  # an event with a start step has a window
    return max(first_step, window[0]), min(last_step, window[1])


def event_course(*, session: Session, run_id: str, event: EventRow) -> Course | None:
    """The event's metric over the steps its link opens on (`picture_window`): the whole stretch
    with as much again before and after it as the run page shows, so a divergence from 2 to 10
    shows the 2 it left; downsampled without losing an extreme. None for an event of no metric."""
    if event.metric is None or event.start_step is None:
        return None
    metric = runs_store.get_metric(session=session, run_id=run_id, name=event.metric)
    if metric is None or metric.first_step is None or metric.last_step is None:
        return None
    start = event.start_step
    end = event.end_step if event.end_step is not None else start
    first, last = picture_window(start, end, metric.first_step, metric.last_step)
    read = reads.read_series(
        session=session, metric=metric, start=first, end=last, max_points=COURSE_POINTS, plain_cap=COURSE_POINTS
    )
    values = [float(v) for v in read.values]
    if not values:
        return None
    starts = [i for i, step in enumerate(read.steps) if step >= start]
    ends = [i for i, step in enumerate(read.steps) if step <= end]
    before = sorted(v for step, v in zip(read.steps, values) if step < start and math.isfinite(v))
    return Course(
        steps=list(read.steps),
        values=values,
        start_index=starts[0] if starts else None,
        end_index=ends[-1] if ends else None,
        level=before[len(before) // 2] if before else None,
    )


def course_of_event(*, session: Session, run_id: str, event_id: int) -> Course | None:
    """The course of the run's event of that id (`event_course`), for its picture; None when the
    run has no such event or it is not an event of a metric with points."""
    event = events_store.get_event(session=session, run_id=run_id, event_id=event_id)
    return event_course(session=session, run_id=run_id, event=event) if event is not None else None


def rule_spec(rule: AlertRuleRow, channel_project: str | None = None) -> RuleSpec:
    """What a rule filters on. A channel of a project hears only that project, whatever its rule
    says (a rule without a project on project A's channel must not receive project B's alerts)."""
    return RuleSpec(
        project=channel_project if channel_project is not None else rule.project,
        run_tag=rule.run_tag,
        metric_pattern=rule.metric_pattern,
        kinds=tuple(rule.kinds) if rule.kinds else None,
        min_severity=rule.min_severity,
        threshold_op=rule.threshold_op,
        threshold_value=rule.threshold_value,
    )


def add_default_rules(*, session: Session, channel_id: int, project: str | None) -> list[AlertRuleRow]:
    """The rules a new channel starts with (`DEFAULT_RULES`): divergence and NaN (an RL policy's KL
    out of its band and its reward collapsing among them), stalled or crashed runs, the logprob
    mismatch leaving ≈0, a policy's entropy collapse, a distributed job's ranks and the job's own
    alerts."""
    return [
        alerts_store.add_rule(
            session=session, channel_id=channel_id, fields={**rule, "project": project, "cooldown_s": 300.0}
        )
        for rule in DEFAULT_RULES
    ]


def dashboard_link(base_url: str, run_id: str, metric: str | None, start: int | None, end: int | None) -> str:
    """The dashboard's run page, showing the metric and zoomed around the steps as every page zooms
    (`zoom_window`; its URL restores the view)."""
    params: dict[str, Any] = {}
    if metric:
        params["metrics"] = metric
    window = zoom_window(start, end)
    if window is not None:
        params["start"], params["end"] = window
    query = f"?{urlencode(params)}" if params else ""
    return f"{base_url.rstrip('/')}/runs/{quote(run_id)}{query}"


def describe_event(*, session: Session, event: EventRow, run: RunRow) -> Alert:
    """What an alert says about an event: everything a channel formatter needs, with the evidence.

    Links are added when it is sent (`with_links`), from the base URL the sender is configured with.
    """
    course = event_course(session=session, run_id=run.id, event=event)
    sparkline = text_sparkline(course.values) if course is not None else ""
    moment = event.updated_at or now()
    return Alert(
        event=events_store.event_of(event),
        project=run.project,
        run_id=run.id,
        run_name=run.name,
        time=moment.isoformat(),
        sparkline=sparkline,
        event_id=event.id,
    )


ImageLink = Callable[[Alert], str]  # an alert -> the signed URL of its event's chart picture


def with_links(alert: Alert, base_url: str, image_link: ImageLink | None = None) -> LinkedAlert:
    """The alert with its dashboard link and, for metric events, the URL of its curve picture
    (signed by `image_link`, so a chat service can fetch it without a key; without one, the plain
    URL, which needs a key when auth is on)."""
    event = alert.event
    image_url = None
    if event.metric and event.start_step is not None and alert.event_id is not None:
        if image_link is not None:
            image_url = image_link(alert)
        else:
            run_path = f"/api/v1/runs/{quote(alert.run_id, safe='')}"
            image_url = f"{base_url.rstrip('/')}{run_path}/events/{alert.event_id}/sparkline.png"
    link = dashboard_link(base_url, alert.run_id, event.metric, event.start_step, event.end_step)
    return alert.linked(link=link, image_url=image_url)


def alert_on_event(*, session: Session, event: EventRow, previous_severity: str | None) -> int:
    """Queue alerts for an event that is new (previous_severity None) or got worse; returns how many.

    Updates to a growing event do not notify again unless its severity rose. Within a rule's
    cooldown for the run, the alert waits until the cooldown ends and goes out grouped with
    whatever else came up meanwhile; an escalation never waits (an event grown worse, or a
    critical one): it goes at once, and takes with it what was waiting for the run.
    """
    if event.status != EventStatus.OPEN:
        return 0
    if previous_severity is not None and rank(event.severity) <= rank(previous_severity):
        return 0
    run = runs_store.get_run(session=session, run_id=event.run_id)
    if run is None:
        return 0
    facts = EventFacts(
        project=run.project,
        run_tags=tuple(run.tags or ()),
        metric=event.metric,
        kind=event.kind,
        severity=event.severity,
    )
    queued = 0
    alert: Alert | None = None
    told: set[int] = set()  # channels with a message about this event: one each, however many rules match
    folded: set[int] | None = None  # channels this event's incident was told to (read once, when needed)
    for rule, channel_project in alerts_store.enabled_rules_with_channel_project(session=session):
        if rule.channel_id in told or not matches(rule_spec(rule, channel_project), facts):
            continue
        told.add(rule.channel_id)
        folded = _told_of_its_incident(session, event) if folded is None else folded
        if rule.channel_id in folded:
            continue  # its incident's message went out: one message per problem
        alert = alert or describe_event(session=session, event=event, run=run)
        key = f"event:{event.id}:{event.severity}:channel:{rule.channel_id}"
        escalation = previous_severity is not None or event.severity == Level.CRITICAL
        queued += _queue(session, rule, run.id, event.id, alert, key, at_once=escalation)
    if event.kind == EventKind.RUN_RESUMED:
        queued += _resolve_stalls(session, run, event)
    return queued


def _told_of_its_incident(session: Session, event: EventRow) -> set[int]:
    """The channels that need no message about this event because its incident, still open, was
    told to them: an event that follows from an already told one folds into that message; the
    root cause itself is told when its consequences were told first (it names the cause), and
    not again when it grows worse. Empty for an event that is an incident of its own."""
    if event.kind not in GROUPED_KINDS:
        return set()  # never part of another event's incident: no need to group the run's events
    found = incident_of(session=session, run_id=event.run_id, event=event)
    if found is None or not found.folded:
        return set()
    others = [row for row in found.rows if row.id != event.id]
    if not any(row.status == EventStatus.OPEN for row in others):
        return set()  # its problem was handled: what comes now is news
    told = alerts_store.told_channels(session=session, run_id=event.run_id, event_ids=[event.id])
    if found.leader.id == event.id:
        return told
    return told | alerts_store.told_channels(session=session, run_id=event.run_id, event_ids=[r.id for r in others])


def _queue(
    session: Session,
    rule: AlertRuleRow,
    run_id: str,
    event_id: int | None,
    alert: Alert,
    key: str,
    purpose: str = "alert",
    at_once: bool = False,
) -> int:
    moment = now()
    not_before = moment
    last = alerts_store.last_delivery_time(session=session, rule_id=rule.id, run_id=run_id)
    if at_once:
        # a cooldown holds back repeats, never an escalation: what waits for the run goes with it
        alerts_store.hasten_waiting(session=session, rule_id=rule.id, run_id=run_id, moment=moment)
    elif last is not None and last > moment:
        not_before = last  # one is already waiting out the cooldown: go with it, as one message
    elif last is not None and moment - last < timedelta(seconds=rule.cooldown_s):
        not_before = last + timedelta(seconds=rule.cooldown_s)
    row = alerts_store.queue_delivery(
        session=session,
        channel_id=rule.channel_id,
        rule_id=rule.id,
        run_id=run_id,
        event_id=event_id,
        purpose=purpose,
        idempotency_key=key,
        alert=alert.to_json(),
        not_before=not_before,
    )
    return 0 if row is None else 1


def _resolve_stalls(session: Session, run: RunRow, event: EventRow) -> int:
    """A stalled run came back: tell every channel that heard about the stall."""
    queued = 0
    for stall in alerts_store.delivered_for(session=session, run_id=run.id, kind=EventKind.RUN_STALLED):
        alert = describe_event(session=session, event=event, run=run)
        row = alerts_store.queue_delivery(
            session=session,
            channel_id=stall.channel_id,
            rule_id=stall.rule_id,
            run_id=run.id,
            event_id=event.id,
            purpose="resolved",
            idempotency_key=f"resolved:{stall.id}:{event.id}",
            alert=alert.to_json(),
            not_before=now(),
        )
        queued += row is not None
    return queued


def threshold_rules_for(
    *, session: Session, run: RunRow, metric: str, rules: Sequence[tuple[AlertRuleRow, str | None]] | None = None
) -> list[AlertRuleRow]:
    """Enabled threshold rules that watch this metric of this run (`rules`: the enabled rules
    with their channel's project, when the caller already read them for many metrics)."""
    if rules is None:
        rules = enabled_rules(session=session)
    return [
        rule
        for rule, channel_project in rules
        if threshold_applies(rule_spec(rule, channel_project), run.project, tuple(run.tags or ()), metric)
    ]


def enabled_rules(*, session: Session) -> list[tuple[AlertRuleRow, str | None]]:
    """The enabled rules of enabled channels, each with its channel's project (read once per detection pass)."""
    return alerts_store.enabled_rules_with_channel_project(session=session)


def threshold_crossing(rule: AlertRuleRow, steps: list[int], values: list[float]) -> tuple[int, float] | None:
    """Where new points first cross a threshold rule, if they do."""
    return first_crossing(rule_spec(rule), steps, values)


def alert_on_threshold(*, session: Session, rule: AlertRuleRow, event: EventRow) -> int:
    """Queue the alert of a threshold rule's own event to that rule's channel."""
    run = runs_store.get_run(session=session, run_id=event.run_id)
    if run is None or event.status != EventStatus.OPEN:
        return 0
    alert = describe_event(session=session, event=event, run=run)
    return _queue(session, rule, run.id, event.id, alert, f"event:{event.id}:threshold:rule:{rule.id}")
