"""Run-level diagnoses: a train loss read against its eval loss (a handful of eval points), and a
loss printing exactly 0 read against the gradient norm."""

from __future__ import annotations

import numpy as np
from detect_curves import decaying_loss
from holter_server.detect import IncrementalDetector
from holter_server.detect.findings import SeriesSnapshot, cross_signal_findings
from holter_server.detect.train_eval import pairs


def detector(metric: str, steps, values, kind: str | None = None) -> IncrementalDetector:
    d = IncrementalDetector(metric, kind=kind)
    d.add(np.asarray(steps), np.asarray(values, dtype=float))
    return d


def findings(*detectors: IncrementalDetector, others: tuple[str, ...] = ()) -> list:
    events = [e for d in detectors for e in d.events]
    return cross_signal_findings(events, [d.snapshot() for d in detectors] + [SeriesSnapshot(m, 1.0) for m in others])


def train_loss(n: int = 2000, floor: float = 0.05) -> np.ndarray:
    """A fine-tune's train loss falling from ~2 toward `floor`, logged every 10 steps."""
    t = np.arange(n)
    return (floor + 2.0 * np.exp(-t / 300)) * (1 + np.random.default_rng(1).normal(0, 0.02, n))


EVAL_STEPS = np.arange(2000, 20001, 2000)  # ten evals


def test_eval_loss_turning_up_for_good_while_train_falls_is_overfitting() -> None:
    evals = np.array([1.10, 0.95, 0.92, 0.96, 1.01, 1.08, 1.12, 1.19, 1.24, 1.30])
    found = findings(detector("loss", np.arange(2000) * 10, train_loss()), detector("eval_loss", EVAL_STEPS, evals))
    (overfit,) = [f for f in found if f.kind == "overfitting"]
    assert overfit.metric == "eval_loss" and overfit.start_step == 6000 and overfit.severity == "warning"
    assert "0.92" in overfit.summary and "loss kept falling" in overfit.summary


def test_five_evals_are_enough_to_name_overfitting() -> None:
    evals = np.array([0.321, 0.358, 0.394, 0.412, 0.420])
    found = findings(
        detector("loss", np.arange(2000) * 10, train_loss(floor=0.001)),
        detector("eval_loss", np.arange(4000, 20001, 4000), evals),
    )
    assert "overfitting" in [f.kind for f in found]


def test_eval_loss_rising_with_the_train_loss_is_not_overfitting() -> None:
    rising = train_loss()[::-1].copy()
    evals = np.array([1.10, 0.95, 0.92, 0.96, 1.01, 1.08, 1.12, 1.19, 1.24, 1.30])
    found = findings(detector("loss", np.arange(2000) * 10, rising), detector("eval_loss", EVAL_STEPS, evals))
    assert "overfitting" not in [f.kind for f in found]


def test_eval_loss_wobbling_at_its_floor_is_not_overfitting() -> None:
    evals = np.array([1.62, 1.41, 1.30, 1.22, 1.17, 1.14, 1.13, 1.125, 1.128, 1.126])
    found = findings(
        detector("loss", np.arange(2000) * 10, train_loss(floor=1.0)), detector("eval_loss", EVAL_STEPS, evals)
    )
    assert found == []


def test_one_bad_eval_at_the_end_is_not_overfitting() -> None:
    evals = np.array([1.10, 0.95, 0.90, 0.88, 0.87, 0.86, 0.85, 0.85, 0.84, 1.05])
    found = findings(detector("loss", np.arange(2000) * 10, train_loss()), detector("eval_loss", EVAL_STEPS, evals))
    assert "overfitting" not in [f.kind for f in found]


def test_train_loss_orders_of_magnitude_below_eval_is_too_good() -> None:
    evals = np.full(10, 0.4)
    found = findings(
        detector("loss", np.arange(2000) * 10, train_loss(floor=0.0002)), detector("eval_loss", EVAL_STEPS, evals)
    )
    (gap,) = [f for f in found if f.kind == "too_good"]
    assert gap.metric == "loss" and gap.details["cause"] == "train_far_below_eval" and gap.details["ratio"] > 100
    assert "below eval_loss" in gap.summary


def test_train_loss_a_little_below_eval_is_fine() -> None:
    evals = np.linspace(1.3, 0.12, 10)
    found = findings(detector("loss", np.arange(2000) * 10, train_loss()), detector("eval_loss", EVAL_STEPS, evals))
    assert found == []


def test_train_and_eval_series_pair_by_name_and_else_with_the_one_train_loss() -> None:
    steps = np.arange(10)
    outlines = [
        detector(m, steps, np.ones(10)).outline_snapshot()
        for m in ("train/loss", "eval/loss", "val/loss", "train/aux_loss")
    ]
    assert [(t.metric, e.metric) for t, e in pairs(outlines)] == [
        ("train/loss", "eval/loss"),
        ("train/loss", "val/loss"),
    ]
    single = [detector(m, steps, np.ones(10)).outline_snapshot() for m in ("loss", "eval_g0_loss", "eval_g1_loss")]
    assert [(t.metric, e.metric) for t, e in pairs(single)] == [("loss", "eval_g0_loss"), ("loss", "eval_g1_loss")]


def test_loss_printing_exactly_zero_beside_a_zero_gradient_norm_is_a_critical_broken_run() -> None:
    steps = np.arange(1, 7)
    found = findings(detector("loss", steps, np.zeros(6)), detector("grad_norm", steps, np.zeros(6)))
    (broken,) = [f for f in found if f.kind == "plateau"]
    assert broken.metric == "loss" and broken.severity == "critical" and "grad_norm" in broken.summary


def test_loss_printing_exactly_zero_beside_a_nan_gradient_norm_is_a_critical_broken_run() -> None:
    steps = np.arange(1, 21)
    found = findings(detector("loss", steps, np.zeros(20)), detector("grad_norm", steps, np.full(20, np.nan)))
    assert [(f.kind, f.severity) for f in found if f.metric == "loss"] == [("plateau", "critical")]


def test_grpo_loss_printing_zero_while_the_gradient_norm_moves_is_fine() -> None:
    steps = np.arange(1, 25)
    grad = 0.5 + 0.1 * np.sin(steps)
    found = findings(detector("loss", steps, np.zeros(24)), detector("grad_norm", steps, grad), others=("kl", "reward"))
    assert [f for f in found if f.kind == "plateau"] == []


def test_loss_printing_exactly_zero_with_no_gradient_norm_to_tell_is_a_warning() -> None:
    (found,) = findings(detector("loss", np.arange(1, 30), np.zeros(29)))
    assert (found.kind, found.severity) == ("plateau", "warning")


def test_a_loss_that_reaches_zero_after_learning_is_no_broken_run() -> None:
    values = decaying_loss(300)
    values[200:] = 0.0
    assert [f for f in findings(detector("loss", np.arange(300), values)) if f.kind == "plateau"] == []
