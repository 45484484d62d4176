"""A synthetic training run with the vital signs of a real one and a few planted problems.

Loss falls from ln(vocab) and bends into a noisy tail; at 40% of the run a gradient-norm spike
precedes a loss spike by two steps; from 60% the rollout/trainer logprob mismatch spikes every
64 steps; at 75% throughput drops by 40% while the loss carries on; the last layer's activation
norm grows without bound in the final quarter.
"""

from __future__ import annotations

import math
import random

LAYERS = 6
VOCAB = 50_257


class SyntheticRun:
    """Produces one step's metrics at a time, deterministically for a given seed."""

    def __init__(self, total_steps: int, seed: int = 0, *, planted: bool = True) -> None:
        self.total = max(total_steps, 100)
        self.rng = random.Random(seed)
        self.planted = planted  # False: the same run without its problems (a healthy reference)
        self.spike_at = int(self.total * 0.4)
        self.mismatch_from = int(self.total * 0.6)
        self.slowdown_at = int(self.total * 0.75)

    def metrics(self, step: int) -> dict[str, float]:
        """The metrics logged at `step`."""
        rng, progress = self.rng, step / self.total
        floor, start = 2.9, math.log(VOCAB)
        loss = floor + (start - floor) * math.exp(-step / (0.06 * self.total)) + 0.35 * math.exp(-progress * 3)
        loss += rng.gauss(0, 0.04)
        grad_norm = abs(0.9 + 0.6 * math.exp(-step / (0.03 * self.total)) + rng.gauss(0, 0.06))
        planted = self.planted
        if planted and self.spike_at - 2 <= step <= self.spike_at:
            grad_norm *= 9.0
        if planted and self.spike_at <= step < self.spike_at + 6:
            loss += 3.0 * math.exp(-(step - self.spike_at) / 2)
        mismatch = abs(rng.gauss(0.002, 0.0007))
        if planted and step >= self.mismatch_from and step % 64 == 0:
            mismatch += 0.11
        slow = planted and step >= self.slowdown_at
        tokens_per_s = 52_000 * (0.6 if slow else 1.0) * (1 + rng.gauss(0, 0.015))
        values = {
            "loss": loss,
            "grad_norm": grad_norm,
            "lr": 3e-4 * min(1.0, step / (0.02 * self.total)) * (0.5 + 0.5 * math.cos(math.pi * progress)),
            "logprob_mismatch": mismatch,
            "tokens_per_s": tokens_per_s,
        }
        for layer in range(LAYERS):
            norm = 1.0 + 0.15 * layer + rng.gauss(0, 0.02)
            if planted and layer == LAYERS - 1 and progress > 0.75:
                norm *= 1 + 60 * (progress - 0.75) ** 1.5
            values[f"act_norm/layer.{layer}"] = norm
        return values

    def eval_loss(self, step: int) -> float:
        """Eval loss, logged every 100 steps: tracks the train loss slightly above it."""
        floor, start = 3.0, math.log(VOCAB)
        return floor + (start - floor) * math.exp(-step / (0.06 * self.total)) + 0.35 * math.exp(-3 * step / self.total)
