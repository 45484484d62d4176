"""The written summary of a run's post-mortem, generated from its events. Pure.

"diverged at step 8,412 after 3 gradient-norm spikes; throughput fell 40% at step 6,000 with the
loss unchanged" — the most serious findings first, each with its step and numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from holter_server.detect.events import format_step
from holter_server.vocabulary.events import SUMMARISED_KINDS, EventKind
from holter_server.vocabulary.kinds import MetricKinds
from holter_server.vocabulary.profiles import KINDS
from holter_server.vocabulary.severities import Level, rank
from holter_server.vocabulary.signals import LOSS_KINDS, MISMATCH_HEALTHY
from holter_server.vocabulary.statuses import HIDDEN_EVENT_STATUSES, RUN_STATUSES

MAX_CLAUSES = 6
# kinds whose bad direction is down (throughput): a drift of theirs slides down
DOWN_IS_BAD = frozenset(name for name, profile in KINDS.items() if profile.direction < 0)
# Kinds whose clause is worded below rather than quoted from the event's own summary.
_WORDED_HERE = frozenset(
    {
        EventKind.DIVERGENCE,
        EventKind.SYSTEMS_SLOWDOWN,
        EventKind.MISMATCH_OFF_ZERO,
        EventKind.SAWTOOTH,
        EventKind.SPIKE,
        EventKind.RUN_STALLED,
        EventKind.RUN_CRASHED,
    }
)


def _step(event: dict[str, Any]) -> str:
    return format_step(event.get("start_step") or 0)


def _event_id(event: dict[str, Any]) -> str:
    """The detector's id of a stored event (`Event.event_id`: metric, kind and first step)."""
    return event.get("event_id") or f"{event.get('metric')}:{event.get('kind')}@{event.get('start_step')}"


def _drift_clause(event: dict[str, Any], kind: str, moved_with: list[str]) -> str:
    """'train/loss crept up 18% from step 6,500 and is still rising, with grad_norm and eval/loss'."""
    details = event.get("details") or {}
    down = kind in DOWN_IS_BAD
    relative = abs(details.get("relative") or 0.0)
    still = {"rising": " and is still falling" if down else " and is still rising", "stopped": ", then held"}
    clause = (
        f"{event['metric']} {'slid down' if down else 'crept up'} {relative:.0%} from step {_step(event)}"
        f"{still.get(details.get('state', ''), '')}"
    )
    return clause + (f", with {' and '.join(moved_with)} moving with it" if moved_with else "")


def write_summary(
    *,
    name: str,
    status: str,
    last_step: int | None,
    events: Sequence[dict[str, Any]],
    kinds: Mapping[str, str] | None = None,
    seed_clause: str | None = None,
    incidents: Sequence[Mapping[str, Any]] = (),
) -> str:
    """One paragraph a colleague would write after reading the run's events; `kinds` says what
    each metric is (declared or recognised; a metric left out is understood from its name).
    `seed_clause` (where the run ends against its seed group) closes it, whatever the events:
    it says whether the run's ending is its config's or its seed's.

    `incidents` (`analysis/incidents.py`, each with its `cause`, `severity`, `start_step`, `rule`
    and the `event_ids` it groups) lead: an incident of several events is told once, by its
    cause, before the events of its severity told one by one, and its events are not told again."""
    run_kinds = MetricKinds.of(kinds)
    grouped = [
        i for i in incidents if len(i.get("event_ids") or ()) > 1 and i.get("status") not in HIDDEN_EVENT_STATUSES
    ]
    told_by_incident = {event_id for i in grouped for event_id in i["event_ids"]}
    events = [e for e in events if _event_id(e) not in told_by_incident]

    def kind_of(event: dict[str, Any]) -> str:
        return run_kinds[event.get("metric") or ""]

    live = [e for e in events if e.get("status") not in HIDDEN_EVENT_STATUSES]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for event in sorted(live, key=lambda e: e.get("start_step") or 0):
        by_kind.setdefault(event["kind"], []).append(event)
    clauses: list[tuple[int, int, int, str]] = []  # (severity, 1 for an incident's cause, step, text)
    for incident in grouped:
        clauses.append((rank(incident.get("severity")), 1, incident.get("start_step") or 0, incident["cause"]))

    def add(event: dict[str, Any], text: str) -> None:
        clauses.append((rank(event.get("severity")), 0, event.get("start_step") or 0, text))

    grad_spikes = [e for e in by_kind.get(EventKind.SPIKE, []) if kind_of(e) == "grad_norm"]
    # what moved with a drifting loss, by the drift's event id (a drift_together finding)
    together = {
        (f.get("details") or {}).get("source_event"): [m for m in (f.get("details") or {}).get("signals", [])[1:]]
        for f in by_kind.get(EventKind.DRIFT_TOGETHER, [])
    }
    for event in by_kind.get(EventKind.DIVERGENCE, []):
        details = event.get("details") or {}
        if details.get("cause") == "drift":
            if event.get("severity") != Level.INFO:
                add(event, _drift_clause(event, kind_of(event), together.get(_event_id(event), [])))
            continue
        before = [g for g in grad_spikes if (g.get("start_step") or 0) < (event.get("start_step") or 0)]
        lead = f" after {len(before)} gradient-norm spike{'s' if len(before) > 1 else ''}" if before else ""
        cause = "went non-finite" if details.get("cause") == "nonfinite" else "diverged"
        add(event, f"{event['metric']} {cause} at step {_step(event)}{lead}")
    for event in by_kind.get(EventKind.SYSTEMS_SLOWDOWN, []):
        add(event, event["summary"].split(" while ")[0] + " with the loss unchanged")
    for event in by_kind.get(EventKind.MISMATCH_OFF_ZERO, []):
        period = f", every {event['period']:,.0f} steps" if event.get("period") else ""
        period += (
            f" ({event['details']['period_note']})"
            if period and (event.get("details") or {}).get("period_note")
            else ""
        )
        healthy = MISMATCH_HEALTHY.get(kind_of(event), 0.0)
        what = "logprob mismatch" if healthy == 0 else "ratio"
        add(event, f"the rollout/trainer {what} left ≈{healthy:g} at step {_step(event)}{period}")
    # every other kind the vocabulary has the summary tell is told in its own sentence
    for kind in SUMMARISED_KINDS:
        if kind not in _WORDED_HERE:
            for event in by_kind.get(kind, []):
                add(event, event["summary"])
    sawtooth = [e for e in by_kind.get(EventKind.SAWTOOTH, []) if kind_of(e) not in MISMATCH_HEALTHY]
    for event in sawtooth:
        note = (event.get("details") or {}).get("period_note")
        cause = f" ({note})" if note else ""
        add(
            event,
            f"{event['metric']} followed a sawtooth with period {event['period']:,.0f} steps from step "
            f"{_step(event)}{cause}"
            if event.get("period")
            else event["summary"],
        )
    loss_spikes = [e for e in by_kind.get(EventKind.SPIKE, []) if kind_of(e) in LOSS_KINDS]
    if loss_spikes:
        worst = max(loss_spikes, key=lambda e: e.get("score") or 0)
        twinned = [e for e in loss_spikes if (e.get("details") or {}).get("twins")]
        shared = (
            f"; {len(twinned)} of them recur{'s' if len(twinned) == 1 else ''} in runs with the same data order "
            f"(the batch, not the optimiser: step{'s' if len(twinned) > 1 else ''} "
            f"{', '.join(_step(e) for e in twinned)})"
            if twinned
            else ""
        )
        add(
            worst,
            f"{len(loss_spikes)} loss spike{'s' if len(loss_spikes) > 1 else ''}, the largest at step "
            f"{_step(worst)}{shared}",
        )
    for event in by_kind.get(EventKind.RUN_STALLED, []):
        add(event, f"stalled at step {_step(event)}" if event.get("start_step") is not None else "stalled")
    for event in by_kind.get(EventKind.RUN_CRASHED, []):
        add(event, f"crashed at step {_step(event)}" if event.get("start_step") is not None else "crashed")

    ran = f"{name} ran to step {format_step(last_step)}" if last_step is not None else f"{name} logged nothing"
    ending = next((s.ending for s in RUN_STATUSES if s.name == status), "")
    head = f"{ran} {ending}".strip()
    seeds = f"; {seed_clause}" if seed_clause else ""
    if not clauses:
        return f"{head}: a healthy run, no events{seeds}." if seeds else f"{head}: a healthy run, nothing to report."
    ordered = sorted(clauses, key=lambda c: (-c[0], -c[1], c[2]))[:MAX_CLAUSES]
    more = len(clauses) - len(ordered)
    tail = f"; and {more} more finding{'s' if more > 1 else ''}" if more > 0 else ""
    return f"{head}: " + "; ".join(text for *_, text in ordered) + tail + seeds + "."
