"""Import benchmark: `holter import` of the same points as a TensorBoard logdir and as a CSV file.

    .venv/bin/python bench/importers/run.py                      # 200,000 points, 5 repeats each
    .venv/bin/python bench/importers/run.py --points 1000000 --repeats 3

The same run, `--points` points over 4 metrics (loss, grad norm, learning rate, throughput, one
value per step each), is written once as a TensorBoard event file (torch's SummaryWriter: one
event per scalar, each with its own wall time) and once as a CSV (a row per step). Each file is
imported `--repeats` times, alternating, into a fresh `holter serve` on SQLite, each import a
`holter import` process of its own. Reported per format: points/s (median, min–max) of the whole
command, wall-clock seconds and the import process's CPU-seconds (user + system), and the ratio
of CSV's points/s to TensorBoard's (issue 32 asks for TensorBoard within 3x of CSV).
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.servers import ServerProcess

METRICS = ("train/loss", "train/grad_norm", "train/lr", "perf/tokens_per_s")


def values(step: int) -> tuple[float, ...]:
    return (3.0 * math.exp(-step / 5000) + 1.0, 0.8 + (step % 13) / 100, 3e-4, 51_000.0 + step % 17)


def write_tensorboard(folder: Path, points: int) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(folder), max_queue=1000) as writer:
        for step in range(points // len(METRICS)):
            for name, value in zip(METRICS, values(step)):
                writer.add_scalar(name, value, step)
    return folder


def write_csv(path: Path, points: int) -> Path:
    with path.open("w") as handle:
        handle.write("step," + ",".join(METRICS) + "\n")
        for step in range(points // len(METRICS)):
            handle.write(f"{step}," + ",".join(repr(v) for v in values(step)) + "\n")
    return path


def import_once(server: ServerProcess, path: Path, index: int, env: dict[str, str]) -> tuple[float, float]:
    """(wall-clock s, CPU-s) of one `holter import` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "holter.cli",
            "import",
            str(path),
            "--project",
            "bench-import",
            "--name",
            f"{path.name}-{index}",
            "--url",
            server.url,
        ],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        tensorboard = write_tensorboard(work / "tensorboard", args.points)
        table = write_csv(work / "metrics.csv", args.points)
        points = args.points // len(METRICS) * len(METRICS)
        env = {**os.environ, "HOLTER_SPOOL_DIR": str(work / "spool"), "HOLTER_QUIET": "1", "HOLTER_SYSTEM_VITALS": "0"}
        server = ServerProcess(f"sqlite:///{work / 'bench.db'}", log_path=work / "server.log").start()
        try:
            results: dict[str, list[tuple[float, float]]] = {"tensorboard": [], "csv": []}
            for index in range(args.repeats):
                for name, path in (("tensorboard", tensorboard), ("csv", table)):
                    results[name].append(import_once(server, path, index, env))
        finally:
            server.stop()
    print(f"holter import, {points:,} points over {len(METRICS)} metrics, {args.repeats} imports each, SQLite")
    print(f"{'format':<12} {'points/s median (min-max)':>28} {'wall s':>8} {'CPU-s':>7}")
    rates = {}
    for name, runs in results.items():
        per_second = [points / wall for wall, _ in runs]
        rates[name] = statistics.median(per_second)
        print(
            f"{name:<12} {rates[name]:>12,.0f} ({min(per_second):,.0f}-{max(per_second):,.0f})"
            f" {statistics.median(w for w, _ in runs):>8.2f} {statistics.median(c for _, c in runs):>7.2f}"
        )
    print(f"CSV / TensorBoard points/s: {rates['csv'] / rates['tensorboard']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
