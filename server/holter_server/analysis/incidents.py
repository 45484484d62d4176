"""One incident per problem: a run's events grouped by the cause they share, each group led by
its root cause with the rest folded under it. Pure: events in, incidents out.

One NaN makes a dozen events (the loss, every gradient norm, every layer's activation norm goes
non-finite, and each finding read from them follows); a sawtooth's teeth are spikes too; a bad
batch shows in the loss and the gradient norm at the same step. Told one by one they bury the
cause (the tripwire's module, the period's config cause, the batch) under its consequences. The
rules, tried in this order, each taking only events no earlier rule took:

* **non-finite**: a tripwire report (`first_nonfinite`) leads what follows from it: the
  divergence it is attached to, every non-finite divergence and per-layer event starting at its
  step or up to `NONFINITE_STEPS` after, the findings read from those, later tripwire reports,
  and a rank whose values went non-finite before its peers' (a distributed job's `rank_outlier`).
* **ranks**: a distributed job that stopped is one problem: the lost rank leads (else the hung
  job), with the job's other stops and the run's crash or stall that came of it.
* **divergence episode**: divergences (and norm growth read from them) of several metrics that
  set off within `EPISODE_STEPS` of the first while it still diverges, or, for signals of one
  family (`FAMILIES`: a learning problem shows in the losses and the norms together, a systems
  one in throughput and step time together), at any time while the first still diverges: a loss
  creeping from step 1,300, the eval loss turning up at 1,700 and the "drifting together" finding
  that joins them are one problem (issue 46). The earliest leads, the loss first among equals; a
  learning problem and a systems one at the same time stay two.
* **bad batch**: a spike of a loss and a spike of a gradient norm at the same step (±
  `BAD_BATCH_STEPS`), with the precursor finding that paired them; the loss spike leads.
* **sawtooth**: sawtooth events at one period (within `PERIOD_TOLERANCE`), with the spikes,
  "too good" and divergence events of their metrics inside their span (its own teeth), and the
  spikes of other metrics on its beat (the eval pauses); the one whose period the config
  explains leads.

Any other event is an incident of its own. A finding that names its source event
(`details["source_event"]`) always goes where that event went.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from holter_server.detect.events import Event, format_step
from holter_server.vocabulary.events import EventKind, label
from holter_server.vocabulary.kinds import MetricKinds
from holter_server.vocabulary.names import is_per_layer
from holter_server.vocabulary.ranks import rank_list
from holter_server.vocabulary.severities import rank, worst

TRIPWIRE = EventKind.FIRST_NONFINITE
# how long after a tripwire's step what goes non-finite is still its consequence (the loss may
# be logged every few steps, norms every few dozen)
NONFINITE_STEPS = 200
# how far apart the starts of two metrics' divergences may be and still be one episode
EPISODE_STEPS = 100
BAD_BATCH_STEPS = 1  # a loss spike and a gradient-norm spike this close are one batch
PERIOD_TOLERANCE = 0.1  # two sawtooth periods this close (relative) are one beat
PHASE_TOLERANCE = 0.1  # a spike this close to the beat (a share of the period, at least a step) is on it

# what a NaN's consequences can be: readings of the run's curves, never the run's lifecycle, the
# machine's vitals, a job's own alert or a rule someone set
CONSEQUENCE_KINDS = frozenset(
    {
        EventKind.DIVERGENCE,
        EventKind.SPIKE,
        EventKind.PLATEAU,
        EventKind.LEVEL_SHIFT,
        EventKind.TOO_GOOD,
        EventKind.GRAD_NORM_PRECURSOR,
        EventKind.NO_LEARNING_SIGNAL,
        EventKind.ACTIVATION_GROWTH,
        EventKind.LAYER_DOMINANCE,
        EventKind.NORM_GROWTH,
        EventKind.DRIFT_TOGETHER,
        EventKind.OVERFITTING,
        EventKind.RANK_OUTLIER,
        TRIPWIRE,
    }
)
# a distributed job that stopped: the lost rank or the hung job, and what its stop made of the run
STOP_LEADERS = (EventKind.RANK_LOST, EventKind.RANK_HUNG)
STOP_KINDS = frozenset({*STOP_LEADERS, EventKind.RUN_CRASHED, EventKind.RUN_STALLED})
# the kinds any rule groups: an event of another kind (a job's own alert) is always alone
GROUPED_KINDS = CONSEQUENCE_KINDS | STOP_KINDS | {EventKind.SAWTOOTH}
EPISODE_KINDS = frozenset(
    {EventKind.DIVERGENCE, EventKind.ACTIVATION_GROWTH, EventKind.NORM_GROWTH, EventKind.DRIFT_TOGETHER}
)
TEETH_KINDS = frozenset({EventKind.SPIKE, EventKind.TOO_GOOD, EventKind.DIVERGENCE, EventKind.LEVEL_SHIFT})
# which rule made an incident, in the order incidents of one severity are listed
RULES = ("nonfinite", "ranks", "episode", "bad_batch", "sawtooth", "single")


@dataclass(frozen=True)
class Incident:
    """Events that share one cause: `leader` (an index into the events grouped) is the root cause,
    `folded` the rest, earliest first. `severity` is the worst of them, the steps their span."""

    rule: str
    leader: int
    folded: tuple[int, ...]
    title: str
    cause: str
    severity: str
    start_step: int | None
    end_step: int | None

    @property
    def members(self) -> tuple[int, ...]:
        """The leader, then the folded events."""
        return (self.leader, *self.folded)


def group_incidents(events: Sequence[Event], kinds: Mapping[str, str] | None = None) -> list[Incident]:
    """The incidents of one run's events, the worst first (then root causes before readings,
    then the earliest). `kinds` says what each metric is (declared or recognised); a metric left
    out is understood from its name."""

    run_kinds = MetricKinds.of(kinds)

    def kind_of(metric: str | None) -> str:
        return run_kinds[metric] if metric else ""

    free = set(range(len(events)))
    groups: list[tuple[str, int, list[int]]] = []
    for rule in (_nonfinite, _stopped_job, _episodes, _bad_batches, _sawtooth):
        for name, leader, members in rule(events, free, kind_of):
            free.difference_update(members)
            groups.append((name, leader, members))
    _follow_sources(events, free, groups)
    groups.extend(("single", i, [i]) for i in sorted(free))
    incidents = [_incident(events, name, leader, members, kind_of) for name, leader, members in groups]
    return sorted(
        incidents, key=lambda inc: (-rank(inc.severity), RULES.index(inc.rule), _step(inc.start_step), inc.leader)
    )


Rule = Callable[[Sequence[Event], set[int], Callable[[str | None], str]], list[tuple[str, int, list[int]]]]


def _step(step: int | None) -> int:
    return step if step is not None else -1


def _is_nonfinite(event: Event) -> bool:
    return event.kind == TRIPWIRE or event.details.get("cause") == "nonfinite"


def _is_rank_nan(event: Event) -> bool:
    return event.kind == EventKind.RANK_OUTLIER and event.details.get("cause") == "nonfinite"


def _nonfinite(
    events: Sequence[Event], free: set[int], kind_of: Callable[[str | None], str]
) -> list[tuple[str, int, list[int]]]:
    found: list[tuple[str, int, list[int]]] = []
    # a tripwire's report first; else a rank that went non-finite before its peers (a distributed job)
    tripwires = sorted(
        (i for i in free if events[i].kind == TRIPWIRE or _is_rank_nan(events[i])),
        key=lambda i: (_step(events[i].start_step), events[i].kind != TRIPWIRE),
    )
    taken: set[int] = set()
    for t in tripwires:
        if t in taken:
            continue
        trip = events[t]
        step = _step(trip.start_step)
        attached = (trip.details.get("divergence") or {}).get("event_id")
        members = [t]
        for i in sorted(free - taken - {t}, key=lambda i: _step(events[i].start_step)):
            e = events[i]
            if e.kind not in CONSEQUENCE_KINDS or e.start_step is None:
                continue
            attached_here = attached is not None and e.event_id == attached
            follows = step <= e.start_step <= step + NONFINITE_STEPS and (
                _is_nonfinite(e) or is_per_layer(e.metric or "")
            )
            if attached_here or follows:
                members.append(i)
        taken.update(members)
        found.append(("nonfinite", t, members))
    return found


def _stopped_job(
    events: Sequence[Event], free: set[int], kind_of: Callable[[str | None], str]
) -> list[tuple[str, int, list[int]]]:
    leaders = sorted(
        (i for i in free if events[i].kind in STOP_LEADERS),
        key=lambda i: (STOP_LEADERS.index(events[i].kind), _step(events[i].start_step), i),
    )
    if not leaders:
        return []
    members = [leaders[0], *(i for i in sorted(free) if i != leaders[0] and events[i].kind in STOP_KINDS)]
    return [("ranks", leaders[0], members)]


# Signals whose divergences are one problem whenever the later sets off while the earliest still
# diverges (rules as data: a family per line, by signal kind).
FAMILIES: tuple[tuple[str, frozenset[str]], ...] = (
    ("learning", frozenset({"loss", "eval_loss", "grad_norm", "activation_norm"})),
    ("systems", frozenset({"throughput", "mfu", "step_time", "compute_time", "data_wait"})),
)


def family_of(kind: str) -> str | None:
    """The family of a signal kind whose divergences fold together (`FAMILIES`), if any."""
    return next((name for name, kinds in FAMILIES if kind in kinds), None)


def _episodes(
    events: Sequence[Event], free: set[int], kind_of: Callable[[str | None], str]
) -> list[tuple[str, int, list[int]]]:
    candidates = sorted(
        (i for i in free if events[i].kind in EPISODE_KINDS and events[i].start_step is not None and events[i].metric),
        key=lambda i: (events[i].start_step, not _is_loss(kind_of(events[i].metric)), is_per_layer(events[i].metric)),
    )
    found: list[tuple[str, int, list[int]]] = []
    while candidates:
        first = events[candidates[0]]
        until = first.end_step if first.end_step is not None else first.start_step
        family = family_of(kind_of(first.metric))
        members = [
            i
            for i in candidates
            if events[i].start_step <= until
            and (
                events[i].start_step - first.start_step <= EPISODE_STEPS
                or (family is not None and family_of(kind_of(events[i].metric)) == family)
            )
        ]
        candidates = [i for i in candidates if i not in members]
        if len({events[i].metric for i in members}) < 2:
            continue
        loss_first = [i for i in members if events[i].start_step == first.start_step]
        leader = min(
            loss_first, key=lambda i: (not _is_loss(kind_of(events[i].metric)), events[i].kind != EventKind.DIVERGENCE)
        )
        found.append(("episode", leader, [leader, *(i for i in members if i != leader)]))
    return found


def _is_loss(kind: str) -> bool:
    return kind in ("loss", "eval_loss")


def _bad_batches(
    events: Sequence[Event], free: set[int], kind_of: Callable[[str | None], str]
) -> list[tuple[str, int, list[int]]]:
    def spikes(kind: Callable[[str], bool]) -> list[int]:
        return sorted(
            (i for i in free if events[i].kind == EventKind.SPIKE and kind(kind_of(events[i].metric))),
            key=lambda i: _step(_peak(events[i])),
        )

    grads = spikes(lambda k: k == "grad_norm")
    found: list[tuple[str, int, list[int]]] = []
    used: set[int] = set()
    for loss in spikes(_is_loss):
        at = _peak(events[loss])
        if at is None:
            continue
        same = [g for g in grads if g not in used and abs(_step(_peak(events[g])) - at) <= BAD_BATCH_STEPS]
        if not same:
            continue
        precursors = [
            i
            for i in free
            if events[i].kind == EventKind.GRAD_NORM_PRECURSOR
            and _step(events[i].start_step) - BAD_BATCH_STEPS <= at <= _step(events[i].end_step) + BAD_BATCH_STEPS
        ]
        members = [loss, *same, *precursors]
        used.update(members)
        found.append(("bad_batch", loss, members))
    return found


def _peak(event: Event) -> int | None:
    return event.peak_step if event.peak_step is not None else event.start_step


def _sawtooth(
    events: Sequence[Event], free: set[int], kind_of: Callable[[str | None], str]
) -> list[tuple[str, int, list[int]]]:
    saws = sorted(
        (i for i in free if events[i].kind == EventKind.SAWTOOTH and events[i].period),
        key=lambda i: (not events[i].details.get("period_causes"), not _is_loss(kind_of(events[i].metric)), i),
    )
    found: list[tuple[str, int, list[int]]] = []
    taken: set[int] = set()
    for s in saws:
        if s in taken:
            continue
        lead = events[s]
        period = float(lead.period or 0)
        beat = [
            i
            for i in saws
            if i not in taken and abs(float(events[i].period or 0) - period) <= PERIOD_TOLERANCE * period
        ]
        spans = {events[i].metric: (_step(events[i].start_step), _step(events[i].end_step)) for i in beat}
        start = min(a for a, _ in spans.values())
        end = max(b for _, b in spans.values())
        phases = [p for i in beat for p in _beat_steps(events[i])]
        members = list(beat)
        for i in sorted(free - taken - set(beat)):
            e = events[i]
            if e.kind not in TEETH_KINDS or e.start_step is None:
                continue
            own = spans.get(e.metric)
            if own is not None and own[0] - period <= e.start_step <= own[1] + period:
                members.append(i)  # a tooth of the sawtooth's own series, or a misreading of it
            elif e.kind == EventKind.SPIKE and phases and _on_beat(_step(_peak(e)), phases[0], period, start, end):
                members.append(i)  # a spike of another signal on the same beat (an eval pause)
        taken.update(members)
        found.append(("sawtooth", s, members))
    return found


def _beat_steps(event: Event) -> list[int]:
    members = event.details.get("members")
    if isinstance(members, list) and members and all(isinstance(m, int) for m in members):
        return list(members)
    return []


def _on_beat(step: int, anchor: int, period: float, start: int, end: int) -> bool:
    if not start - period <= step <= end + period:
        return False
    off = (step - anchor) % period
    return min(off, period - off) <= max(1.0, PHASE_TOLERANCE * period)


def _follow_sources(events: Sequence[Event], free: set[int], groups: list[tuple[str, int, list[int]]]) -> None:
    """Findings read from an event go where it went."""
    home = {events[i].event_id: members for _, _, members in groups for i in members}
    for i in sorted(free):
        source = events[i].details.get("source_event")
        if events[i].kind in GROUPED_KINDS and isinstance(source, str) and source in home:
            home[source].append(i)
            free.discard(i)


def _incident(
    events: Sequence[Event], rule: str, leader: int, members: list[int], kind_of: Callable[[str | None], str]
) -> Incident:
    folded = tuple(sorted((i for i in members if i != leader), key=lambda i: (_step(events[i].start_step), i)))
    lead = events[leader]
    starts = [events[i].start_step for i in members if events[i].start_step is not None]
    ends = [events[i].end_step for i in members if events[i].end_step is not None]
    title, cause = _words(events, rule, lead, [events[i] for i in folded], kind_of)
    return Incident(
        rule=rule,
        leader=leader,
        folded=folded,
        title=title,
        cause=cause,
        severity=worst(events[i].severity for i in members) or lead.severity,
        start_step=min(starts) if starts else None,
        end_step=max(ends + starts) if starts else None,
    )


def _metrics(events: list[Event], limit: int = 4) -> str:
    names = list(dict.fromkeys(e.metric for e in events if e.metric))
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _words(
    events: Sequence[Event], rule: str, lead: Event, folded: list[Event], kind_of: Callable[[str | None], str]
) -> tuple[str, str]:
    """The incident's title and the sentence that says its cause."""
    at = format_step(lead.start_step) if lead.start_step is not None else None
    followed = f"; then {len(folded)} event{'s' if len(folded) != 1 else ''} followed from it ({_metrics(folded)})"
    if rule == "nonfinite" and lead.kind == EventKind.RANK_OUTLIER:
        title = f"NaN from {rank_list(lead.details.get('ranks') or [])} at step {at}"
        return title, lead.summary + (followed if folded else "")
    if rule == "nonfinite":
        forward, gradient = lead.details.get("forward"), lead.details.get("gradient")
        on_rank = f" on rank {lead.details['rank']}" if lead.details.get("rank") is not None else ""
        if forward:
            where = f"`{forward['name']}`{on_rank}"
            title = f"NaN from {where} at step {at}"
            cause = f"the forward pass of {where} made the first non-finite value at step {at}"
            if forward.get("inputs_finite") is False:
                cause += " from an input already non-finite (the batch itself, or code outside the model's modules)"
        elif gradient:
            where = f"`{gradient['name']}`{on_rank}"
            title = f"NaN in the gradient of {where} at step {at}"
            cause = f"the backward pass made the first non-finite gradient, {where}, at step {at}, every output finite"
        else:
            title, cause = f"NaN at step {at}", f"a non-finite value at step {at}"
        return title, cause + (followed if folded else "")
    if rule == "ranks":
        ranks = lead.details.get("ranks") or []
        who = rank_list(ranks) if ranks else "a rank"
        title = f"{who} lost" if lead.kind == EventKind.RANK_LOST else f"job hung: {who}"
        title += f" at step {at}" if at is not None else ""
        return title, lead.summary + (
            f"; {len(folded)} more event{'s' if len(folded) != 1 else ''} of the stop folded" if folded else ""
        )
    if rule == "episode":
        count = len({e.metric for e in [lead, *folded]})
        title = f"{lead.metric} and {count - 1} more diverged from step {at}"
        return (
            title,
            f"{lead.summary}; {count - 1} other signal{'s' if count > 2 else ''} diverged with it ({_metrics(folded)})",
        )
    if rule == "bad_batch":
        peak = format_step(_step(_peak(lead)))
        grads = _metrics([e for e in folded if e.kind == EventKind.SPIKE])
        return (
            f"bad batch at step {peak}",
            f"one batch at step {peak}: {lead.metric} and {grads} spiked at the same step",
        )
    if rule == "sawtooth":
        period = float(lead.period or 0)
        shown = f"{period:,.0f}" if abs(period - round(period)) < 0.05 else f"{period:,.1f}"
        note = lead.details.get("period_note")
        title = f"sawtooth, period {shown} steps" + (f" ({note})" if note else "")
        cause = (
            f"a cycle every {shown} steps on {_metrics([lead, *[e for e in folded if e.kind == EventKind.SAWTOOTH]])}"
        )
        cause += f": {note}" if note else ": no config key explains the period"
        teeth = [e for e in folded if e.kind != EventKind.SAWTOOTH]
        if teeth:
            cause += f"; {len(teeth)} event{'s' if len(teeth) != 1 else ''} on its beat folded ({_metrics(teeth)})"
        return title, cause
    title = f"{label(lead.kind)} on {lead.metric}" if lead.metric else label(lead.kind)
    return title, lead.summary
