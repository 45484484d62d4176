"""Findings that span signals: read several metrics of one run together, as the chapter on
"Beyond the loss" does. Pure: per-metric events and series snapshots in, events out.

* `grad_norm_precursor` — a gradient-norm spike within a few steps before a loss spike.
* `no_learning_signal` — a gradient norm of exactly zero, or a loss flat from step zero.
* `activation_growth` — an activation norm that keeps growing; `layer_dominance` — one
  layer's activation norm dwarfing the others of its stack (named); the outputs of
  normalisation layers and embeddings, whose scale is set by construction, are left out.
* `systems_slowdown` — throughput or MFU down (or step time up, abruptly or drifting) while the loss
  carries on.
* `drift_together` — a loss drifting the wrong way (detect/drift.py), with the other vital signs
  that moved with it over the same steps (gradient norm, mismatch, throughput, another loss) and
  those that held: what moved with it tells a learning problem from a systems one.
* `norm_growth` — a gradient or activation norm that has doubled since it settled (information on
  its own: such norms grow as the learning rate decays) in a run that logs no loss to tell a
  benign rise from divergence in slow motion.
* `mismatch_off_zero` — the rollout/trainer mismatch leaving its healthy value (≈0 for a
  logprob gap, ≈1 for a ratio), with its period.
* `input_stall` — the share of each step spent waiting for data held above its ceiling while
  the step's own work (compute time) did not grow as much as the waiting: the input pipeline,
  not the model, sets the pace.
* `overfitting`, `too_good` — the train loss against the eval loss (train_eval.py).
* `plateau` — a loss printing exactly the same value (0.0) from its first point while the
  gradient norm is exactly 0 or not finite (a broken run; a GRPO loss prints 0.0 by design
  while its gradient norm moves), or while no gradient norm is logged to tell.

And the attribution of a non-finite tripwire report (`first_nonfinite`, from
`holter.torch.watch(..., nan_tripwire=True)`): the module and the gradient where NaN or ±Inf
first appeared, attached to the divergence they explain (`nonfinite_origin`).

Which metric is a loss, a gradient norm ... is the kind the run's snapshots carry (declared or
recognised, see `holter_server.vocabulary`); a metric without one is understood from its name.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from holter_server.detect.events import Event, format_step, format_value
from holter_server.detect.outline import SeriesOutline
from holter_server.detect.train_eval import train_eval_findings
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.kinds import MetricKinds
from holter_server.vocabulary.names import is_per_layer, layer_of
from holter_server.vocabulary.profiles import is_percent
from holter_server.vocabulary.ranks import rank_list
from holter_server.vocabulary.severities import Level, rank
from holter_server.vocabulary.signals import LOSS_KINDS, MISMATCH_HEALTHY

NONFINITE_ORIGIN = EventKind.FIRST_NONFINITE  # a tripwire report, attached to a divergence by `nonfinite_origin`
# a divergence that begins this many steps after the tripwire's step is still the one it explains
# (the loss may be logged only every few steps)
ATTACH_AFTER_STEPS = 200
# the divergences a non-finite report can explain, the first kind preferred
ATTACH_KINDS = ("loss", "eval_loss", "grad_norm", "activation_norm")
PRECURSOR_STEPS = 10  # how far ahead of a loss spike a gradient-norm spike counts as its warning
SLOWDOWN_QUIET_STEPS = 200  # the loss must show nothing this close to a throughput drop
DOMINANCE_RATIO = 10.0
MIN_LAYERS = 3
BROKEN_MIN_POINTS = 3  # a loss exactly the same at this many points from its first
# the vital signs a loss drift is read beside, and how far outside its steps their moves still count
COMPANION_KINDS = (
    "loss",
    "eval_loss",
    "grad_norm",
    "activation_norm",
    "logprob_mismatch",
    "throughput",
    "mfu",
    "step_time",
)
# kinds whose fall is the job slowing down (MFU is a throughput as a share of the device's peak)
THROUGHPUT_KINDS = ("throughput", "mfu")
TOGETHER_SLACK_STEPS = 200


@dataclass(frozen=True)
class SeriesSnapshot:
    """What the cross-signal rules need to know about one metric of the run."""

    metric: str
    last_value: float | None
    first_step: int | None = None
    last_step: int | None = None
    kind: str | None = None
    # the series in outline, where the run-level rules need its values (losses and eval losses)
    outline: SeriesOutline | None = None


def cross_signal_findings(
    events: list[Event], series: list[SeriesSnapshot], kinds: Mapping[str, str] | None = None
) -> list[Event]:
    """Events that name two signals (or a whole metric family), from one run's per-metric events.

    A metric is the kind its snapshot says, else what `kinds` (the run's `MetricKinds`) says; a
    metric in neither is understood from its name."""
    run_kinds = MetricKinds.of(kinds)
    snapshot_kinds = {s.metric: s.kind or (s.outline.kind if s.outline else None) for s in series}

    def kind_of(metric: str) -> str:
        return snapshot_kinds.get(metric) or run_kinds[metric]

    by_kind: dict[str, list[Event]] = {}
    for event in events:
        if event.kind != NONFINITE_ORIGIN:  # a report, not a reading of a metric
            by_kind.setdefault(kind_of(event.metric), []).append(event)
    findings = (
        _precursors(by_kind)
        + _no_learning_signal(by_kind, series, kind_of)
        + _activation(by_kind, series, kind_of)
        + _slowdowns(by_kind)
        + _drifts_together(by_kind, series, kind_of)
        + _norm_growth(by_kind, series, kind_of)
        + _mismatch(by_kind)
        + _input_stalls(by_kind)
        + _broken_run(by_kind, series, kind_of)
        + train_eval_findings([s.outline for s in series if s.outline is not None])
    )
    return sorted(findings, key=lambda e: (e.start_step, e.kind))


def _finding(
    kind: str, metric: str, start: int, end: int, severity: str, score: float, summary: str, **extra: object
) -> Event:
    return Event(
        kind=kind,
        metric=metric,
        start_step=start,
        end_step=end,
        severity=severity,
        score=score,
        summary=summary,
        peak_step=extra.pop("peak_step", None),
        period=extra.pop("period", None),
        details=dict(extra),
    )


def _precursors(by_kind: dict[str, list[Event]]) -> list[Event]:
    grad_spikes = [e for e in by_kind.get("grad_norm", []) if e.kind == EventKind.SPIKE and not is_per_layer(e.metric)]
    found = []
    for loss in by_kind.get("loss", []):
        if loss.kind not in (EventKind.SPIKE, EventKind.DIVERGENCE) or _is_drift(loss):
            continue  # (a drift sets off slowly: a spike at its first step explains nothing)
        ahead = [g for g in grad_spikes if 0 <= loss.start_step - g.start_step <= PRECURSOR_STEPS]
        if not ahead:
            continue
        grad = min(ahead, key=lambda g: loss.start_step - g.start_step)
        lead = loss.start_step - grad.start_step
        when = "at the same step as" if lead == 0 else f"{lead} step{'s' if lead > 1 else ''} before"
        peak = grad.details.get("peak")
        size = f" (to {format_value(peak)})" if isinstance(peak, float) else ""
        # a recovered one-step loss spike (info) with its gradient-norm spike is a healthy run's
        # bad batch seen twice: reported, not alarmed on
        severity = Level.INFO if loss.severity == Level.INFO else Level.WARNING
        found.append(
            _finding(
                EventKind.GRAD_NORM_PRECURSOR,
                loss.metric,
                grad.start_step,
                loss.end_step,
                severity,
                float(lead),
                f"{grad.metric} spiked at step {format_step(grad.start_step)}{size}, {when} {loss.metric} "
                f"{'spiked' if loss.kind == EventKind.SPIKE else 'diverged'} at step {format_step(loss.start_step)}: "
                "the gradient norm gave the early warning",
                peak_step=loss.peak_step,
                signals=[grad.metric, loss.metric],
                lead_steps=lead,
            )
        )
    return found


def _no_learning_signal(
    by_kind: dict[str, list[Event]], series: list[SeriesSnapshot], kind_of: Callable[[str], str]
) -> list[Event]:
    zero = [e for e in by_kind.get("grad_norm", []) if e.kind == EventKind.PLATEAU and e.details.get("cause") == "zero"]
    flat = [e for e in by_kind.get("loss", []) if e.kind == EventKind.PLATEAU and e.details.get("cause") == "flat"]
    if not zero and not flat:
        return []
    losses = {s.metric: s for s in series if kind_of(s.metric) == "loss"}
    if zero:
        grad = zero[0]
        loss_note = f"; {flat[0].metric} has not moved from its starting level" if flat else ""
        if not flat and losses:
            name, snapshot = next(iter(losses.items()))
            loss_note = f"; {name} is at {format_value(snapshot.last_value)}" if snapshot.last_value is not None else ""
        start, end = grad.start_step, max([grad.end_step] + [f.end_step for f in flat])
        summary = (
            f"{grad.metric} has been exactly 0 from step {format_step(grad.start_step)} to "
            f"{format_step(grad.end_step)}{loss_note}: no gradient is flowing"
        )
        signals = [grad.metric] + [f.metric for f in flat[:1]]
    else:
        loss = flat[0]
        grads = [s for s in series if kind_of(s.metric) == "grad_norm" and not is_per_layer(s.metric)]
        grad_note = (
            f"; {grads[0].metric} is {format_value(grads[0].last_value)}"
            if grads and grads[0].last_value is not None
            else ""
        )
        start, end = loss.start_step, loss.end_step
        if loss.severity == Level.CRITICAL:
            summary = (
                f"{loss.metric} has stayed flat from step {format_step(loss.start_step)} to "
                f"{format_step(loss.end_step)}{grad_note}: nothing is learning"
            )
        else:
            summary = (
                f"{loss.metric} stayed flat from step {format_step(loss.start_step)} to "
                f"{format_step(loss.end_step)}{grad_note} before it began to fall: nothing learned until then"
            )
        signals = [loss.metric] + [g.metric for g in grads[:1]]
    # a flat start that ended (the loss began to fall) is a recovered excursion: a warning
    sources = zero[:1] + flat[:1]
    severity = Level.CRITICAL if any(e.severity == Level.CRITICAL for e in sources) else Level.WARNING
    return [
        _finding(
            EventKind.NO_LEARNING_SIGNAL, signals[0], start, end, severity, float(end - start), summary, signals=signals
        )
    ]


def _broken_run(
    by_kind: dict[str, list[Event]], series: list[SeriesSnapshot], kind_of: Callable[[str], str]
) -> list[Event]:
    grad_names = [s.metric for s in series if kind_of(s.metric) == "grad_norm"]
    stuck = [
        e
        for name in grad_names
        for e in by_kind.get("grad_norm", [])
        if e.metric == name
        and (
            (e.kind == EventKind.PLATEAU and e.details.get("cause") == "zero")
            or (e.kind == EventKind.DIVERGENCE and e.details.get("cause") == "nonfinite")
        )
    ]
    found = []
    for snapshot in series:
        o = snapshot.outline
        if o is None or o.kind != "loss" or not o.repeated_from_start or o.repeated_points < BROKEN_MIN_POINTS:
            continue
        value = format_value(o.repeated_value or 0.0)
        span = f"at every one of its {o.points} points from step {format_step(o.repeated_since or 0)}"
        if stuck:
            grad = stuck[0]
            state = "exactly 0" if grad.kind == EventKind.PLATEAU else "not finite"
            severity = Level.CRITICAL
            summary = (
                f"{o.metric} printed exactly {value} {span} while {grad.metric} was {state}: "
                "no update ever happens, a broken run"
            )
            signals = [o.metric, grad.metric]
        elif not grad_names:
            severity = Level.WARNING
            summary = (
                f"{o.metric} printed exactly {value} {span}: a loss that never moves is a broken run "
                "(or one printed too coarsely; log the gradient norm to tell)"
            )
            signals = [o.metric]
        else:
            continue  # the gradient norm moves: the loss is printed too coarsely (a GRPO loss prints 0.0)
        end = int(snapshot.last_step if snapshot.last_step is not None else (o.steps[-1] if len(o.steps) else 0))
        found.append(
            _finding(
                EventKind.PLATEAU,
                o.metric,
                int(o.repeated_since or 0),
                end,
                severity,
                float(o.repeated_points),
                summary,
                cause="exactly_constant",
                signals=signals,
                value=o.repeated_value,
                points=o.repeated_points,
            )
        )
    return found


def _activation(
    by_kind: dict[str, list[Event]], series: list[SeriesSnapshot], kind_of: Callable[[str], str]
) -> list[Event]:
    found = []
    for event in by_kind.get("activation_norm", []):
        if (event.kind == EventKind.DIVERGENCE and event.severity != Level.INFO) or (
            event.kind == EventKind.LEVEL_SHIFT and event.details.get("after", 0) > event.details.get("before", 0)
        ):
            found.append(
                _finding(
                    EventKind.ACTIVATION_GROWTH,
                    event.metric,
                    event.start_step,
                    event.end_step,
                    Level.WARNING,
                    event.score,
                    f"activation norm {event.metric} keeps growing: "
                    f"{event.summary.removeprefix(event.metric).strip()}; "
                    "unbounded activations overflow ahead",
                    signals=[event.metric],
                    source_event=event.event_id,
                )
            )
    peers: dict[tuple[str, str], list[SeriesSnapshot]] = {}
    for snapshot in series:
        split = layer_of(snapshot.metric)
        value = snapshot.last_value
        if (
            split
            and kind_of(snapshot.metric) == "activation_norm"
            and value is not None
            and math.isfinite(value)
            and not _set_by_construction(split[1])
        ):
            peers.setdefault((split[0], _stack_of(split[1])), []).append(snapshot)
    for (family, _), members in peers.items():
        if len(members) < MIN_LAYERS:
            continue
        leader = max(members, key=lambda m: m.last_value or 0.0)
        metric, top, step = leader.metric, leader.last_value or 0.0, leader.last_step or 0
        others = statistics.median(m.last_value or 0.0 for m in members if m is not leader)
        if others > 0 and top / others >= DOMINANCE_RATIO:
            found.append(
                _finding(
                    EventKind.LAYER_DOMINANCE,
                    metric,
                    step,
                    step,
                    Level.WARNING,
                    top / others,
                    f"{metric} is {top / others:.0f}x the median of the other {len(members) - 1} layers of {family} "
                    f"({format_value(top)} vs {format_value(others)}): the instability sits in that layer",
                    signals=[m.metric for m in members],
                    layer=layer_of(metric)[1],  # type: ignore[index]
                )
            )
    return found


# The output of a normalisation layer has an RMS set by its gain (≈1 from initialisation:
# GPT-2's `ln_f`, Llama's `norm`, NeoX's `final_layer_norm`, `input_layernorm`, `bn1`), and an
# embedding's output is a row of its table (≈0.02 at GPT-2's initialisation): neither measures
# an activation growing through the network, so neither is a layer that can dominate, nor one
# the others are measured against.
_NORMALISATION = re.compile(r"norm|(^|_)(ln|bn|gn)(_|\d|$)")
_EMBEDDING = re.compile(r"embed|^(wte|wpe|emb|pos_emb|tok_emb)$")
# the index of a layer in a stack: `transformer.h.11`, `model.layers.3`, `blocks_2`, `layer.5`
_INDEX = re.compile(r"[._]?\d+$")


def _set_by_construction(layer: str) -> bool:
    """Whether a layer's activation RMS is fixed by what the layer is (a normalisation or an
    embedding, by its name's last part), rather than by what flows into it."""
    name = layer.lower().rpartition(".")[2]
    return bool(_NORMALISATION.search(name) or _EMBEDDING.search(name))


def _stack_of(layer: str) -> str:
    """The layers a layer is compared with: the other elements of its stack (`transformer.h.#`
    for `transformer.h.3`: blocks of one kind, whose outputs are of one scale), or, for a layer
    outside any stack, the other such layers of the model."""
    stack, found = _INDEX.subn("", layer)
    return f"{stack}.#" if found else ""


def _slowdowns(by_kind: dict[str, list[Event]]) -> list[Event]:
    losses = [e for e in by_kind.get("loss", []) if e.kind != EventKind.SPIKE or e.severity != Level.INFO]
    loss_names = sorted({e.metric for e in by_kind.get("loss", [])}) or ["the loss"]
    found = []
    falls = [e for kind in THROUGHPUT_KINDS for e in by_kind.get(kind, [])]
    drops = [
        e for e in falls if e.kind == EventKind.LEVEL_SHIFT and e.details.get("after", 0) < e.details.get("before", 0)
    ]
    drops += [
        e
        for e in by_kind.get("step_time", [])
        if e.kind == EventKind.LEVEL_SHIFT and e.details.get("after", 0) > e.details.get("before", 0)
    ]
    drops += [e for kind in (*THROUGHPUT_KINDS, "step_time") for e in by_kind.get(kind, []) if _is_drift(e)]
    for drop in drops:
        near = [e for e in losses if abs(e.start_step - drop.start_step) <= SLOWDOWN_QUIET_STEPS]
        if near:
            continue
        if _is_drift(drop):
            before, after = drop.details.get("best"), drop.details.get("level")
        else:
            before, after = drop.details.get("before"), drop.details.get("after")
        change = f" {abs(after - before) / abs(before):.0%}" if before and after is not None else ""
        verb = "fell" if drop in falls else "rose"
        moved = f"{verb}{change} at step {format_step(drop.start_step)}"
        if _is_drift(drop):
            creeping = "falling" if verb == "fell" else "rising"
            change = f" {'down' if verb == 'fell' else 'up'}{change}" if change else ""
            moved = f"has been {creeping} since step {format_step(drop.start_step)},{change} so far"
        found.append(
            _finding(
                EventKind.SYSTEMS_SLOWDOWN,
                drop.metric,
                drop.start_step,
                drop.end_step,
                Level.WARNING,
                drop.score,
                f"{drop.metric} {moved} ({format_value(before)} → {format_value(after)}) while {loss_names[0]} "
                "carried on unchanged: a systems problem, not a learning one",
                signals=[drop.metric, loss_names[0]],
            )
        )
    return found


def _is_drift(event: Event) -> bool:
    """A divergence in slow motion: a vital sign creeping the wrong way (detect/drift.py)."""
    return event.kind == EventKind.DIVERGENCE and event.details.get("cause") == "drift"


def _moved(event: Event) -> str:
    """How a companion series moved, in a few words: 'up 2.1x', '+18%', '-23%'."""
    d = event.details
    if _is_drift(event):
        best, peak = d.get("best"), d.get("peak")
    elif event.kind == EventKind.LEVEL_SHIFT:
        best, peak = d.get("before"), d.get("after")
    else:  # a rise from its minimum
        best, peak = d.get("minimum"), d.get("peak")
    if not isinstance(best, (int, float)) or not isinstance(peak, (int, float)) or not best:
        return event.kind.replace("_", " ")
    ratio = peak / best
    if ratio >= 2 or ratio <= 0.5:
        return f"{'up' if ratio > 1 else 'down'} {max(ratio, 1 / ratio):.1f}x"
    return f"{100 * (ratio - 1):+.0f}%"


def _went_wrong(event: Event, kind: str) -> bool:
    """Whether a companion event says its series moved its bad way (a drift, a divergence, a
    level shift up, or down for throughput)."""
    if event.kind == EventKind.DIVERGENCE and event.details.get("cause") != "nonfinite":
        return True
    if event.kind == EventKind.LEVEL_SHIFT and "before" in event.details:
        down = event.details.get("after", 0) < event.details.get("before", 0)
        return down if kind in THROUGHPUT_KINDS else not down
    return False


def _drifts_together(
    by_kind: dict[str, list[Event]], series: list[SeriesSnapshot], kind_of: Callable[[str], str]
) -> list[Event]:
    companions = [
        (kind, e)
        for kind in COMPANION_KINDS
        for e in by_kind.get(kind, [])
        if _went_wrong(e, kind) and not is_per_layer(e.metric)
    ]
    watched = {s.metric: kind_of(s.metric) for s in series}
    found = []
    told: set[str] = set()  # drifts already named beside an earlier one (a train loss's eval loss)
    for kind in LOSS_KINDS:
        for drift in by_kind.get(kind, []):
            if not _is_drift(drift) or drift.severity == Level.INFO or drift.event_id in told:
                continue
            lo, hi = drift.start_step - TOGETHER_SLACK_STEPS, drift.end_step + TOGETHER_SLACK_STEPS
            moved: dict[str, tuple[str, Event]] = {}
            for other_kind, other in companions:
                if other.metric != drift.metric and other.start_step <= hi and other.end_step >= lo:
                    moved.setdefault(other.metric, (other_kind, other))
            if not moved:
                continue
            told.update(other.event_id for _, other in moved.values())
            held = sorted(
                name
                for name, k in watched.items()
                if k in COMPANION_KINDS and name not in moved and name != drift.metric and not is_per_layer(name)
            )
            with_it = ", ".join(
                f"{name} ({_moved(other)} from step {format_step(other.start_step)})"
                for name, (_, other) in sorted(moved.items(), key=lambda kv: kv[1][1].start_step or 0)
            )
            systems = any(k in (*THROUGHPUT_KINDS, "step_time") for k, _ in moved.values())
            held_note = f"; {', '.join(held)} held" if held else ""
            reading = (
                "the job itself slowed as the loss rose: look at the data pipeline and the machine as well as "
                "the optimiser"
                if systems
                else "a learning problem (optimiser, learning rate, data), not a systems one"
            )
            worst = max([drift] + [o for _, o in moved.values()], key=lambda e: rank(e.severity))
            found.append(
                _finding(
                    EventKind.DRIFT_TOGETHER,
                    drift.metric,
                    min([drift.start_step] + [o.start_step for _, o in moved.values()]),
                    drift.end_step,
                    Level.CRITICAL if worst.severity == Level.CRITICAL else Level.WARNING,
                    float(len(moved)),
                    f"{drift.metric} has been drifting up since step {format_step(drift.start_step)} "
                    f"({_moved(drift)}), and with it {with_it}{held_note}: {reading}",
                    peak_step=drift.peak_step,
                    signals=[drift.metric, *moved],
                    source_event=drift.event_id,
                )
            )
    return found


def _norm_growth(
    by_kind: dict[str, list[Event]], series: list[SeriesSnapshot], kind_of: Callable[[str], str]
) -> list[Event]:
    if any(kind_of(s.metric) in LOSS_KINDS for s in series):
        return []  # a loss drifting with it is told by drift_together; one that falls says it is benign
    found = []
    for kind in ("grad_norm", "activation_norm"):
        for drift in by_kind.get(kind, []):
            if not _is_drift(drift) or drift.severity != Level.INFO or is_per_layer(drift.metric):
                continue
            found.append(
                _finding(
                    EventKind.NORM_GROWTH,
                    drift.metric,
                    drift.start_step,
                    drift.end_step,
                    Level.WARNING,
                    drift.score,
                    f"{drift.summary.split(': ')[0]}; with no loss logged to tell a benign rise (as the learning rate "
                    "decays) from divergence in slow motion, log the loss beside it",
                    peak_step=drift.peak_step,
                    signals=[drift.metric],
                    source_event=drift.event_id,
                )
            )
    return found


def _mismatch(by_kind: dict[str, list[Event]]) -> list[Event]:
    per_metric: dict[str, tuple[float, list[Event]]] = {}
    for kind, healthy in MISMATCH_HEALTHY.items():
        for event in by_kind.get(kind, []):
            per_metric.setdefault(event.metric, (healthy, []))[1].append(event)
    found = []
    for metric, (healthy, events) in per_metric.items():
        first = min(events, key=lambda e: e.start_step or 0)
        last_step = max(e.end_step for e in events)
        periods = [e.period for e in events if e.kind == EventKind.SAWTOOTH and e.period]
        worst = max(events, key=lambda e: rank(e.severity))
        recur = f", recurring every {periods[0]:,.0f} steps (the period points at the cause)" if periods else ""
        count = f"{len(events)} excursion{'s' if len(events) > 1 else ''}"
        found.append(
            _finding(
                EventKind.MISMATCH_OFF_ZERO,
                metric,
                first.start_step,
                last_step,
                Level.CRITICAL if periods or worst.severity == Level.CRITICAL else Level.WARNING,
                float(len(events)),
                f"rollout-vs-trainer {'logprob mismatch' if healthy == 0 else 'ratio'} {metric} left "
                f"≈{healthy:g} at step {format_step(first.start_step)} "
                f"({count} through step {format_step(last_step)}){recur}: a correctness bug upstream, not noise",
                period=periods[0] if periods else None,
                signals=[metric],
            )
        )
    return found


def _input_stalls(by_kind: dict[str, list[Event]]) -> list[Event]:
    compute_rises = [
        e
        for e in by_kind.get("compute_time", [])
        if e.kind == EventKind.LEVEL_SHIFT and e.details.get("after", 0) > e.details.get("before", 0)
    ]
    found = []
    for wait in by_kind.get("data_wait", []):
        peak = wait.details.get("peak")
        if wait.kind != EventKind.LEVEL_SHIFT or not isinstance(
            peak, (int, float)
        ):  # level_shift: held above its ceiling
            continue
        share = min(peak / 100 if is_percent(wait.metric) else peak, 0.999)
        near = [c for c in compute_rises if abs(c.start_step - wait.start_step) <= SLOWDOWN_QUIET_STEPS]
        work = "its own work did not slow down"
        if near:
            rise = max(near, key=lambda c: c.details["after"] - c.details["before"])
            before, after = rise.details["before"], rise.details["after"]
            # seconds of waiting per step at the worst, from the share and the work (w = f/(1-f)·c)
            waited = share / (1 - share) * after
            if after - before >= waited:
                continue  # the work itself grew at least as much as the waiting: a slower step, not a stall
            work = f"its own work grew far less ({rise.metric} {format_value(before)} → {format_value(after)} s)"
        found.append(
            _finding(
                EventKind.INPUT_STALL,
                wait.metric,
                wait.start_step,
                wait.end_step,
                Level.WARNING,
                wait.score,
                f"input pipeline stall: the step waited {share:.0%} of its time for data from step "
                f"{format_step(wait.start_step)} "
                f"(through step {format_step(wait.end_step)}) while {work}: the accelerator idles on the data loader "
                "(more workers, prefetching, faster storage)",
                peak_step=wait.peak_step,
                signals=[wait.metric, *sorted({c.metric for c in by_kind.get("compute_time", [])})],
                wait_share=share,
            )
        )
    return found


def nonfinite_origin(
    *,
    step: int,
    forward: dict[str, Any] | None,
    gradient: dict[str, Any] | None,
    events: list[Event],
    kinds: Mapping[str, str] | None = None,
    origin_rank: int | None = None,
    rank_reports: Mapping[str, Any] | None = None,
) -> Event:
    """The event for a tripwire report at `step`, attached to the divergence it explains.

    In a distributed job (`origin_rank`: the rank whose report this is; `rank_reports`: every rank's report of
    the episode by rank, `{"step", "forward", "gradient"}`) the earliest report is the origin, and
    the ranks whose values followed (through the all-reduce) are named after it.

    `forward` and `gradient` are the report's origins (`{"name", "value"[, "inputs_finite"]}`);
    `events` the run's per-metric events. Attached (to a divergence of the loss, else of the
    gradient or activation norm, that is under way at `step` or begins within
    `ATTACH_AFTER_STEPS` after it) the event sits on that metric and is critical; otherwise it is
    a run-level warning, or information when only a gradient was non-finite (an fp16 loss scaler
    skips such steps as a matter of course). `kinds` says what each metric is (declared or
    recognised); a metric left out is understood from its name.
    """

    kind_of = MetricKinds.of(kinds).__getitem__

    candidates = [
        e
        for e in events
        if e.kind == EventKind.DIVERGENCE
        and kind_of(e.metric) in ATTACH_KINDS
        and (e.start_step <= step <= e.end_step or step < e.start_step <= step + ATTACH_AFTER_STEPS)
    ]
    divergence = min(
        candidates, key=lambda e: (ATTACH_KINDS.index(kind_of(e.metric)), abs(e.start_step - step)), default=None
    )
    summary = _origin_sentence(step, forward, gradient, origin_rank)
    details: dict[str, Any] = {"forward": forward, "gradient": gradient, "divergence": None}
    if origin_rank is not None:
        details["rank"] = origin_rank
        details["rank_reports"] = dict(rank_reports or {})
        followers = sorted(int(r) for r in details["rank_reports"] if int(r) != origin_rank)
        if followers:
            later = sorted({int(report.get("step", step)) for report in details["rank_reports"].values()} - {step})
            summary += f"; {rank_list(followers)} followed" + (
                f" (from step {format_step(later[0])}: through the all-reduce)" if later else " at the same step"
            )
    if divergence is None:
        return Event(
            kind=NONFINITE_ORIGIN,
            metric="",
            start_step=step,
            end_step=step,
            peak_step=step,
            severity=Level.WARNING if forward else Level.INFO,
            score=1.0,
            summary=summary,
            details=details,
        )
    details["divergence"] = {
        "metric": divergence.metric,
        "start_step": divergence.start_step,
        "event_id": divergence.event_id,
    }
    return Event(
        kind=NONFINITE_ORIGIN,
        metric=divergence.metric,
        start_step=step,
        end_step=step,
        peak_step=step,
        severity=Level.CRITICAL,
        score=1.0,
        details=details,
        summary=f"{summary}; {divergence.metric} diverged from step {format_step(divergence.start_step)}",
    )


def _origin_sentence(
    step: int, forward: dict[str, Any] | None, gradient: dict[str, Any] | None, origin_rank: int | None = None
) -> str:
    at = format_step(step) + (f" on rank {origin_rank}" if origin_rank is not None else "")
    grad = f"`{gradient['name']}` ({gradient['value']})" if gradient else ""
    if forward is None:
        return (
            f"first non-finite gradient at step {at}: {grad}, with every module's output finite: the loss computed "
            "outside the model, or a backward pass, made it"
        )
    sentence = f"first non-finite output at step {at}: `{forward['name']}` (forward, {forward['value']})"
    if forward.get("inputs_finite") is False:
        sentence += ", whose input was already non-finite: the batch itself, or code outside the model's modules"
    # the backward pass of a non-finite output is non-finite everywhere, and the first parameter it
    # reaches (the last layer's bias) is named by order, not by cause: kept in the details, not told
    return sentence + ("; the gradients followed from it" if gradient else "; every gradient finite")
