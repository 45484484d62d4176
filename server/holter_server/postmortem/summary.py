"""The written summary of a run's post-mortem, generated from its events. Pure.

"diverged at step 8,412 after 3 gradient-norm spikes; throughput fell 40% at step 6,000 with the
loss unchanged" — the most serious findings first, each with its step and numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from holter_server.detect.events import format_step
from holter_server.detect.kinds import infer_kind

SEVERITY_RANK = {"critical": 2, "warning": 1, "info": 0}
MAX_CLAUSES = 6


def _step(event: dict[str, Any]) -> str:
    return format_step(event.get("start_step") or 0)


def write_summary(*, name: str, status: str, last_step: int | None, events: Sequence[dict[str, Any]]) -> str:
    """One paragraph a colleague would write after reading the run's events."""
    live = [e for e in events if e.get("status") not in ("withdrawn", "dismissed")]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for event in sorted(live, key=lambda e: (e.get("start_step") or 0)):
        by_kind.setdefault(event["kind"], []).append(event)
    clauses: list[tuple[int, int, str]] = []  # (severity, step, text)

    def add(event: dict[str, Any], text: str) -> None:
        clauses.append((SEVERITY_RANK.get(event.get("severity", "info"), 0), event.get("start_step") or 0, text))

    grad_spikes = [e for e in by_kind.get("spike", []) if infer_kind(e.get("metric") or "") == "grad_norm"]
    for event in by_kind.get("divergence", []):
        before = [g for g in grad_spikes if (g.get("start_step") or 0) < (event.get("start_step") or 0)]
        lead = f" after {len(before)} gradient-norm spike{'s' if len(before) > 1 else ''}" if before else ""
        cause = "went non-finite" if event.get("details", {}).get("cause") == "nonfinite" else "diverged"
        add(event, f"{event['metric']} {cause} at step {_step(event)}{lead}")
    for event in by_kind.get("systems_slowdown", []):
        add(event, event["summary"].split(" while ")[0] + " with the loss unchanged")
    for event in by_kind.get("mismatch_off_zero", []):
        period = f", every {event['period']:,.0f} steps" if event.get("period") else ""
        add(event, f"the rollout/trainer logprob mismatch left ≈0 at step {_step(event)}{period}")
    for kind in ("no_learning_signal", "layer_dominance", "activation_growth", "too_good", "reference_drift", "plateau"):
        for event in by_kind.get(kind, []):
            add(event, event["summary"])
    sawtooth = [e for e in by_kind.get("sawtooth", []) if infer_kind(e.get("metric") or "") != "logprob_mismatch"]
    for event in sawtooth:
        add(event, f"{event['metric']} followed a sawtooth with period {event['period']:,.0f} steps from step {_step(event)}" if event.get("period") else event["summary"])
    loss_spikes = [e for e in by_kind.get("spike", []) if infer_kind(e.get("metric") or "") in ("loss", "eval_loss")]
    if loss_spikes:
        worst = max(loss_spikes, key=lambda e: e.get("score") or 0)
        add(worst, f"{len(loss_spikes)} loss spike{'s' if len(loss_spikes) > 1 else ''}, the largest at step {_step(worst)}")
    for event in by_kind.get("run_stalled", []):
        add(event, f"stalled at step {_step(event)}" if event.get("start_step") is not None else "stalled")
    for event in by_kind.get("run_crashed", []):
        add(event, f"crashed at step {_step(event)}" if event.get("start_step") is not None else "crashed")

    ran = f"{name} ran to step {format_step(last_step)}" if last_step is not None else f"{name} logged nothing"
    ending = {"finished": "and finished", "crashed": "and crashed", "stalled": "and went silent", "running": "and is still running"}.get(status, "")
    head = f"{ran} {ending}".strip()
    if not clauses:
        return f"{head}: a healthy run, nothing to report."
    ordered = sorted(clauses, key=lambda c: (-c[0], c[1]))[:MAX_CLAUSES]
    more = len(clauses) - len(ordered)
    tail = f"; and {more} more finding{'s' if more > 1 else ''}" if more > 0 else ""
    return f"{head}: " + "; ".join(text for _, _, text in ordered) + tail + "."
