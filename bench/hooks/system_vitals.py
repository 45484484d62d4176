"""Cost of the system-vitals sampler (holter/system.py) at its default interval.

    .venv/bin/python bench/hooks/system_vitals.py [--samples 200]

Times `SystemSampler.sample()` (read /proc, read the GPUs, queue the points) in the sampling
thread's CPU time and in wall time, over many samples: without a GPU reader, and with the
nvidia-smi reader against an `nvidia-smi` that prints a recorded H100 capture (the cost of
spawning it is what nvidia-smi costs; NVML, when installed, answers in-process and costs less).
The sampler takes the GIL for at most its CPU time once per interval, so its share of a
training step is (CPU time per sample) / interval, whatever the step's length.
"""

from __future__ import annotations

import argparse
import stat
import statistics
import sys
import tempfile
import time
from pathlib import Path

from holter.system import DEFAULT_INTERVAL_S, SmiReader, SystemSampler

CAPTURE = Path(__file__).resolve().parents[2] / "tests" / "data" / "nvidia_smi" / "h100-80gb-hbm3__590.48.01__load.csv"


class StepRun:
    """Advances one step per sample and drops the points: the sampler's own cost is measured."""

    id = "bench"

    def __init__(self) -> None:
        self.step = 1

    def log_at(self, metrics, *, step, wall_time=None) -> None:  # type: ignore[no-untyped-def]
        pass


def measure(samples: int, gpus: object) -> tuple[list[float], list[float]]:
    run = StepRun()
    sampler = SystemSampler(run, gpus=gpus)  # type: ignore[arg-type]
    sampler.proc.read()
    cpu, wall = [], []
    for _ in range(samples):
        run.step += 1
        started_cpu, started = time.thread_time(), time.perf_counter()
        assert sampler.sample(gpus)
        cpu.append(time.thread_time() - started_cpu)
        wall.append(time.perf_counter() - started)
    return cpu, wall


def spread(values: list[float]) -> str:
    quartiles = statistics.quantiles(values, n=4)
    return f"median {statistics.median(values) * 1e3:.3f} ms (IQR {quartiles[0] * 1e3:.3f}-{quartiles[2] * 1e3:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "nvidia-smi"
        script.write_text(f"#!/bin/sh\ncat '{CAPTURE}'\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        readers = {"/proc only (no GPU)": None, "/proc + nvidia-smi (1 GPU)": SmiReader(str(script))}
        print(
            f"{args.samples} samples each; default interval {DEFAULT_INTERVAL_S:g} s; python {sys.version.split()[0]}"
        )
        for name, gpus in readers.items():
            cpu, wall = measure(args.samples, gpus)
            share = statistics.median(cpu) / DEFAULT_INTERVAL_S
            print(f"{name:28s} CPU {spread(cpu)}; wall {spread(wall)}; share of every training step: {share:.4%}")


if __name__ == "__main__":
    main()
