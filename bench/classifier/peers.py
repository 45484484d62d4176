"""Run the peers (losslint, trainpulse) over a corpus; executed inside bench/.venv-peers.

Usage: python peers.py CORPUS.json OUT.json
Writes {peer: {curve name: [prediction, ...]}} where a prediction is
{kind, start_step, end_step, alarm, period} mapped onto Holter's event kinds.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

LOSSLINT_KINDS = {
    "nan_inf": "divergence",
    "loss_spike": "spike",
    "divergence": "divergence",
    "overfit_onset": "divergence",
    "stagnation": "plateau",
}
TRAINPULSE_KINDS = {"nan_detector": "divergence", "loss_spike": "spike", "plateau": "plateau", "step_time": "spike"}


def peer_name(curve: dict) -> str:
    """Name the series so each peer routes it to its own detectors."""
    return {"loss": "loss", "eval_loss": "eval_loss", "grad_norm": "grad_norm", "step_time": "step_time"}.get(
        curve["kind"], curve["metric"]
    )


def run_losslint(curve: dict) -> list[dict]:
    from losslint.checks import run_all_checks
    from losslint.parsing import RunLog

    run = RunLog(steps=curve["steps"], series={peer_name(curve): curve["values"]}, source=Path(curve["name"]))
    out = []
    for f in run_all_checks(run):
        kind = LOSSLINT_KINDS.get(f.check)
        if kind is None:
            continue
        steps = f.details.get("steps") or [f.details.get("since_step")]
        for step in steps[:50]:
            out.append(
                {
                    "kind": kind,
                    "start_step": step,
                    "end_step": step,
                    "alarm": f.severity in ("warning", "error"),
                    "period": None,
                }
            )
    return out


def run_trainpulse(curve: dict) -> list[dict]:
    from trainpulse import Monitor

    monitor = Monitor()
    name = peer_name(curve)
    for step, value in zip(curve["steps"], curve["values"]):
        monitor.log(name, int(step), float(value))
    out = []
    for alert in monitor.alerts:
        kind = TRAINPULSE_KINDS.get(alert.detector)
        if alert.detector == "gradient":
            kind = "plateau" if "vanish" in alert.message.lower() else "spike"
        if kind is None:
            continue
        out.append(
            {
                "kind": kind,
                "start_step": alert.step,
                "end_step": alert.step,
                "alarm": alert.severity.value in ("warning", "critical"),
                "period": None,
            }
        )
    return out


def main() -> None:
    corpus = json.loads(Path(sys.argv[1]).read_text())
    for c in corpus:
        c["values"] = [float(v) if v is not None else math.nan for v in c["values"]]
    results: dict[str, dict[str, list]] = {}
    for peer, runner in (("losslint", run_losslint), ("trainpulse", run_trainpulse)):
        results[peer] = {}
        for c in corpus:
            try:
                results[peer][c["name"]] = runner(c)
            except Exception as exc:  # noqa: BLE001 — a peer crashing on a curve is a miss, not a bench failure
                results[peer][c["name"]] = [
                    {
                        "kind": "error",
                        "start_step": None,
                        "end_step": None,
                        "alarm": False,
                        "period": None,
                        "error": repr(exc),
                    }
                ]
    Path(sys.argv[2]).write_text(json.dumps(results))


if __name__ == "__main__":
    main()
