"""Seed groups: runs whose configs differ only in seed keys, and a group's band on a metric.

Two seeds of the same config bound how much run-to-run variation to expect (shared/seeds/004,
"Reproducibility and determinism"), so a group is drawn as its median with two bands: min–max
(every seed inside) and a robust spread, the median ± 1.4826 × the median absolute deviation of
the seeds at each step (the standard deviation the seeds would have if they were normal, but not
dragged by one seed that spiked).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from holter_server.analysis.configs import fingerprint, flatten, without
from holter_server.vocabulary.configs import is_seed_key

MAD_TO_SIGMA = 1.4826  # the MAD of a normal sample times this is its standard deviation


@dataclass(frozen=True)
class RunConfig:
    """A run as seed grouping sees it."""

    run_id: str
    config: dict[str, Any]
    name: str | None = None


@dataclass
class SeedGroup:
    """Runs of one config, told apart only by their seeds.

    `config` is what they share (flat, seed keys left out); `seeds` is each run's seed keys.
    """

    key: str
    run_ids: list[str]
    config: dict[str, Any]
    seeds: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.run_ids)


def seed_keys_of(flat: Mapping[str, Any], declared: tuple[str, ...] = ()) -> list[str]:
    """The seed keys of a flat config (by name, or declared by the project)."""
    return [k for k in flat if is_seed_key(k, declared)]


def seed_groups(runs: Sequence[RunConfig], declared: tuple[str, ...] = ()) -> list[SeedGroup]:
    """Group runs by their config less seed keys; groups in order of their first run."""
    groups: dict[str, SeedGroup] = {}
    for run in runs:
        flat = flatten(run.config)
        shared = without(flat, lambda k: is_seed_key(k, declared))
        key = fingerprint(shared)
        group = groups.setdefault(key, SeedGroup(key=key, run_ids=[], config=shared))
        group.run_ids.append(run.run_id)
        group.seeds[run.run_id] = {k: flat[k] for k in seed_keys_of(flat, declared)}
    return list(groups.values())


def group_of(run_id: str, runs: Sequence[RunConfig], declared: tuple[str, ...] = ()) -> SeedGroup | None:
    """The seed group `run_id` belongs to among `runs` (None if it is not among them)."""
    return next((g for g in seed_groups(runs, declared) if run_id in g.run_ids), None)


@dataclass
class GroupBand:
    """A seed group's curve on a shared step grid: median, min–max, median ± robust spread, and
    how many seeds cover each step (a seed counts from its first to its last finite point)."""

    steps: np.ndarray
    median: np.ndarray
    low: np.ndarray
    high: np.ndarray
    spread: np.ndarray
    seeds: np.ndarray


def finite_curve(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The finite points of a curve, in step order."""
    steps, values = np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=float)
    keep = np.isfinite(values)
    order = np.argsort(steps[keep], kind="stable")
    return steps[keep][order], values[keep][order]


def on_grid(steps: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The curve interpolated at `grid`, NaN outside the steps it covers."""
    s, v = finite_curve(steps, values)
    out = np.full(len(grid), np.nan)
    if len(s):
        inside = (grid >= s[0]) & (grid <= s[-1])
        out[inside] = np.interp(grid[inside], s, v)
    return out


def shared_grid(curves: Mapping[str, tuple[np.ndarray, np.ndarray]], max_points: int) -> np.ndarray:
    """Every step any member logged, thinned evenly to at most `max_points`."""
    parts = [finite_curve(s, v)[0] for s, v in curves.values()]
    steps = np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)
    if len(steps) > max_points:
        steps = steps[np.unique(np.linspace(0, len(steps) - 1, max_points).round().astype(int))]
    return steps


def group_band(curves: Mapping[str, tuple[np.ndarray, np.ndarray]], max_points: int = 1000) -> GroupBand:
    """The band of a group's curves (run id → steps, values) on their shared step grid."""
    grid = shared_grid(curves, max_points)
    if not len(grid) or not curves:
        empty = np.empty(0)
        return GroupBand(grid, empty, empty, empty, empty, np.empty(0, dtype=int))
    stack = np.vstack([on_grid(s, v, grid) for s, v in curves.values()])
    covered = np.isfinite(stack)
    seeds = covered.sum(axis=0)
    keep = seeds > 0
    stack, grid, seeds = stack[:, keep], grid[keep], seeds[keep]
    median = np.nanmedian(stack, axis=0)
    spread = MAD_TO_SIGMA * np.nanmedian(np.abs(stack - median), axis=0)
    return GroupBand(
        steps=grid,
        median=median,
        low=np.nanmin(stack, axis=0),
        high=np.nanmax(stack, axis=0),
        spread=spread,
        seeds=seeds,
    )
