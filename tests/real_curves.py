"""The corpus of real public training curves in tests/data/real_curves, with labels and sources.

Each series is a committed `step,value` CSV; `labels.json` says where it came from, what the source says
happened, and what Holter should make of it (see tests/data/real_curves/README.md).
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

CORPUS = Path(__file__).resolve().parent / "data" / "real_curves"

# Label vocabulary -> the classifier event kind it should produce (None: nothing that should alarm).
LABEL_KINDS: dict[str, str | None] = {
    "spike_recoverable": "spike",
    "divergence_nan": "divergence",
    "divergence_nonfinite": "divergence",
    "divergence_overfitting": "divergence",
    "divergence_finite": "divergence",
    "flat_zero_gradient": "plateau",
    "plateau_stuck": "plateau",
    "train_far_below_eval": "too_good",
    "too_good": "too_good",
    "periodic_spike": "sawtooth",
    "healthy": None,
    "healthy_decay": None,
    "benign_upward_drift": None,
    "level_shift_benign": None,
    "plateau_converged": None,
}

# Labels that name a fault; a series carrying none of them is a healthy series (recoverable spikes and
# periodic slow steps are reported, never alarmed on).
PROBLEM_LABELS = frozenset(
    {
        "divergence_nan",
        "divergence_nonfinite",
        "divergence_overfitting",
        "divergence_finite",
        "flat_zero_gradient",
        "plateau_stuck",
        "train_far_below_eval",
        "too_good",
    }
)

# What Holter should read a series as (the `kind` argument of its classifier). An RL policy or
# value loss is `policy_loss`, as the vocabulary reads it: it is not a language-model loss that
# should only fall (a PPO surrogate swings around zero; a critic's loss grows with the returns).
SERIES_KINDS = frozenset(
    {
        "loss",
        "eval_loss",
        "grad_norm",
        "activation_norm",
        "logprob_mismatch",
        "throughput",
        "mfu",
        "step_time",
        "policy_loss",
        "other",
    }
)


@dataclass(frozen=True)
class Label:
    """One labelled event or regime of a series, inclusive step window."""

    kind: str
    start_step: int
    end_step: int
    note: str
    period: float | None = None
    # False when the source says the event happened but the logged values cannot show it (an
    # intra-day NaN in a series of end-of-day values); `not_in_data_because` says why
    in_data: bool = True
    not_in_data_because: str | None = None


@dataclass(frozen=True)
class RealSeries:
    """One real metric series: where it came from, what it is, and what the source says happened."""

    file: str
    metric_name: str
    kind: str
    run: str
    framework: str | None
    labels: tuple[Label, ...]
    source: str
    evidence: str

    @property
    def name(self) -> str:
        """The file name without `.csv`."""
        return self.file.removesuffix(".csv")

    @property
    def healthy(self) -> bool:
        """True when no label names a fault."""
        return not any(label.kind in PROBLEM_LABELS for label in self.labels)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Steps (int64) and values (float64, NaN/inf as logged) of the series."""
        return read_curve(CORPUS / self.file)


def read_curve(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Steps and values of a `step,value` CSV; steps must be integers, values floats (`nan`, `inf` allowed)."""
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        if header != ["step", "value"]:
            raise ValueError(f"{path.name}: header is {header}, expected ['step', 'value']")
        rows = list(reader)
    steps = np.array([int(step) for step, _ in rows], dtype=np.int64)
    values = np.array([float(value) for _, value in rows], dtype=np.float64)
    return steps, values


@cache
def load_corpus() -> tuple[RealSeries, ...]:
    """Every series of the corpus, in file-name order."""
    entries = json.loads((CORPUS / "labels.json").read_text())
    return tuple(
        RealSeries(
            file=file,
            metric_name=entry["metric_name"],
            kind=entry["kind"],
            run=entry["run"],
            framework=entry.get("framework"),
            labels=tuple(Label(**label) for label in entry["labels"]),
            source=entry["source"],
            evidence=entry["evidence"],
        )
        for file, entry in sorted(entries.items())
    )


def load_series(name: str) -> RealSeries:
    """One series by file name, with or without `.csv`."""
    file = name if name.endswith(".csv") else f"{name}.csv"
    for series in load_corpus():
        if series.file == file:
            return series
    raise KeyError(f"no series {file!r} in {CORPUS}")


def runs() -> dict[str, tuple[RealSeries, ...]]:
    """The series grouped by run id, so that train/eval pairs and an RL run's metrics are read together."""
    grouped: dict[str, list[RealSeries]] = defaultdict(list)
    for series in load_corpus():
        grouped[series.run].append(series)
    return {run: tuple(members) for run, members in sorted(grouped.items())}


def healthy_runs(min_steps: int = 0) -> dict[str, tuple[RealSeries, ...]]:
    """The runs every series of which is healthy, and whose logged steps reach `min_steps` (the
    issue's "healthy runs of 5,000 steps or more" are counted as runs, not as series)."""
    return {
        run: members
        for run, members in runs().items()
        if all(s.healthy for s in members) and max(int(s.arrays()[0][-1]) for s in members) >= min_steps
    }
