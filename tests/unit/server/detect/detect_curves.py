"""Synthetic curves shared by the detector tests (seeded, small, fast); the real ones are in
tests/data/real_curves (tests/real_curves.py)."""

from __future__ import annotations

import numpy as np


def decaying_loss(
    n: int = 800, seed: int = 0, noise: float = 0.01, start: float = 10.8, floor: float = 3.2
) -> np.ndarray:
    """A healthy LM loss: steep early drop bending into a slowly falling, noisy tail."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    level = floor + (start - floor) * (0.6 * np.exp(-t / (0.05 * n)) + 0.4 / (1 + t / (0.15 * n)))
    return level * (1 + rng.normal(0, noise, n))


def flat(n: int, level: float, noise: float, seed: int = 0) -> np.ndarray:
    """A flat noisy signal (throughput, step time, a settled norm)."""
    return level * (1 + np.random.default_rng(seed).normal(0, noise, n))
