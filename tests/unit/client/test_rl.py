"""`holter.rl.logprob_mismatch`: the same statistics from lists, numpy and torch, masked tokens ignored."""

from __future__ import annotations

import math

import numpy as np
import pytest
from holter.rl import logprob_mismatch
from holter_server.vocabulary import understand

ROLLOUT = [[-1.0, -2.0, -0.5, -3.0], [-0.2, -0.7, -1.5, -9.0]]
TRAINER = [[-1.0, -2.15, -0.5, -2.8], [-0.2, -0.5, -1.5, -1.0]]
MASK = [[1, 1, 1, 1], [1, 1, 1, 0]]  # the last token is padding with a huge gap


class RecordingRun:
    def __init__(self) -> None:
        self.calls: list[tuple[dict, int | None]] = []

    def log(self, metrics, step=None) -> None:  # type: ignore[no-untyped-def]
        self.calls.append((dict(metrics), step))


def expected() -> dict[str, float]:
    deltas = [t - r for tr, rr, mr in zip(TRAINER, ROLLOUT, MASK) for t, r, m in zip(tr, rr, mr) if m]
    gaps = sorted(abs(d) for d in deltas)
    return {
        "logprob_mismatch/abs_diff_mean": sum(gaps) / len(gaps),
        "logprob_mismatch/abs_diff_max": max(gaps),
        "logprob_mismatch/abs_diff_p99": gaps[-1],  # nearest rank of 99% among 7 values is the 7th
        "logprob_mismatch/frac_above_tol": sum(g > 0.1 for g in gaps) / len(gaps),
        "logprob_mismatch/kl_k3": sum(math.exp(d) - 1 - d for d in deltas) / len(deltas),
    }


def test_lists_give_the_masked_statistics() -> None:
    assert logprob_mismatch(ROLLOUT, TRAINER, MASK) == pytest.approx(expected())


def test_numpy_arrays_give_the_same_statistics() -> None:
    result = logprob_mismatch(np.array(ROLLOUT), np.array(TRAINER), np.array(MASK, dtype=bool))
    assert result == pytest.approx(expected())


def test_torch_tensors_give_the_same_statistics() -> None:
    torch = pytest.importorskip("torch")
    result = logprob_mismatch(
        torch.tensor(ROLLOUT, dtype=torch.bfloat16).float(), torch.tensor(TRAINER), torch.tensor(MASK)
    )
    assert result == pytest.approx(expected(), rel=1e-2)


def test_identical_logprobs_give_zero_everywhere() -> None:
    result = logprob_mismatch(ROLLOUT, ROLLOUT)
    assert set(result.values()) == {0.0}


def test_p99_is_the_nearest_rank_percentile() -> None:
    trainer = [i / 1000 for i in range(1000)]
    result = logprob_mismatch([0.0] * 1000, trainer)
    assert result["logprob_mismatch/abs_diff_p99"] == pytest.approx(0.989)


def test_logs_to_the_run_at_the_step_under_the_prefix() -> None:
    run = RecordingRun()
    result = logprob_mismatch(ROLLOUT, TRAINER, MASK, run=run, step=7, prefix="rollout/logprob_mismatch")
    assert run.calls == [(result, 7)]
    assert all(name.startswith("rollout/logprob_mismatch/") for name in result)


def test_logged_names_are_read_as_the_mismatch_signal_by_the_service() -> None:
    names = logprob_mismatch(ROLLOUT, TRAINER)
    assert {understand(name).kind for name in names} == {"logprob_mismatch"}


def test_tolerance_sets_what_counts_as_a_mismatched_token() -> None:
    result = logprob_mismatch([0.0, 0.0, 0.0, 0.0], [0.01, 0.02, 0.3, 0.5], tolerance=0.25)
    assert result["logprob_mismatch/frac_above_tol"] == 0.5


def test_nan_logprob_shows_in_mean_and_max() -> None:
    result = logprob_mismatch([0.0, 0.0], [0.1, math.nan])
    assert math.isnan(result["logprob_mismatch/abs_diff_mean"]) and math.isnan(result["logprob_mismatch/abs_diff_max"])


def test_mismatched_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="shape"):
        logprob_mismatch(np.zeros((2, 3)), np.zeros((3, 2)))


def test_a_mask_that_selects_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="no valid token"):
        logprob_mismatch([0.0, 1.0], [0.0, 1.0], [0, 0])
