"""Overhead of `holter.torch.watch` on a small transformer's training step (CPU).

    .venv/bin/python bench/hooks/run.py [--steps 25] [--rounds 12]

Times full training steps (forward, backward, AdamW step) of the demo's character transformer,
scaled up (4 blocks, width 128, batch 32 x 48 tokens), without hooks, with `watch(every=50)` and
with `watch(every=1)`. Steps are timed in CPU time of the training thread (torch runs on one
thread here, autograd included), which other processes' load on a shared machine does not
inflate as it does wall time. The configurations take turns round by round so that what drift
remains falls on all of them alike. Reported: the median step time over all rounds, and the
overhead as the median over rounds of (median with hooks / median without, same round) - 1.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.nn import functional as F

import holter.torch
from holter_server.demo.real import ALPHABET, BATCH, Corpus, CharTransformer, DOMAINS, sample_batch


class NullRun:
    """Takes the logged values and drops them: the hooks' own cost is measured, not the client's."""

    def log(self, metrics, step=None) -> None:  # type: ignore[no-untyped-def]
        pass


def step_times(model: CharTransformer, optimizer: torch.optim.Optimizer, batches: list, steps: int) -> list[float]:
    times = []
    for index in range(steps):
        inputs, targets = batches[index % len(batches)]
        started = time.thread_time()
        loss = F.cross_entropy(model(inputs).reshape(-1, len(ALPHABET)), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        times.append(time.thread_time() - started)
    return times


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
    configs = {"no hooks": None, "watch every=50": 50, "watch every=1": 1}
    samples: dict[str, list[float]] = {name: [] for name in configs}
    ratios: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(args.rounds):
        medians = {}
        for name, every in configs.items():
            handle = holter.torch.watch(model, NullRun(), every=every) if every else None
            times = step_times(model, optimizer, batches, args.steps)
            if handle:
                handle.remove()
            samples[name] += times
            medians[name] = statistics.median(times)
        for name in configs:
            ratios[name].append(medians[name] / medians["no hooks"])
    parameters = sum(p.numel() for p in model.parameters())
    print(f"model: {parameters:,} parameters, {len(holter.torch.layers_of(model))} layers; "
          f"{args.rounds} rounds x {args.steps} steps per configuration, CPU time of one thread")
    for name, times in samples.items():
        overhead = 100 * (statistics.median(ratios[name]) - 1)
        print(f"{name:>16}: median {statistics.median(times) * 1e3:7.2f} ms CPU/step  overhead {overhead:+5.1f}%")


if __name__ == "__main__":
    main()
