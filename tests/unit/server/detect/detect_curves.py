"""Synthetic curves and loaders shared by the detector tests (seeded, small, fast)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

CURVES = Path(__file__).resolve().parents[4] / ".." / "shared" / "curves"


def decaying_loss(n: int = 800, seed: int = 0, noise: float = 0.01, start: float = 10.8, floor: float = 3.2) -> np.ndarray:
    """A healthy LM loss: steep early drop bending into a slowly falling, noisy tail."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    level = floor + (start - floor) * (0.6 * np.exp(-t / (0.05 * n)) + 0.4 / (1 + t / (0.15 * n)))
    return level * (1 + rng.normal(0, noise, n))


def flat(n: int, level: float, noise: float, seed: int = 0) -> np.ndarray:
    """A flat noisy signal (throughput, step time, a settled norm)."""
    return level * (1 + np.random.default_rng(seed).normal(0, noise, n))


def load_curve(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Steps and values of a `step,value` CSV."""
    data = np.genfromtxt(path, delimiter=",", skip_header=1)
    return data[:, 0].astype(np.int64), data[:, 1]
