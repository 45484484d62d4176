"""Holter classifier benchmark: synthetic corpus and the real-run corpus vs peers, speed.

    .venv/bin/python bench/classifier/run.py [--seed 2] [--no-peers] [--no-speed] [--no-slow-burn]

Seed 1 is the corpus the thresholds were tuned on; the default seed 2 was not looked at while
tuning (for the slow-burn families it also draws the held-out variant of every generator, see
slowburn.py). Peers run inside bench/.venv-peers (created here when missing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))  # tests.real_curves: the real-run corpus and how it is scored

from corpus import make_corpus
from holter_server.detect import IncrementalDetector, classify_series
from holter_server.detect.classify import new_detector
from holter_server.detect.events import Event
from holter_server.detect.findings import cross_signal_findings
from scoring import format_table, score
from slowburn import cutoffs, format_slow_burn, make_slow_burn, score_slow_burn

from tests.real_curves import CORPUS, RealSeries, runs
from tests.real_scoring import events_to_find, in_the_data, match, match_events, read_run

PEERS_VENV = REPO / "bench" / ".venv-peers"


def holter_predictions(curves: list[dict]) -> dict[str, list[dict]]:
    out = {}
    for c in curves:
        events = classify_series(
            c["steps"], c["values"], metric=c["metric"], kind=c["kind"], expected_floor=c.get("expected_floor")
        )
        out[c["name"]] = [
            {
                "kind": e.kind,
                "start_step": e.start_step,
                "end_step": e.end_step,
                "alarm": e.severity != "info",
                "period": e.period,
            }
            for e in events
        ]
    return out


def peer_predictions(curves: list[dict]) -> dict[str, dict[str, list[dict]]]:
    python = PEERS_VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {PEERS_VENV} and installing losslint, trainpulse ...")
        venv.create(PEERS_VENV, with_pip=True)
    missing = [
        p
        for p in ("losslint", "trainpulse")
        if subprocess.run([str(python), "-c", f"import {p}"], capture_output=True, check=False).returncode
    ]
    if missing:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *missing], check=False)
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file, out_file = Path(tmp) / "corpus.json", Path(tmp) / "out.json"
        corpus_file.write_text(
            json.dumps(
                [
                    {
                        "name": c["name"],
                        "metric": c["metric"],
                        "kind": c["kind"],
                        "steps": c["steps"].tolist(),
                        "values": [None if not np.isfinite(v) and np.isnan(v) else float(v) for v in c["values"]],
                    }
                    for c in curves
                ]
            ).replace("Infinity", "1e308")
        )
        done = subprocess.run(
            [str(python), str(HERE / "peers.py"), str(corpus_file), str(out_file)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            print(f"peers could not run: {done.stderr.strip().splitlines()[-1:]}")
            return {}
        return json.loads(out_file.read_text())


def holter_reading(curve: dict, upto: int) -> list[dict]:
    """Holter's events (and the run-level findings of the one series) on the points up to step `upto`."""
    keep = curve["steps"] <= upto
    detector = new_detector(curve["metric"], kind=curve["kind"])
    detector.add(curve["steps"][keep], curve["values"][keep])
    events = detector.events
    events = events + cross_signal_findings(events, [detector.snapshot()])
    return [
        {"kind": e.kind, "start_step": e.start_step, "end_step": e.end_step, "alarm": e.severity != "info"}
        for e in events
    ]


def holter_live(curve: dict, chunks: int = 100) -> list[dict]:
    """Every alarm Holter showed at any moment while the curve streamed in, `chunks` batches
    (one point at a time for a short series): a warning raised and withdrawn later was still sent."""
    detector = new_detector(curve["metric"], kind=curve["kind"])
    steps, values = curve["steps"], curve["values"]
    size = max(1, len(steps) // chunks)
    seen: dict[tuple, dict] = {}
    for i in range(0, len(steps), size):
        detector.add(steps[i : i + size], values[i : i + size])
        events = detector.events
        for e in events + cross_signal_findings(events, [detector.snapshot()]):
            if e.severity != "info":
                seen.setdefault(
                    (e.kind, e.start_step),
                    {"kind": e.kind, "start_step": e.start_step, "end_step": e.end_step, "alarm": True},
                )
    return list(seen.values())


def slow_burn(seed: int, with_peers: bool) -> None:
    """The slow-burn table: failures that creep (named at all, by a quarter and by half-way through
    their course) and their healthy look-alikes (alarmed), for Holter and the peers."""
    curves = make_slow_burn(seed)
    variant = "tuning" if seed == 1 else "held-out"
    print(
        f"\nSlow-burn families, seed {seed} ({variant} variant): {len(curves)} curves "
        f"({sum(c['label'] == 'healthy' for c in curves)} healthy look-alikes); named = a warning or critical "
        "event of a divergence-like kind reaching into the failure's course, read on the points up to a quarter "
        "of the course, half-way, and all"
    )
    readings = {
        "holter": {c["name"]: {cut: holter_reading(c, upto) for cut, upto in cutoffs(c).items()} for c in curves}
    }
    for c in curves:
        if c["label"] == "healthy":
            readings["holter"][c["name"]]["live"] = holter_live(c)
    if with_peers:
        prefixes = []
        for c in curves:
            for cut, upto in cutoffs(c).items():
                keep = c["steps"] <= upto
                prefixes.append(
                    {**c, "name": f"{c['name']}#{cut}", "steps": c["steps"][keep], "values": c["values"][keep]}
                )
        for peer, predictions in peer_predictions(prefixes).items():
            found: dict[str, dict[str, list[dict]]] = {}
            for name, events in predictions.items():
                curve, cut = name.rsplit("#", 1)
                found.setdefault(curve, {})[cut] = [p for p in events if p["kind"] != "error"]
            readings[peer] = found
    print(format_slow_burn({tool: score_slow_burn(curves, read) for tool, read in readings.items()}))


def real_corpus(with_peers: bool) -> None:
    """Holter (each run read whole) and the peers (series by series) on the real-run corpus."""
    readings = [r for members in runs().values() for r in read_run(members)]
    read = [r for r in readings if r.events is not None]
    print(
        f"\nReal-run corpus ({CORPUS.relative_to(REPO)}): {len(readings)} series from {len(runs())} runs; "
        f"{len(read)} vital signs read ({len(readings) - len(read)} others: rewards, KL, accuracies)"
    )
    said: dict[str, dict[str, list[Event]]] = {"holter": {r.series.file: list(r.events or ()) for r in read}}
    if with_peers:
        curves = [
            {
                "name": r.series.file,
                "metric": r.series.metric_name,
                "kind": r.series.kind,
                "steps": r.series.arrays()[0],
                "values": r.series.arrays()[1],
            }
            for r in read
        ]
        for peer, predictions in peer_predictions(curves).items():
            said[peer] = {
                name: [_as_event(p, name) for p in found if p["kind"] != "error"] for name, found in predictions.items()
            }
    figures = {tool: _real_figures([r.series for r in read], events) for tool, events in said.items()}
    width = 17
    print("metric".ljust(40) + "".join(tool.rjust(width) for tool in figures))
    for key, label in (
        ("found", "labelled events found"),
        ("found_visible", "  ... of those the data shows"),
        ("healthy_alarmed", "healthy series with warning/critical"),
        ("periods", "sawtooth period within 5%"),
    ):
        print(label.ljust(40) + "".join(figures[tool][key].rjust(width) for tool in figures))
    for kind in sorted({k for f in figures.values() for k in f["by_label"]}):
        print(
            f"  {kind}".ljust(40) + "".join(figures[tool]["by_label"].get(kind, "-").rjust(width) for tool in figures)
        )
    for r in read:
        missed = [label for label in events_to_find(r.series) if match(r, label) is None]
        if missed or (r.series.healthy and r.alarms):
            what = [
                f"missed {label.kind}@{label.start_step}"
                + ("" if in_the_data(r.series, label) else " (not in the data)")
                for label in missed
            ] + [f"alarm {e.kind}@{e.start_step} [{e.severity}]" for e in r.alarms if r.series.healthy]
            print(f"  holter {r.series.file}: {'; '.join(what)}")


def _as_event(prediction: dict, name: str) -> Event:
    start = prediction["start_step"] if prediction["start_step"] is not None else -1
    end = prediction["end_step"] if prediction["end_step"] is not None else start
    return Event(
        kind=prediction["kind"],
        metric=name,
        start_step=int(start),
        end_step=int(end),
        severity="warning" if prediction["alarm"] else "info",
        score=0.0,
        summary="",
        period=prediction["period"],
    )


def _real_figures(series: list[RealSeries], said: dict[str, list[Event]]) -> dict:
    labelled = [(s, label) for s in series for label in events_to_find(s)]
    hits = [(s, label, match_events(s, label, said.get(s.file, [])) is not None) for s, label in labelled]
    visible = [h for h in hits if in_the_data(h[0], h[1])]
    periodic = [h for h in hits if h[1].period is not None]
    healthy = [s for s in series if s.healthy]
    alarmed = [s for s in healthy if any(e.severity != "info" for e in said.get(s.file, []))]
    seen = sum(h[2] for h in visible)
    by_label: dict[str, list[bool]] = {}
    for _, label, ok in hits:
        by_label.setdefault(label.kind, []).append(ok)
    return {
        "found": f"{sum(h[2] for h in hits)}/{len(hits)}",
        "found_visible": f"{seen}/{len(visible)} ({seen / max(len(visible), 1):.0%})",
        "healthy_alarmed": f"{len(alarmed)}/{len(healthy)}",
        "periods": f"{sum(h[2] for h in periodic)}/{len(periodic)}",
        "by_label": {kind: f"{sum(oks)}/{len(oks)}" for kind, oks in by_label.items()},
    }


def speed() -> None:
    """Wall-clock and CPU time (the machine may be shared: CPU time is the steadier figure)."""
    rng = np.random.default_rng(7)
    n = 1_000_000
    steps = np.arange(n)
    values = 3 + 0.5 * np.exp(-steps / 1e5) + rng.normal(0, 0.03, n)
    values[rng.integers(0, n, 50)] += 1.0  # some spikes to report
    walls, cpus = [], []
    for _ in range(5):
        t, c = time.perf_counter(), time.process_time()
        classify_series(steps, values, metric="loss")
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    print(
        f"\nSpeed: batch analysis of 1,000,000 points: median {statistics.median(walls):.3f} s wall "
        f"(min {min(walls):.3f} s), {statistics.median(cpus):.3f} s CPU (min {min(cpus):.3f} s), 5 runs"
    )
    m = 20_000
    for batch in (1, 10, 100, 1000):
        wall, cpu = [], []
        for _ in range(3):
            detector = IncrementalDetector("loss")
            t, c = time.perf_counter(), time.process_time()
            for i in range(0, m, batch):
                detector.add(steps[i : i + batch], values[i : i + batch])
            wall.append((time.perf_counter() - t) / m * 1e6)
            cpu.append((time.process_time() - c) / m * 1e6)
        print(
            f"  incremental, batches of {batch:>4}: median {statistics.median(wall):.1f} µs per point wall "
            f"(spread {min(wall):.1f}-{max(wall):.1f}), {statistics.median(cpu):.1f} µs CPU"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=2, help="corpus seed (1 = tuning seed, 2 = held out)")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--no-slow-burn", action="store_true")
    parser.add_argument("--only-slow-burn", action="store_true", help="print the slow-burn table alone")
    args = parser.parse_args()
    if args.only_slow_burn:
        slow_burn(args.seed, with_peers=not args.no_peers)
        return

    curves = make_corpus(args.seed)
    print(
        f"Synthetic corpus, seed {args.seed}: {len(curves)} curves "
        f"({sum(c['label'] == 'healthy' for c in curves)} healthy)"
    )
    results = {"holter": score(curves, holter_predictions(curves))}
    if not args.no_peers:
        for peer, predictions in peer_predictions(curves).items():
            results[peer] = score(curves, predictions)
    print(format_table(results))
    misses = [
        c["name"]
        for c in curves
        if c["label"] != "healthy" and not any(p["kind"] == c["label"] for p in holter_predictions([c])[c["name"]])
    ]
    print(f"holter misses ({len(misses)}): {', '.join(misses[:12])}{' ...' if len(misses) > 12 else ''}")
    if not args.no_slow_burn:
        slow_burn(args.seed, with_peers=not args.no_peers)
    real_corpus(with_peers=not args.no_peers)
    if not args.no_speed:
        speed()


if __name__ == "__main__":
    main()
