"""Holter classifier benchmark: synthetic corpus vs peers, real curves, speed.

    .venv/bin/python bench/classifier/run.py [--seed 2] [--no-peers] [--no-speed]

Seed 1 is the corpus the thresholds were tuned on; the default seed 2 was not looked at while
tuning. Peers run inside bench/.venv-peers (created here when missing).
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

from corpus import make_corpus  # noqa: E402
from scoring import format_table, score  # noqa: E402

from holter_server.detect import IncrementalDetector, classify_series, verdict  # noqa: E402

PEERS_VENV = REPO / "bench" / ".venv-peers"
CURVES = REPO.parent / "shared" / "curves"
LABEL_TO_KIND = {
    "spike_recoverable": "spike", "divergence_nan": "divergence", "divergence_nonfinite": "divergence",
    "divergence_overfitting": "divergence", "flat_zero_gradient": "plateau", "train_far_below_eval": "too_good",
    "too_good": "too_good", "periodic_spike": "sawtooth",
}
FILE_KINDS = {"loss": "loss", "eval_loss": "eval_loss", "grad_norm": "grad_norm", "step_time_ms": "step_time"}


def holter_predictions(curves: list[dict]) -> dict[str, list[dict]]:
    out = {}
    for c in curves:
        events = classify_series(c["steps"], c["values"], metric=c["metric"], kind=c["kind"],
                                 expected_floor=c.get("expected_floor"))
        out[c["name"]] = [{"kind": e.kind, "start_step": e.start_step, "end_step": e.end_step,
                           "alarm": e.severity != "info", "period": e.period} for e in events]
    return out


def peer_predictions(curves: list[dict]) -> dict[str, dict[str, list[dict]]]:
    python = PEERS_VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {PEERS_VENV} and installing losslint, trainpulse ...")
        venv.create(PEERS_VENV, with_pip=True)
    missing = [p for p in ("losslint", "trainpulse")
               if subprocess.run([str(python), "-c", f"import {p}"], capture_output=True).returncode]
    if missing:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *missing], check=False)
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file, out_file = Path(tmp) / "corpus.json", Path(tmp) / "out.json"
        corpus_file.write_text(json.dumps([
            {"name": c["name"], "metric": c["metric"], "kind": c["kind"], "steps": c["steps"].tolist(),
             "values": [None if not np.isfinite(v) and np.isnan(v) else float(v) for v in c["values"]]}
            for c in curves
        ]).replace("Infinity", "1e308"))
        done = subprocess.run([str(python), str(HERE / "peers.py"), str(corpus_file), str(out_file)],
                              capture_output=True, text=True)
        if done.returncode:
            print(f"peers could not run: {done.stderr.strip().splitlines()[-1:]}")
            return {}
        return json.loads(out_file.read_text())


def real_curves() -> None:
    labels_file = CURVES / "labels.json"
    if not labels_file.exists():
        print(f"(no real curves at {CURVES})")
        return
    labels = json.loads(labels_file.read_text())
    print(f"\nReal curves ({CURVES}):")
    passed = 0
    for name, entry in labels.items():
        data = np.genfromtxt(CURVES / name, delimiter=",", skip_header=1)
        metric = entry["metric"].split()[0]
        events = classify_series(data[:, 0].astype(np.int64), data[:, 1], metric=metric, kind=FILE_KINDS[metric])
        expected = sorted({LABEL_TO_KIND[l["kind"]] for l in entry["labels"] if l["kind"] in LABEL_TO_KIND})
        found = sorted({e.kind for e in events})
        alarming = sorted({e.kind for e in events if e.severity != "info"})
        ok = all(k in found for k in expected) and all(k in expected for k in alarming)
        passed += ok
        print(f"  {'PASS' if ok else 'MISS'} {name}: labels {[l['kind'] for l in entry['labels']]} -> expected "
              f"{expected or ['no alarm']}; found {found or ['nothing']} (verdict {verdict(events)})")
        for e in events:
            if e.kind != "spike" or e.severity != "info" or len(events) <= 8:
                print(f"         [{e.severity}] {e.kind} {e.start_step}-{e.end_step}: {e.summary}")
        quiet = [e for e in events if e.kind == "spike" and e.severity == "info"]
        if len(events) > 8 and quiet:
            print(f"         + {len(quiet)} recovered one-step spikes (info), e.g. {quiet[0].summary}")
    print(f"  {passed}/{len(labels)} real curves match their labels")


def speed() -> None:
    rng = np.random.default_rng(7)
    n = 1_000_000
    steps = np.arange(n)
    values = 3 + 0.5 * np.exp(-steps / 1e5) + rng.normal(0, 0.03, n)
    values[rng.integers(0, n, 50)] += 1.0  # some spikes to report
    times = []
    for _ in range(5):
        t = time.perf_counter()
        classify_series(steps, values, metric="loss")
        times.append(time.perf_counter() - t)
    print(f"\nSpeed: batch analysis of 1,000,000 points: median {statistics.median(times):.3f} s "
          f"(min {min(times):.3f} s, 5 runs)")
    m = 20_000
    for batch in (1, 10, 100, 1000):
        per_point = []
        for _ in range(3):
            detector = IncrementalDetector("loss")
            t = time.perf_counter()
            for i in range(0, m, batch):
                detector.add(steps[i : i + batch], values[i : i + batch])
            per_point.append((time.perf_counter() - t) / m * 1e6)
        print(f"  incremental, batches of {batch:>4}: median {statistics.median(per_point):.1f} µs per point")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=2, help="corpus seed (1 = tuning seed, 2 = held out)")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--no-speed", action="store_true")
    args = parser.parse_args()

    curves = make_corpus(args.seed)
    print(f"Synthetic corpus, seed {args.seed}: {len(curves)} curves "
          f"({sum(c['label'] == 'healthy' for c in curves)} healthy)")
    results = {"holter": score(curves, holter_predictions(curves))}
    if not args.no_peers:
        for peer, predictions in peer_predictions(curves).items():
            results[peer] = score(curves, predictions)
    print(format_table(results))
    misses = [c["name"] for c in curves if c["label"] != "healthy"
              and not any(p["kind"] == c["label"] for p in holter_predictions([c])[c["name"]])]
    print(f"holter misses ({len(misses)}): {', '.join(misses[:12])}{' ...' if len(misses) > 12 else ''}")
    real_curves()
    if not args.no_speed:
        speed()


if __name__ == "__main__":
    main()
