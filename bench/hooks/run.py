"""Overhead of `holter.torch.watch` on a small transformer's training step (CPU).

    .venv/bin/python bench/hooks/run.py [--steps 25] [--rounds 12]

Times full training steps (forward, backward, AdamW step) of the demo's character transformer,
scaled up (4 blocks, width 128, batch 32 x 48 tokens), without hooks, with `watch(every=50)`,
with `watch(every=1)`, and with `watch(every=50, nan_tripwire=True)` (every module's output and
first input and every gradient checked for NaN/Inf on every step). Steps are timed in CPU time
of the training thread (torch runs on one thread here, autograd included), which other
processes' load on a shared machine does not inflate as it does wall time (printed beside it).
The configurations take turns step by step, in a rotating order, so that what drift remains
falls on all of them alike; each configuration's hooks go on before its step and come off after
it, its step count carried on from its previous step (so `every=50` logs one step in 50).
Reported: the median step time over all rounds, and the
overhead as the median over rounds of (median with hooks / median without, same round) - 1,
with the quartiles of the rounds' overheads as its spread.
"""

from __future__ import annotations

import argparse
import statistics
import time

import holter.torch
import torch
from holter.demo.real import ALPHABET, BATCH, DOMAINS, CharTransformer, Corpus, sample_batch
from torch.nn import functional as F


class NullRun:
    """Takes the logged values and drops them: the hooks' own cost is measured, not the client's."""

    def log(self, metrics, step=None) -> None:  # type: ignore[no-untyped-def]
        pass

    def report_nonfinite(self, step, *, forward=None, gradient=None) -> None:  # type: ignore[no-untyped-def]
        pass


def step_times(
    model: CharTransformer, optimizer: torch.optim.Optimizer, batches: list, steps: int
) -> tuple[list[float], list[float]]:
    """CPU time of this thread and wall time of each of `steps` training steps."""
    cpu, wall = [], []
    for index in range(steps):
        inputs, targets = batches[index % len(batches)]
        started, started_wall = time.thread_time(), time.perf_counter()
        loss = F.cross_entropy(model(inputs).reshape(-1, len(ALPHABET)), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        cpu.append(time.thread_time() - started)
        wall.append(time.perf_counter() - started_wall)
    return cpu, wall


def quartiles(values: list[float]) -> tuple[float, float]:
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q1, q3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25, help="steps per configuration per round")
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(1)  # thread_time measures this thread only
    torch.manual_seed(0)
    corpus, generator = Corpus.generate(), torch.Generator().manual_seed(0)
    batches = [sample_batch(corpus.train, [i % len(DOMAINS) for i in range(2 * BATCH)], generator) for _ in range(8)]
    model = CharTransformer(width=128, layers=4, heads=4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step_times(model, optimizer, batches, 10)  # warm-up: allocator, first-call costs
    configs: dict[str, dict | None] = {
        "no hooks": None,
        "watch every=50": {"every": 50},
        "watch every=1": {"every": 1},
        "every=50+tripwire": {"every": 50, "nan_tripwire": True},
    }
    samples: dict[str, list[float]] = {name: [] for name in configs}
    walls: dict[str, list[float]] = {name: [] for name in configs}
    ratios: dict[str, list[float]] = {name: [] for name in configs}
    names = list(configs)
    counts = {name: 1 for name in configs}  # step 0 would be a logged step for every `every`
    for _ in range(args.rounds):
        cpu_round: dict[str, list[float]] = {name: [] for name in configs}
        for index in range(args.steps):
            # the configurations take turns step by step (in a rotating order), so that a burst of
            # load from elsewhere falls on all of them alike
            for name in names[index % len(names) :] + names[: index % len(names)]:
                options = configs[name]
                handle = holter.torch.watch(model, NullRun(), **options) if options else None
                if handle:
                    handle.step, counts[name] = counts[name], counts[name] + 1
                cpu, wall = step_times(
                    model, optimizer, batches[index % len(batches) :] + batches[: index % len(batches)], 1
                )
                if handle:
                    handle.remove()
                cpu_round[name] += cpu
                walls[name] += wall
        for name in configs:
            samples[name] += cpu_round[name]
            ratios[name].append(statistics.median(cpu_round[name]) / statistics.median(cpu_round["no hooks"]))
    parameters = sum(p.numel() for p in model.parameters())
    print(
        f"model: {parameters:,} parameters, {len(holter.torch.layers_of(model))} layers; "
        f"{args.rounds} rounds x {args.steps} steps per configuration, CPU time of one thread (wall time beside it)"
    )
    for name, times in samples.items():
        overhead = [100 * (r - 1) for r in ratios[name]]
        low, high = quartiles(overhead) if len(overhead) > 1 else (overhead[0], overhead[0])
        print(
            f"{name:>18}: median {statistics.median(times) * 1e3:7.2f} ms CPU/step "
            f"({statistics.median(walls[name]) * 1e3:7.2f} ms wall)  overhead {statistics.median(overhead):+5.1f}% "
            f"(rounds' quartiles {low:+.1f}% .. {high:+.1f}%)"
        )


if __name__ == "__main__":
    main()
