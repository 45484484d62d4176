"""Findings that span signals: read several metrics of one run together, as the chapter on
"Beyond the loss" does. Pure: per-metric events and series snapshots in, events out.

* `grad_norm_precursor` — a gradient-norm spike within a few steps before a loss spike.
* `no_learning_signal` — a gradient norm of exactly zero, or a loss flat from step zero.
* `activation_growth` — an activation norm that keeps growing; `layer_dominance` — one
  layer's activation norm dwarfing the others (named).
* `systems_slowdown` — throughput down (or step time up) while the loss carries on.
* `mismatch_off_zero` — the rollout/trainer logprob mismatch leaving ≈0, with its period.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from holter_server.detect.events import SEVERITY_RANK, Event, format_step, format_value
from holter_server.detect.kinds import infer_kind

FINDING_KINDS = (
    "grad_norm_precursor",
    "no_learning_signal",
    "activation_growth",
    "layer_dominance",
    "systems_slowdown",
    "mismatch_off_zero",
)
PRECURSOR_STEPS = 10  # how far ahead of a loss spike a gradient-norm spike counts as its warning
SLOWDOWN_QUIET_STEPS = 200  # the loss must show nothing this close to a throughput drop
DOMINANCE_RATIO = 10.0
MIN_LAYERS = 3


@dataclass(frozen=True)
class SeriesSnapshot:
    """What the cross-signal rules need to know about one metric of the run."""

    metric: str
    last_value: float | None
    first_step: int | None = None
    last_step: int | None = None


def cross_signal_findings(events: list[Event], series: list[SeriesSnapshot]) -> list[Event]:
    """Events that name two signals (or a whole metric family), from one run's per-metric events."""
    by_kind: dict[str, list[Event]] = {}
    for event in events:
        by_kind.setdefault(infer_kind(event.metric), []).append(event)
    findings = (
        _precursors(by_kind)
        + _no_learning_signal(by_kind, series)
        + _activation(by_kind, series)
        + _slowdowns(by_kind)
        + _mismatch(by_kind)
    )
    return sorted(findings, key=lambda e: (e.start_step, e.kind))


def _finding(kind: str, metric: str, start: int, end: int, severity: str, score: float, summary: str, **extra: object) -> Event:
    return Event(kind=kind, metric=metric, start_step=start, end_step=end, severity=severity, score=score, summary=summary,
                 peak_step=extra.pop("peak_step", None), period=extra.pop("period", None), details=dict(extra))  # type: ignore[arg-type]


def _precursors(by_kind: dict[str, list[Event]]) -> list[Event]:
    grad_spikes = [e for e in by_kind.get("grad_norm", []) if e.kind == "spike" and "/" not in e.metric]
    found = []
    for loss in by_kind.get("loss", []):
        if loss.kind not in ("spike", "divergence"):
            continue
        ahead = [g for g in grad_spikes if 0 <= loss.start_step - g.start_step <= PRECURSOR_STEPS]
        if not ahead:
            continue
        grad = min(ahead, key=lambda g: loss.start_step - g.start_step)
        lead = loss.start_step - grad.start_step
        when = "at the same step as" if lead == 0 else f"{lead} step{'s' if lead > 1 else ''} before"
        peak = grad.details.get("peak")
        size = f" (to {format_value(peak)})" if isinstance(peak, float) else ""
        found.append(_finding(
            "grad_norm_precursor", loss.metric, grad.start_step, loss.end_step, "warning", float(lead),
            f"{grad.metric} spiked at step {format_step(grad.start_step)}{size}, {when} {loss.metric} "
            f"{'spiked' if loss.kind == 'spike' else 'diverged'} at step {format_step(loss.start_step)}: "
            "the gradient norm gave the early warning",
            peak_step=loss.peak_step, signals=[grad.metric, loss.metric], lead_steps=lead,
        ))
    return found


def _no_learning_signal(by_kind: dict[str, list[Event]], series: list[SeriesSnapshot]) -> list[Event]:
    zero = [e for e in by_kind.get("grad_norm", []) if e.kind == "plateau" and e.details.get("cause") == "zero"]
    flat = [e for e in by_kind.get("loss", []) if e.kind == "plateau" and e.details.get("cause") == "flat"]
    if not zero and not flat:
        return []
    losses = {s.metric: s for s in series if infer_kind(s.metric) == "loss"}
    if zero:
        grad = zero[0]
        loss_note = f"; {flat[0].metric} has not moved from its starting level" if flat else ""
        if not flat and losses:
            name, snapshot = next(iter(losses.items()))
            loss_note = f"; {name} is at {format_value(snapshot.last_value)}" if snapshot.last_value is not None else ""
        start, end = grad.start_step, max([grad.end_step] + [f.end_step for f in flat])
        summary = (f"{grad.metric} has been exactly 0 from step {format_step(grad.start_step)} to "
                   f"{format_step(grad.end_step)}{loss_note}: no gradient is flowing")
        signals = [grad.metric] + [f.metric for f in flat[:1]]
    else:
        loss = flat[0]
        grads = [s for s in series if infer_kind(s.metric) == "grad_norm" and "/" not in s.metric]
        grad_note = f"; {grads[0].metric} is {format_value(grads[0].last_value)}" if grads and grads[0].last_value is not None else ""
        start, end = loss.start_step, loss.end_step
        summary = (f"{loss.metric} has stayed flat from step {format_step(loss.start_step)} to "
                   f"{format_step(loss.end_step)}{grad_note}: nothing is learning")
        signals = [loss.metric] + [g.metric for g in grads[:1]]
    return [_finding("no_learning_signal", signals[0], start, end, "critical", float(end - start), summary, signals=signals)]


def _layer_of(metric: str) -> tuple[str, str] | None:
    """("act_norm", "layer.5") for "act_norm/layer.5"."""
    family, sep, layer = metric.rpartition("/")
    return (family, layer) if sep else None


def _activation(by_kind: dict[str, list[Event]], series: list[SeriesSnapshot]) -> list[Event]:
    found = []
    for event in by_kind.get("activation_norm", []):
        if event.kind == "divergence" or (event.kind == "level_shift" and event.details.get("after", 0) > event.details.get("before", 0)):
            found.append(_finding(
                "activation_growth", event.metric, event.start_step, event.end_step, "warning", event.score,
                f"activation norm {event.metric} keeps growing: {event.summary.removeprefix(event.metric).strip()}; "
                "unbounded activations overflow ahead",
                signals=[event.metric], source_event=event.event_id,
            ))
    families: dict[str, list[SeriesSnapshot]] = {}
    for snapshot in series:
        split = _layer_of(snapshot.metric)
        value = snapshot.last_value
        if split and infer_kind(snapshot.metric) == "activation_norm" and value is not None and math.isfinite(value):
            families.setdefault(split[0], []).append(snapshot)
    for family, members in families.items():
        if len(members) < MIN_LAYERS:
            continue
        leader = max(members, key=lambda m: m.last_value or 0.0)
        metric, top, step = leader.metric, leader.last_value or 0.0, leader.last_step or 0
        others = statistics.median(m.last_value or 0.0 for m in members if m is not leader)
        if others > 0 and top / others >= DOMINANCE_RATIO:
            found.append(_finding(
                "layer_dominance", metric, step, step, "warning", top / others,
                f"{metric} is {top / others:.0f}x the median of the other {len(members) - 1} layers of {family} "
                f"({format_value(top)} vs {format_value(others)}): the instability sits in that layer",
                signals=[m.metric for m in members], layer=_layer_of(metric)[1],  # type: ignore[index]
            ))
    return found


def _slowdowns(by_kind: dict[str, list[Event]]) -> list[Event]:
    losses = [e for e in by_kind.get("loss", []) if e.kind != "spike" or e.severity != "info"]
    loss_names = sorted({e.metric for e in by_kind.get("loss", [])}) or ["the loss"]
    found = []
    drops = [e for e in by_kind.get("throughput", []) if e.kind == "level_shift" and e.details.get("after", 0) < e.details.get("before", 0)]
    drops += [e for e in by_kind.get("step_time", []) if e.kind == "level_shift" and e.details.get("after", 0) > e.details.get("before", 0)]
    for drop in drops:
        near = [e for e in losses if abs(e.start_step - drop.start_step) <= SLOWDOWN_QUIET_STEPS]
        if near:
            continue
        before, after = drop.details.get("before"), drop.details.get("after")
        change = f" {abs(after - before) / abs(before):.0%}" if before and after is not None else ""
        verb = "fell" if infer_kind(drop.metric) == "throughput" else "rose"
        found.append(_finding(
            "systems_slowdown", drop.metric, drop.start_step, drop.end_step, "warning", drop.score,
            f"{drop.metric} {verb}{change} at step {format_step(drop.start_step)} ({format_value(before)} → "
            f"{format_value(after)}) while {loss_names[0]} carried on unchanged: a systems problem, not a learning one",
            signals=[drop.metric, loss_names[0]],
        ))
    return found


def _mismatch(by_kind: dict[str, list[Event]]) -> list[Event]:
    per_metric: dict[str, list[Event]] = {}
    for event in by_kind.get("logprob_mismatch", []):
        per_metric.setdefault(event.metric, []).append(event)
    found = []
    for metric, events in per_metric.items():
        first = min(events, key=lambda e: e.start_step)
        last_step = max(e.end_step for e in events)
        periods = [e.period for e in events if e.kind == "sawtooth" and e.period]
        worst = max(events, key=lambda e: SEVERITY_RANK[e.severity])
        recur = f", recurring every {periods[0]:,.0f} steps (the period points at the cause)" if periods else ""
        count = f"{len(events)} excursion{'s' if len(events) > 1 else ''}"
        found.append(_finding(
            "mismatch_off_zero", metric, first.start_step, last_step,
            "critical" if periods or worst.severity == "critical" else "warning", float(len(events)),
            f"rollout-vs-trainer logprob mismatch {metric} left ≈0 at step {format_step(first.start_step)} "
            f"({count} through step {format_step(last_step)}){recur}: a correctness bug upstream, not noise",
            period=periods[0] if periods else None, signals=[metric],
        ))
    return found


