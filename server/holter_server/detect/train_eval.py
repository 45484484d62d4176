"""Train loss against eval loss: diagnoses no single series can make.

Evals are logged rarely (5-20 points a run), so these rules work on a handful of eval points and
read the train loss where each eval was taken (the median of the last train samples at or before
the eval step):

* `overfitting` — the eval loss turned up for good after its minimum (at least `OVERFIT_MIN_REL`
  above it at the last two evals, rising at most evals since) while the train loss kept falling.
* `too_good` — the train loss sits `GAP_RATIO` times or more below the eval loss at the last
  `GAP_MIN_EVALS` evals: the model fits its training data far better than held-out data
  (memorisation, or eval data unlike train).

Pure: outlines in, events out.
"""

from __future__ import annotations

import re

import numpy as np

from holter_server.detect.events import Event, format_step, format_value
from holter_server.detect.outline import SeriesOutline
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.severities import Level

OVERFIT_MIN_EVALS = 4
OVERFIT_MIN_AFTER = 2  # evals after the minimum
OVERFIT_MIN_REL = 0.05
OVERFIT_MIN_ABS = 1e-3
OVERFIT_MIN_TAU = 0.5  # Kendall's tau of the evals from the minimum on
TRAIN_FALL_REL = 0.02
GAP_RATIO = 10.0
GAP_MIN_ABS = 0.05
GAP_MIN_EVALS = 2
TRAIN_SAMPLES = 5

_SPLIT_WORDS = re.compile(r"(^|[/_.\- ])(train|training|eval|evaluation|val|valid|validation|test)(?=$|[/_.\- ])")


def _pair_key(metric: str) -> str:
    """The name with its train/eval words taken out: 'train/loss' and 'eval/loss' share 'loss'."""
    return re.sub(r"[/_.\- ]+", "_", _SPLIT_WORDS.sub(" ", metric.lower())).strip("_")


def pairs(outlines: list[SeriesOutline]) -> list[tuple[SeriesOutline, SeriesOutline]]:
    """(train, eval) pairs of a run: by name ('loss' ↔ 'eval_loss', 'train/loss' ↔ 'val/loss'),
    or every eval loss with the run's one train loss."""
    trains = [o for o in outlines if o.kind == "loss"]
    evals = [o for o in outlines if o.kind == "eval_loss"]
    found = []
    for ev in evals:
        named = [t for t in trains if _pair_key(t.metric) == _pair_key(ev.metric)]
        if len(named) == 1:
            found.append((named[0], ev))
        elif len(trains) == 1:
            found.append((trains[0], ev))
    return found


def train_eval_findings(outlines: list[SeriesOutline]) -> list[Event]:
    """Overfitting and train-far-below-eval findings for every (train, eval) pair of the run."""
    found: list[Event] = []
    for train, ev in pairs(outlines):
        steps, values = _finite(ev)
        if not len(values):
            continue
        at_eval = np.array([_train_level_at(train, int(s)) for s in steps])
        overfit = _overfitting(train, ev, steps, values, at_eval)
        if overfit is not None:
            found.append(overfit)
        gap = _gap(train, ev, steps, values, at_eval)
        if gap is not None:
            found.append(gap)
    return found


def _finite(outline: SeriesOutline) -> tuple[np.ndarray, np.ndarray]:
    ok = np.isfinite(outline.values)
    return outline.steps[ok], outline.values[ok]


def _train_level_at(train: SeriesOutline, step: int) -> float:
    """Median of the last train samples at or before `step` (NaN when train had not started)."""
    upto = int(np.searchsorted(train.steps, step, side="right"))
    recent = train.values[max(upto - TRAIN_SAMPLES, 0) : upto]
    recent = recent[np.isfinite(recent)]
    return float(np.median(recent)) if len(recent) else float("nan")


def _kendall_tau(values: np.ndarray) -> float:
    """Kendall's tau of values against their order (1 = rising at every step)."""
    n = len(values)
    if n < 2:
        return 0.0
    sign = np.sign(values[None, :] - values[:, None])
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    return float(sign[upper].sum() / upper.sum())


def _overfitting(
    train: SeriesOutline, ev: SeriesOutline, steps: np.ndarray, values: np.ndarray, at_eval: np.ndarray
) -> Event | None:
    if len(values) < OVERFIT_MIN_EVALS:
        return None
    m = int(np.argmin(values))
    after = values[m:]
    if len(after) - 1 < OVERFIT_MIN_AFTER:
        return None
    minimum, last = float(values[m]), float(values[-1])
    need = max(OVERFIT_MIN_REL * abs(minimum), OVERFIT_MIN_ABS)
    held = bool(np.all(values[-OVERFIT_MIN_AFTER:] - minimum >= need))
    if not held or _kendall_tau(after) < OVERFIT_MIN_TAU:
        return None
    train_then, train_now = float(at_eval[m]), float(at_eval[-1])
    if not (np.isfinite(train_then) and np.isfinite(train_now)) or train_now > train_then - TRAIN_FALL_REL * abs(
        train_then
    ):
        return None
    peak = m + int(np.argmax(after))
    rises = int(np.sum(np.diff(after) > 0))
    return Event(
        kind=EventKind.OVERFITTING,
        metric=ev.metric,
        start_step=int(steps[m]),
        end_step=int(steps[-1]),
        severity=Level.WARNING,
        score=float(last / minimum) if minimum > 0 else float(last - minimum),
        peak_step=int(steps[peak]),
        summary=(
            f"{ev.metric} turned up for good from its minimum {format_value(minimum)} at step "
            f"{format_step(int(steps[m]))} "
            f"to {format_value(last)} at step {format_step(int(steps[-1]))} ({(last - minimum) / abs(minimum):+.0%}, "
            "up at "
            f"{rises} of the {len(after) - 1} evals since) while {train.metric} kept falling "
            f"({format_value(train_then)} → {format_value(train_now)}): the model is overfitting its training data"
        ),
        details={
            "signals": [train.metric, ev.metric],
            "eval_minimum": minimum,
            "eval_last": last,
            "train_at_minimum": train_then,
            "train_last": train_now,
            "evals_after_minimum": len(after) - 1,
        },
    )


def _gap(
    train: SeriesOutline, ev: SeriesOutline, steps: np.ndarray, values: np.ndarray, at_eval: np.ndarray
) -> Event | None:
    known = np.isfinite(at_eval)
    steps, values, at_eval = steps[known], values[known], at_eval[known]
    if len(values) < GAP_MIN_EVALS:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(at_eval > 0, values / at_eval, np.where(values > 0, np.inf, 1.0))
    far = (ratio >= GAP_RATIO) & (values - at_eval >= GAP_MIN_ABS)
    if not far[-GAP_MIN_EVALS:].all():
        return None
    near = np.flatnonzero(~far)
    first = int(near[-1]) + 1 if len(near) else 0
    now = float(ratio[-1])
    times = f"{now:,.0f}x" if np.isfinite(now) else "infinitely"
    return Event(
        kind=EventKind.TOO_GOOD,
        metric=train.metric,
        start_step=int(steps[first]),
        end_step=int(steps[-1]),
        severity=Level.WARNING,
        score=float(min(now, 1e6)),
        peak_step=int(steps[-1]),
        summary=(
            f"{train.metric} is {times} below {ev.metric} at step {format_step(int(steps[-1]))} "
            f"({format_value(float(at_eval[-1]))} vs {format_value(float(values[-1]))}), and at least "
            f"{GAP_RATIO:.0f}x below it "
            f"since step {format_step(int(steps[first]))}: the model fits its training data far better than held-out "
            "data "
            f"(memorisation, or eval data unlike train)"
        ),
        details={
            "cause": "train_far_below_eval",
            "signals": [train.metric, ev.metric],
            "ratio": float(min(now, 1e6)),
            "train_last": float(at_eval[-1]),
            "eval_last": float(values[-1]),
        },
    )
