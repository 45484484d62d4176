"""Live detection: feed newly stored points to each metric's incremental detector and keep
the run's events current (the batch re-analysis of a whole run: services/run_analysis.py).

Work is found in the database (metrics whose last step is past what detection has seen), so
any number of service processes can run the loop; each pass claims its metrics, updates their
events and saves how far it got in one transaction. A process keeps its detectors between
passes and saves their state when their events change and every few seconds; one rebuilt from
an older state reads the points since again and finds the same events, stored by key: a restart
neither misses nor repeats an event.

Just over 400 lines, kept as one module: the claimed pass, the live detectors it keeps between
passes and the cross-signal findings refreshed in the same transaction share one unit of work.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from holter_server.analysis.periods import own_cadence, period_seconds
from holter_server.detect import DETECTOR_VERSION, Event, IncrementalDetector
from holter_server.detect.classify import Detector, detector_from_state, new_detector
from holter_server.detect.events import format_step, format_value
from holter_server.detect.findings import NONFINITE_ORIGIN, SeriesSnapshot, cross_signal_findings, nonfinite_origin
from holter_server.detect.outline import Outline, SeriesOutline
from holter_server.detect.triage import can_wait
from holter_server.services import alerting
from holter_server.services.attribution import TWIN_KIND, attribute_twin_spikes, explain_period
from holter_server.services.kinds import metric_kinds_of, understood_metrics_named, understood_metrics_of_runs
from holter_server.store import detection_queue
from holter_server.store import events as events_store
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.store.database import session_scope, writers_run_side_by_side
from holter_server.store.models import AlertRuleRow, EventRow, MetricRow, RunRow
from holter_server.vocabulary import event_keys
from holter_server.vocabulary.event_keys import KeyPrefix
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.kinds import MetricKinds
from holter_server.vocabulary.names import Understanding, understand
from holter_server.vocabulary.signals import LOSS_KINDS, signal
from holter_server.vocabulary.statuses import LIVE_RUN_STATUS

log = logging.getLogger("holter.detection")

# Points fed per live transaction, over all the metrics it claimed: a long backlog (an imported
# run, a bulk load) is worked off in many short transactions, so ingest never waits long for
# SQLite's one write lock.
POINTS_PER_TRANSACTION = 20_000


def record_event(
    *, session: Session, run_id: str, key: str, event: Event, muted: bool, keep_start: bool = False
) -> EventRow:
    """Store an event (new or grown) and, in the same transaction, queue the alerts it calls for."""
    row, previous = events_store.upsert_event(
        session=session,
        run_id=run_id,
        event_key=key,
        event=event,
        detector_version=DETECTOR_VERSION,
        muted=muted,
        keep_start=keep_start,
    )
    if previous is None or previous != row.severity:
        alerting.alert_on_event(session=session, event=row, previous_severity=previous)
    return row


def detection_limits(session_factory: sessionmaker[Session]) -> tuple[int, int]:
    """Metrics per pass of `detect_pending` and per transaction, by store (see there)."""
    return (1_000, 1_000) if writers_run_side_by_side(session_factory) else (50, 8)


def detect_pending(
    *,
    session_factory: sessionmaker[Session],
    live: LiveDetectors,
    limit: int | None = None,
    per_transaction: int | None = None,
) -> int:
    """One pass of live detection over up to `limit` metrics with new points; returns how many.
    `live` holds the detectors kept between passes (one per detection loop: `DetectionLoop.live`).

    Metrics are claimed a group at a time, each group in its own transaction. On SQLite a
    transaction holds the one write lock, so groups are small there and ingest never waits
    behind a long pass; on Postgres ingest and detection touch different rows, and one group
    is the whole pass, across runs, so each run's findings are refreshed once per pass, not
    once per metric, and a pass that claimed every metric with new points ends there: the
    metrics whose points wait are then not moved back in the queue (a row update each, every
    pass), as only a later group of the same pass or a backlog needs (`_detect_some`).
    """
    default_limit, default_per_transaction = detection_limits(session_factory)
    limit = limit if limit is not None else default_limit
    per_transaction = per_transaction if per_transaction is not None else default_per_transaction
    done = 0
    started = events_store.now()  # each metric once per pass: one whose points wait is not claimed again in it
    with session_scope(session_factory) as session:  # its own short transaction: ingest updates these rows too
        due = detection_queue.settle_detected_runs(session=session)  # (a run due from now on is read next pass)
    while done < limit:
        claimed, more = _detect_some(
            session_factory, live, min(per_transaction, limit - done), not_since=started, due=due
        )
        done += claimed
        if not more:
            break
    return done + save_quiet_states(session_factory, live)


@dataclass
class _Live:
    """A detector kept between passes by the process that last saved its metric's progress."""

    saved_step: int  # the detected_step saved in the database: the last step it has read
    kind: str
    detector: Detector | None
    saved_at: float  # when its state was last saved
    fed_at: float  # when its metric last had new points
    read_at: float  # when the detector last read points (new points may wait: detect/triage.py)
    state_behind: bool  # whether it has read points since its state was saved
    # points read from the store that wait for the detector's next call (their step is past the
    # saved detected_step: another process, or this one after a restart, reads them again)
    waiting: tuple[list[int], list[float]] = field(default_factory=lambda: ([], []))


@dataclass
class _Plan:
    """What a pass does with one claimed metric."""

    item: detection_queue.DetectionWork
    run: RunRow
    understood: Understanding
    detector: Detector | None
    restart: bool  # read the metric again from its first point
    fed: int  # the last step its detector has read
    live: _Live | None  # the detector at hand, if the pass uses it

    @property
    def read_from(self) -> int:
        """The last step already read, in the detector or waiting for it."""
        return self.live.waiting[0][-1] if self.live is not None and self.live.waiting[0] else self.fed


def save_quiet_states(session_factory: sessionmaker[Session], live_detectors: LiveDetectors) -> int:
    """Save the states of the detectors at hand whose metrics have had no new points for
    QUIET_S while their saved state is behind, and refresh their runs' findings; returns how many."""
    moment = time.monotonic()
    # (one with points waiting reads them within WAIT_S, and is saved once quiet after that)
    due = {
        key: live
        for key, live in live_detectors.items()
        if live.state_behind and moment - live.fed_at >= QUIET_S and not live.waiting[0]
    }
    if not due:
        return 0
    saved: list[detection_queue.DetectionProgress] = []
    with session_scope(session_factory) as session:
        steps = detection_queue.lock_detection_rows(session=session, keys=list(due))
        for key, detected_step in steps.items():
            live = due[key]
            if detected_step != live.saved_step:
                continue  # someone else went on: theirs is the newer state
            state = live.detector.state() if live.detector else _no_detector(live.kind)
            saved.append(
                detection_queue.DetectionProgress(
                    run_id=key[0],
                    metric_id=key[1],
                    detected_step=detected_step,
                    state=state,
                    detector_version=DETECTOR_VERSION,
                )
            )
        detection_queue.save_detection_states(session=session, progress=saved)
        runs = {p.run_id for p in saved}
        muted = events_store.muted_kinds_of_runs(session=session, run_ids=sorted(runs))
        # the runs' findings as of their last points, not as of some seconds before
        detectors: dict[str, dict[str, Detector]] = {run_id: {} for run_id in runs}
        for key, live in due.items():
            if key[0] in runs and live.detector is not None:
                detectors[key[0]][live.detector.metric] = live.detector
        refresh_findings_of_runs(session=session, run_ids=sorted(runs), muted=muted, detectors=detectors)
    for p in saved:  # saved and quiet: nothing to keep in memory for it (its run may be over)
        live_detectors.pop((p.run_id, p.metric_id), None)
    live_detectors.prune()
    return len(saved)


class LiveDetectors(OrderedDict[tuple[str, int], _Live]):
    """The detectors a detection loop has at hand, by (run, metric id), and when it last refreshed
    each run's findings; owned by the loop (`DetectionLoop.live`), one per process and database.

    It holds the detectors of metrics still receiving points (a quiet one's state is saved and its
    detector dropped). One whose saved_step is not the database's detected_step any more (another
    process went on, detection was reset) is rebuilt from the saved state. Bounded (a detector
    holds its 1,024-point tail): least recently used go first. A run with no detector at hand any
    more (gone quiet, finished, deleted) is forgotten, its findings time with it.
    """

    def __init__(self, limit: int | None = None) -> None:
        super().__init__()
        self.limit = limit if limit is not None else LIVE_DETECTORS
        # when each run's cross-signal findings were last refreshed (time.monotonic())
        self.findings_at: dict[str, float] = {}

    def keep(self, key: tuple[str, int], live: _Live) -> None:
        """Hold `live` as the most recently used detector, dropping the least recently used past the limit."""
        self[key] = live
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)

    def findings_due(self, run_id: str, moment: float) -> bool:
        """Whether the run's findings were refreshed FINDINGS_EVERY_S or longer before `moment`."""
        return moment - self.findings_at.get(run_id, -FINDINGS_EVERY_S) >= FINDINGS_EVERY_S

    def prune(self) -> None:
        """Forget the findings times of runs with no detector at hand."""
        at_hand = {run_id for run_id, _ in self}
        for run_id in [r for r in self.findings_at if r not in at_hand]:
            del self.findings_at[run_id]


LIVE_DETECTORS = 10_000
# Every pass saves how far detection got (detected_step, a small UPDATE); the detector's state
# (about 20 kB of JSON) is saved with it when its events change, when its metric has gone quiet,
# and at least this often. A detector rebuilt from an older state reads again from its own last
# step, which gives the same events again (stored by key; an alert is queued once per event and
# severity), so a restart neither misses nor repeats one. Encoding the states was most of a pass
# under a lab's load at 10 s; at 30 s a restart reads again at most 30 s of points per metric.
SAVE_EVERY_S = 30.0
# A metric that had no new points for this long is caught up: its state is saved and its
# detector dropped (a pass that merely came between two of its batches must not count: passes
# under load come every second or two, see DetectionLoop).
QUIET_S = 5.0
# A run's cross-signal findings are refreshed in the pass where its events change, and otherwise
# at most this often while its points come in (they read the latest values and outlines).
FINDINGS_EVERY_S = 5.0
# New points close to the level their detector last described wait for its next call, for at
# most this long (detect/triage.py): a lab's worth of quiet metrics is then read every few
# seconds with a few seconds' points, at the cost of one second's, and an outlier, a NaN or a
# jump is still read in the pass it arrives in.
WAIT_S = 5.0


def _detect_some(
    session_factory: sessionmaker[Session],
    live_detectors: LiveDetectors,
    limit: int,
    not_since: datetime,
    due: Sequence[str],
) -> tuple[int, bool]:
    """Claim up to `limit` metrics with new points and read them, in one transaction; returns
    how many, and whether more were waiting to be claimed (then the pass goes on)."""
    kept: dict[tuple[str, int], _Live] = {}
    work: list[detection_queue.DetectionWork] = []
    try:
        with session_scope(session_factory) as session:
            # one more than asked for says whether this group leaves any behind (its run is held
            # with the others until the commit, and read by the next group or pass)
            work = detection_queue.claim_detection_work(
                session=session, limit=limit + 1, not_since=not_since, among_runs=due
            )
            more = len(work) > limit
            work = work[:limit]
            if not work:
                return 0, False
            # Metrics whose points wait are moved back in the queue, so that the pass's next
            # group, and the next pass of a backlog, take others first. A group that took every
            # metric with new points ends its pass: the next pass claims them all again anyway,
            # and the order they wait in is the memory of this process (`_Live.waiting`).
            _detect_claimed(session, work, live_detectors, kept, move_waiting_back=more)
    except BaseException:
        for item in work:
            live_detectors.pop((item.run_id, item.metric_id), None)
        raise
    for key, live in kept.items():  # only once committed: what the database now says
        live_detectors.keep(key, live)
    return len(work), more


def _detect_claimed(
    session: Session,
    work: list[detection_queue.DetectionWork],
    live_detectors: LiveDetectors,
    kept: dict[tuple[str, int], _Live],
    move_waiting_back: bool,
) -> None:
    runs = runs_store.get_runs(session=session, run_ids={item.run_id for item in work})
    rules = alerting.enabled_rules(session=session)
    touched: set[str] = set()  # runs whose events changed: their findings are refreshed now
    spikes_moved: set[str] = set()  # runs whose spikes changed: only their twins need a new look
    fed_runs: set[str] = set()  # runs whose detectors read new points: their findings are refreshed now and then
    # per run, read once for all the runs of the pass
    muted_by_run = events_store.muted_kinds_of_runs(session=session, run_ids=list(runs))
    understood_by_run = understood_metrics_of_runs(session=session, runs=runs)
    at_hand = {}
    for item in work:
        live = live_detectors.get((item.run_id, item.metric_id))
        if live is not None and live.saved_step == item.detected_step and item.detector_version == DETECTOR_VERSION:
            at_hand[(item.run_id, item.metric_id)] = live
    missing: dict[str, list[int]] = {}
    for item in work:
        if (item.run_id, item.metric_id) not in at_hand:
            missing.setdefault(item.run_id, []).append(item.metric_id)
    saved_states = {
        (run_id, metric_id): state
        for run_id, ids in missing.items()
        for metric_id, state in detection_queue.detection_states(session=session, run_id=run_id, metric_ids=ids).items()
    }
    plans = []
    for item in work:
        run = runs.get(item.run_id)
        if run is None:
            continue
        understood = understood_by_run[item.run_id].get(item.metric) or understand(
            item.metric, declarations=run.metric_definitions
        )
        live = at_hand.get((item.run_id, item.metric_id))
        if live is not None and live.kind == understood.kind:
            plans.append(_Plan(item, run, understood, live.detector, False, live.saved_step, live))
            continue
        state = saved_states.get((item.run_id, item.metric_id))
        if live is not None:  # its kind changed since: start over as the saved state would
            state = {"kind": live.kind}
        detector, restart = _detector_for(state, item.metric, understood.kind)
        # the saved state may be older than the saved progress (it is saved less often): read
        # again from where the detector itself stopped; it ignores what it has already seen
        resume = (
            item.detected_step
            if detector is None or detector.last_step is None
            else min(item.detected_step, detector.last_step)
        )
        plans.append(_Plan(item, run, understood, detector, restart, -1 if restart else resume, None))
    share = max(1_000, POINTS_PER_TRANSACTION // len(work))
    # every claimed metric's new points in one read
    new_points = points_store.read_points_from(
        session=session,
        starts=[(plan.item.run_id, plan.item.metric_id, plan.read_from + 1) for plan in plans],
        limit_each=share,
    )
    saved = []
    waited_keys: list[tuple[str, int]] = []
    moment = time.monotonic()
    for plan in plans:
        item, run, understood, detector, restart, fed = (
            plan.item,
            plan.run,
            plan.understood,
            plan.detector,
            plan.restart,
            plan.fed,
        )
        saved_at, read_at = (plan.live.saved_at, plan.live.read_at) if plan.live is not None else (None, None)
        if restart:
            # what the metric is has changed since its detector started (its run's other metrics
            # revealed a GRPO run, say): its events so far were read wrongly, read it all again
            events_store.withdraw_metric_events(session=session, run_id=item.run_id, metrics=[item.metric])
            touched.add(item.run_id)
            spikes_moved.add(item.run_id)
        new = new_points[(item.run_id, item.metric_id)]
        waited = plan.live.waiting if plan.live is not None else ([], [])
        steps, values = waited[0] + new.steps, waited[1] + new.values
        # a detector at hand whose new points are unremarkable reads them later, with more; they
        # wait in memory, unread as far as the store says, so a restart meanwhile loses nothing.
        # Only while the run logs: no later points come to a finished one, its last ones are read now.
        waits = (
            run.status == LIVE_RUN_STATUS
            and detector is not None
            and read_at is not None
            and bool(steps)
            and len(steps) < share
            and moment - read_at < WAIT_S
            and (not new.steps or can_wait(detector, new.steps, new.values))
        )
        if waits:
            fed_step = item.detected_step
        else:
            fed_step = steps[-1] if steps else max(fed, item.last_step or item.detected_step)
        muted = muted_by_run[item.run_id]
        events_changed = restart or saved_at is None
        update, failed = None, False
        if detector is not None and steps and not waits:
            try:
                update = detector.add(steps, values)
            except Exception:
                # One series a detector cannot read must not stop detection of every other metric
                # (the pass's transaction would fail again and again): say so, and start that
                # metric over with a fresh detector from its next points.
                log.exception(
                    "detection of %r in run %s failed at steps %d-%d; its detector starts over",
                    item.metric,
                    item.run_id,
                    steps[0],
                    steps[-1],
                )
                detector, failed, events_changed = None, True, True
        if update is not None:
            for event in update.changed:
                if event.kind == EventKind.SAWTOOTH and _at_own_cadence(session, item, event):
                    # the monitor's own footprint (issue 46): no finding, and withdrawn if it was one
                    events_store.withdraw_events(session=session, run_id=item.run_id, event_keys=[event.event_id])
                    continue
                record_event(
                    session=session,
                    run_id=item.run_id,
                    key=event.event_id,
                    event=explain_period(event, run.config),
                    muted=(event.metric, event.kind) in muted,
                )
            events_store.withdraw_events(session=session, run_id=item.run_id, event_keys=update.withdrawn)
            if update.withdrawn or any(event.kind == TWIN_KIND for event in update.changed):
                spikes_moved.add(item.run_id)
            events_changed = events_changed or bool(update.changed or update.withdrawn)
            if update.changed or update.withdrawn:
                touched.add(item.run_id)
            fed_runs.add(item.run_id)
        for rule in alerting.threshold_rules_for(session=session, run=run, metric=item.metric, rules=rules):
            events_changed = (
                _check_threshold(session, rule, item.run_id, item.metric, new.steps, new.values) or events_changed
            )
        key = (item.run_id, item.metric_id)
        fed_at = moment if new.steps else (at_hand[key].fed_at if key in at_hand else moment)
        with_state = events_changed or not steps or saved_at is None or moment - saved_at >= SAVE_EVERY_S
        if waits and not with_state:
            waited_keys.append(key)  # its progress stays behind its points, unsaved
        elif with_state or fed_step != item.detected_step:
            saved.append(
                detection_queue.DetectionProgress(
                    run_id=item.run_id,
                    metric_id=item.metric_id,
                    detected_step=fed_step,
                    state=(detector.state() if detector else _no_detector(understood.kind))
                    if with_state
                    else detection_queue.KEEP_STATE,
                    detector_version=DETECTOR_VERSION,
                )
            )
        if not failed:  # a failed one is rebuilt, fresh, from what was just saved
            kept[key] = _Live(
                saved_step=fed_step,
                kind=understood.kind,
                detector=detector,
                saved_at=moment if with_state else saved_at,
                fed_at=fed_at,
                state_behind=not with_state,
                read_at=read_at if waits else (moment if steps or read_at is None else read_at),
                waiting=(steps, values) if waits else ([], []),
            )
    detection_queue.save_detection_states(session=session, progress=saved)
    if move_waiting_back:
        detection_queue.mark_detection_read(session=session, keys=waited_keys)  # one statement for all
    at_hand_by_run: dict[str, dict[str, Detector]] = {}
    for item in (plan.item for plan in plans):
        live = kept.get((item.run_id, item.metric_id))
        if live is not None and live.detector is not None:
            at_hand_by_run.setdefault(item.run_id, {})[item.metric] = live.detector
    refreshed = sorted(touched | {run_id for run_id in fed_runs if live_detectors.findings_due(run_id, moment)})
    for run_id in refreshed:
        live_detectors.findings_at[run_id] = moment
    # outlines from the detectors at hand: their saved states may be a few seconds behind
    refresh_findings_of_runs(session=session, run_ids=refreshed, muted=muted_by_run, detectors=at_hand_by_run)
    # reads the configs of the project's runs: once per change of a run's spikes, not per pass
    for run_id in sorted(spikes_moved):
        attribute_twin_spikes(session=session, run_id=run_id)


def _at_own_cadence(session: Session, item: detection_queue.DetectionWork, event: Event) -> bool:
    """Whether a sawtooth's period, in seconds (from its beats' wall times), is one of Holter's own
    rhythms (`analysis.periods.OWN_CADENCES`)."""
    members = event.details.get("members")
    steps = [int(s) for s in members] if isinstance(members, list) and members else []
    if not steps and event.start_step is not None and event.end_step is not None:
        steps = [int(event.start_step), int(event.end_step)]
    if len(steps) < 2 or not event.period:
        return False
    steps = [steps[0], steps[-1]]
    times = points_store.wall_times_at(session=session, run_id=item.run_id, metric_id=item.metric_id, steps=steps)
    seconds = period_seconds(steps, times, float(event.period))
    return seconds is not None and own_cadence(seconds) is not None


def _check_threshold(
    session: Session, rule: AlertRuleRow, run_id: str, metric: str, steps: list[int], values: list[float]
) -> bool:
    """A threshold rule fires once per metric of a run, at the first point that crosses it;
    returns whether it fired now."""
    key = event_keys.threshold_key(rule.id, metric)
    if events_store.get_event_by_key(session=session, run_id=run_id, event_key=key) is not None:
        return False
    crossing = alerting.threshold_crossing(rule, steps, values)
    if crossing is None:
        return False
    step, value = crossing
    limit = (
        "non-finite"
        if rule.threshold_op == "nonfinite"
        else f"{rule.threshold_op} {format_value(rule.threshold_value or 0.0)}"
    )
    event = Event(
        kind=EventKind.THRESHOLD,
        metric=metric,
        start_step=step,
        end_step=step,
        severity=rule.min_severity,
        score=0.0,
        peak_step=step,
        summary=f"{metric} was {format_value(value)} at step {format_step(step)}, {limit} (rule {rule.name!r})",
        details={"rule_id": rule.id, "value": value},
    )
    row, _ = events_store.upsert_event(
        session=session, run_id=run_id, event_key=key, event=event, detector_version=DETECTOR_VERSION
    )
    alerting.alert_on_threshold(session=session, rule=rule, event=row)
    return True


def _detector_for(state: dict[str, Any] | None, metric: str, kind: str) -> tuple[Detector | None, bool]:
    """The metric's detector (None for a kind no detector reads) and whether to start it over
    from the first point, because the kind it was reading the metric as has changed."""
    restart = bool(state) and state.get("kind") != kind  # type: ignore[union-attr]
    if not signal(kind).analysed:
        return None, restart
    if state and not restart and state.get("detector_version") == DETECTOR_VERSION and "format" in state:
        return detector_from_state(state), False
    return new_detector(metric, kind=kind), restart


def _no_detector(kind: str) -> dict[str, Any]:
    # remembered so that a later change of kind is noticed even for a metric nothing watched
    return {"kind": kind}


def row_to_event(row: EventRow) -> Event:
    """A stored event as the cross-signal rules read it: a metric name and steps always there
    ("" and 0 for an event of the whole run), as the detectors make them."""
    return replace(
        events_store.event_of(row), metric=row.metric or "", start_step=row.start_step or 0, end_step=row.end_step or 0
    )


def finding_key(event: Event) -> str:
    """Stable identity of a cross-signal finding (vocabulary/event_keys.py)."""
    return event_keys.finding_key(event.kind, event.metric, event.start_step)


# The losses' values are what the run-level rules read (train vs eval loss, a loss stuck at 0),
# from the outline kept in each metric's saved detector state.
OUTLINED_KINDS = LOSS_KINDS


def snapshots(*, session: Session, run_id: str, detectors: dict[str, Detector] | None = None) -> list[SeriesSnapshot]:
    """What the cross-signal rules need about each metric of the run: its kind (declared or
    recognised), the latest value, and for losses their outline (from its detector in
    `detectors` when there is one, else from the saved live state; `detectors` given and None
    for a metric: no outline)."""
    run = runs_store.get_run(session=session, run_id=run_id)
    metrics = runs_store.list_metrics(session=session, run_id=run_id)
    return _snapshots(session, run_id, run, metrics, detectors)


def _snapshots(
    session: Session,
    run_id: str,
    run: RunRow | None,
    metrics: Sequence[MetricRow],
    detectors: dict[str, Detector] | None,
) -> list[SeriesSnapshot]:
    """`snapshots` of the run's metrics already read (by name)."""
    # the names just read, understood as live detection understands them (cached): not read again
    run_kinds = (
        metric_kinds_of(understood_metrics_named(names=[m.name for m in metrics], run=run), run)
        if run is not None
        else MetricKinds()
    )
    kinds = {m.name: run_kinds[m.name] for m in metrics}
    outlined = {m.metric_id: m.name for m in metrics if kinds[m.name] in OUTLINED_KINDS}
    states = {}
    from_states = [metric_id for metric_id, name in outlined.items() if detectors is None or name not in detectors]
    if from_states:
        states = detection_queue.detection_states(session=session, run_id=run_id, metric_ids=from_states)
    out = []
    for m in metrics:
        outline = None
        if m.metric_id in outlined:
            detector = detectors.get(m.name) if detectors is not None else None
            if isinstance(detector, IncrementalDetector):
                outline = detector.outline_snapshot()
            elif detectors is not None and m.name in detectors:
                outline = None
            elif m.metric_id in states:
                outline = _saved_outline(states[m.metric_id], m.name, kinds[m.name])
        out.append(SeriesSnapshot(m.name, m.last_value, m.first_step, m.last_step, kind=kinds[m.name], outline=outline))
    return out


def _saved_outline(state: dict[str, Any], metric: str, kind: str) -> SeriesOutline | None:
    # a state saved while the metric was read as another kind is about to be started over
    if state.get("detector_version") != DETECTOR_VERSION or "outline" not in state or state.get("kind") != kind:
        return None
    return Outline.from_state(state["outline"]).snapshot(metric, kind)


def refresh_findings_of_runs(
    *,
    session: Session,
    run_ids: Sequence[str],
    muted: Mapping[str, set[tuple[str, str]]],
    detectors: Mapping[str, dict[str, Detector]],
) -> None:
    """Recompute the runs' cross-signal findings from their stored events and keep them current,
    and attach tripwire reports to the divergences found since they arrived (`muted` by run;
    `detectors` by run: live detectors of some of its metrics, whose outlines are newer than the
    saved ones). The runs' events, metrics and standing findings are read in one query each: a
    pass refreshes the findings of many runs at once. (A run's refresh writes only its own events,
    so reading every run's first reads the same.)"""
    rows_by_run = events_store.runs_events_for_findings(session=session, run_ids=run_ids)
    metrics_by_run = runs_store.list_metrics_of_runs(session=session, run_ids=run_ids)
    runs = {run_id: runs_store.get_run(session=session, run_id=run_id) for run_id in run_ids}  # (at hand: no read)
    standing = events_store.finding_keys_of_runs(session=session, run_ids=run_ids)
    for run_id in run_ids:
        _refresh_findings(
            session,
            run_id,
            runs.get(run_id),
            rows_by_run[run_id],
            metrics_by_run[run_id],
            standing[run_id],
            muted.get(run_id, set()),
            detectors.get(run_id),
        )


def _refresh_findings(
    session: Session,
    run_id: str,
    run: RunRow | None,
    rows: Sequence[EventRow],
    metrics: Sequence[MetricRow],
    standing: set[str],
    muted: set[tuple[str, str]],
    detectors: dict[str, Detector] | None,
) -> None:
    events = [row_to_event(row) for row in rows]
    series = _snapshots(session, run_id, run, metrics, detectors)
    kinds = MetricKinds(
        {s.metric: s.kind for s in series if s.kind is not None}, run.metric_definitions if run else None
    )
    config = run.config if run is not None else None
    found = {finding_key(f): explain_period(f, config) for f in cross_signal_findings(events, series, kinds)}
    for key, finding in found.items():
        record_event(
            session=session,
            run_id=run_id,
            key=key,
            event=finding,
            muted=(finding.metric, finding.kind) in muted,
            keep_start=finding.kind in event_keys.CURRENT_STATE_FINDINGS,
        )
    # (read before this run's findings were recorded: those are all in `found`)
    stale = standing - found.keys()
    events_store.withdraw_events(session=session, run_id=run_id, event_keys=stale)
    for row in rows:
        if row.kind == NONFINITE_ORIGIN and row.event_key.startswith(KeyPrefix.TRIPWIRE):
            details = row.details or {}
            attached = nonfinite_origin(
                step=row.start_step or 0,
                forward=details.get("forward"),
                gradient=details.get("gradient"),
                events=events,
                kinds=kinds,
                origin_rank=details.get("rank"),
                rank_reports=details.get("rank_reports"),
            )
            if events_store.stored_details(attached) != details or attached.severity != row.severity:
                record_event(
                    session=session,
                    run_id=run_id,
                    key=row.event_key,
                    event=attached,
                    muted=(attached.metric, attached.kind) in muted,
                )
