"""Curve-level scoring shared by Holter and the peers."""

from __future__ import annotations

from typing import Any

import numpy as np

KINDS = ("spike", "divergence", "plateau", "sawtooth", "too_good", "level_shift")


def score(curves: list[dict[str, Any]], predictions: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per-kind precision/recall/F1, macro-F1, spike localisation, period accuracy, false alarms."""
    table: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        tp = fp = fn = 0
        for c in curves:
            found = any(p["kind"] == kind for p in predictions.get(c["name"], []))
            truth = c["label"] == kind
            tp += found and truth
            fp += found and not truth
            fn += truth and not found
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        table[kind] = {"precision": precision, "recall": recall, "f1": f1, "support": tp + fn}
    spikes = [c for c in curves if c["label"] == "spike"]
    located = 0
    for c in spikes:
        every = int(np.median(np.diff(c["steps"]))) if len(c["steps"]) > 1 else 1
        for p in predictions.get(c["name"], []):
            if (
                p["kind"] == "spike"
                and p["start_step"] is not None
                and (p["start_step"] - 2 * every <= c["spike_step"] <= (p["end_step"] or p["start_step"]) + 2 * every)
            ):
                located += 1
                break
    saws = [c for c in curves if c["label"] == "sawtooth"]
    period_ok = sum(
        any(
            p["kind"] == "sawtooth" and p.get("period") and abs(p["period"] - c["period"]) <= 0.1 * c["period"]
            for p in predictions.get(c["name"], [])
        )
        for c in saws
    )
    healthy = [c for c in curves if c["label"] == "healthy"]
    alarms = sum(any(p["alarm"] for p in predictions.get(c["name"], [])) for c in healthy)
    anything = sum(bool(predictions.get(c["name"])) for c in healthy)
    return {
        "kinds": table,
        "macro_f1": float(np.mean([table[k]["f1"] for k in KINDS])),
        "spike_localisation": located / len(spikes) if spikes else 0.0,
        "period_accuracy": period_ok / len(saws) if saws else 0.0,
        "healthy_no_alarm": 1 - alarms / len(healthy) if healthy else 1.0,
        "healthy_no_event": 1 - anything / len(healthy) if healthy else 1.0,
        "n_curves": len(curves),
        "n_healthy": len(healthy),
    }


def format_table(results: dict[str, dict[str, Any]]) -> str:
    """Side-by-side table: one column per tool."""
    tools = list(results)
    width = 17
    lines = ["metric".ljust(26) + "".join(t.rjust(width * 1) for t in tools)]
    for kind in KINDS:
        row = f"{kind} P/R/F1".ljust(26)
        for t in tools:
            k = results[t]["kinds"][kind]
            row += f"{k['precision']:.2f}/{k['recall']:.2f}/{k['f1']:.2f}".rjust(width)
        lines.append(row)
    for key, label in (
        ("macro_f1", "macro-F1"),
        ("spike_localisation", "spike localisation"),
        ("period_accuracy", "sawtooth period ±10%"),
        ("healthy_no_alarm", "healthy: no alarm"),
        ("healthy_no_event", "healthy: no event at all"),
    ):
        lines.append(label.ljust(26) + "".join(f"{results[t][key]:.3f}".rjust(width) for t in tools))
    return "\n".join(lines)
