"""What wandb scripts log besides numbers: `Histogram`, kept as quantiles, and rich media
(`Table`, `Image`, `Audio`, `Video`, `Html`, `Artifact`, ...), accepted and not stored; and
nested dicts, flattened to `a/b` (see `expand`).

    run.log({"grads": holter.Histogram(values)})          # or np_histogram=(counts, edges)

A histogram becomes seven metrics at its step: `grads/min`, `grads/p5`, `grads/p25`,
`grads/median`, `grads/p75`, `grads/p95` and `grads/max`, which the run page draws as one band.
Holter stores curves, not files: a media value is dropped (the first of each type says so on
stderr), so a wandb script that logs images still runs and its numbers are all kept.

Standard library only; numpy is used when the caller hands over a numpy array or a tensor (it
is then importable) because sorting millions of gradients in Python would stall the loop.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

# The quantiles kept of a histogram, as (suffix, fraction), lowest first.
QUANTILES: tuple[tuple[str, float], ...] = (
    ("min", 0.0),
    ("p5", 0.05),
    ("p25", 0.25),
    ("median", 0.5),
    ("p75", 0.75),
    ("p95", 0.95),
    ("max", 1.0),
)
QUANTILE_SUFFIXES: tuple[str, ...] = tuple(suffix for suffix, _ in QUANTILES)

_warned: set[str] = set()


def _note_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        print(message, file=sys.stderr)


class Histogram:
    """A distribution logged at a step (wandb's `wandb.Histogram`), kept as its quantiles.

    `sequence`: numbers (a list, a numpy array, a CPU or GPU tensor); or `np_histogram`:
    `(counts, bin_edges)` as `numpy.histogram` returns them, whose quantiles are read by linear
    interpolation inside the bins. NaN and ±Inf values are left out. `num_bins` is accepted
    for wandb's sake; the quantiles do not depend on it.
    """

    def __init__(self, sequence: Any = None, np_histogram: Any = None, num_bins: int = 64) -> None:
        if (sequence is None) == (np_histogram is None):
            raise ValueError("Histogram takes a sequence or np_histogram=(counts, bin_edges), one of the two")
        self.num_bins = num_bins
        self.quantiles: dict[str, float] | None = (
            _from_values(sequence) if np_histogram is None else _from_bins(*np_histogram)
        )

    def points(self, name: str) -> dict[str, float]:
        """The metrics it becomes when logged as `name` (none when it held no finite value)."""
        return {f"{name}/{suffix}": value for suffix, value in (self.quantiles or {}).items()}

    def __repr__(self) -> str:
        return f"Histogram({self.quantiles})"


def _from_values(sequence: Any) -> dict[str, float] | None:
    if hasattr(sequence, "detach"):  # a torch tensor: off the graph and the GPU first
        sequence = sequence.detach().float().cpu()
    if hasattr(sequence, "__array__") and not isinstance(sequence, (list, tuple)):
        import numpy as np  # the caller has numpy: it handed over an array

        array = np.asarray(sequence, dtype=np.float64).ravel()
        array = array[np.isfinite(array)]
        if not array.size:
            return None
        found = np.quantile(array, [fraction for _, fraction in QUANTILES])
        return {suffix: float(value) for (suffix, _), value in zip(QUANTILES, found)}
    values = sorted(v for v in (float(x) for x in _flat(sequence)) if math.isfinite(v))
    if not values:
        return None
    return {suffix: _quantile(values, fraction) for suffix, fraction in QUANTILES}


def _flat(sequence: Any) -> list[Any]:
    flat: list[Any] = []
    for item in sequence:
        if isinstance(item, (list, tuple)):
            flat.extend(_flat(item))
        else:
            flat.append(item)
    return flat


def _quantile(ordered: Sequence[float], fraction: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default), of sorted values."""
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _from_bins(counts: Any, edges: Any) -> dict[str, float] | None:
    counts = [float(c) for c in (counts.tolist() if hasattr(counts, "tolist") else counts)]
    edges = [float(e) for e in (edges.tolist() if hasattr(edges, "tolist") else edges)]
    if len(edges) != len(counts) + 1:
        raise ValueError(
            f"np_histogram needs one more bin edge than counts, got {len(counts)} counts and {len(edges)} edges"
        )
    total = sum(c for c in counts if c > 0)
    if not total:
        return None
    filled = [i for i, c in enumerate(counts) if c > 0]
    first, last = filled[0], filled[-1]
    found: dict[str, float] = {}
    for suffix, fraction in QUANTILES:
        if fraction == 0.0:
            found[suffix] = edges[first]
            continue
        if fraction == 1.0:
            found[suffix] = edges[last + 1]
            continue
        target, below = fraction * total, 0.0
        for i in range(first, last + 1):
            count = max(counts[i], 0.0)
            if count and below + count >= target:
                found[suffix] = edges[i] + (edges[i + 1] - edges[i]) * (target - below) / count
                break
            below += count
    return found


class Media:
    """A value Holter does not store (an image, a table, ...): accepted so the script runs; the
    first of each type notes on stderr that it is dropped."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kind = type(self).__name__
        _note_once(
            f"media {kind}",
            f"holter: {kind} values are accepted and not stored (Holter keeps curves, not files); "
            "the numbers logged beside them are kept",
        )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return _ignored  # add_data, add_file, add_column, ...: no-ops, as wandb's disabled mode has them


def _ignored(*args: Any, **kwargs: Any) -> None:
    return None


class Table(Media):
    """wandb's `Table`: accepted, not stored."""


class Image(Media):
    """wandb's `Image`: accepted, not stored."""


class Audio(Media):
    """wandb's `Audio`: accepted, not stored."""


class Video(Media):
    """wandb's `Video`: accepted, not stored."""


class Html(Media):
    """wandb's `Html`: accepted, not stored."""


class Object3D(Media):
    """wandb's `Object3D`: accepted, not stored."""


class Molecule(Media):
    """wandb's `Molecule`: accepted, not stored."""


class Plotly(Media):
    """wandb's `Plotly`: accepted, not stored."""


class Artifact(Media):
    """wandb's `Artifact` (`run.log_artifact(artifact)`): accepted, not stored."""


def expand(name: str, value: Any) -> dict[str, Any] | None:
    """What a non-numeric logged value becomes: a histogram's quantile metrics, nothing for a
    media value, and for a dict its values under `name/key` (wandb keeps a logged dict as a path
    of keys, `{"train": {"loss": 1.0}}` as train.loss in its history; Holter's names spell paths
    with "/"), each expanded the same way; None when it is none of these (the caller reports it
    as not numeric). A dict's leaves come back as they were given: the caller converts them."""
    if isinstance(value, Histogram):
        return value.points(name)
    if isinstance(value, Media):
        return {}
    if isinstance(value, Mapping):
        found: dict[str, Any] = {}
        for key, item in value.items():
            inner = f"{name}/{key}"
            nested = expand(inner, item)
            if nested is None:
                found[inner] = item
            else:
                found.update(nested)
        return found
    return None
