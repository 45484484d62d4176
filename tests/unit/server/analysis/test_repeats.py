"""Determinism: runs with the same config, seeds and code are compared value for value; bit-identical
arms of an ablation are called out."""

from __future__ import annotations

import numpy as np
from holter_server.analysis.repeats import environment_changes, first_difference, judge_repeat, same_code
from holter_server.analysis.verdicts import Arm, identical_pairs

STEPS = np.arange(0, 300, 10)
LOSS = 3 - STEPS / 200


def code(commit: str = "1a2b3c4d5e6f", diff: str | None = None, torch: str = "2.13.0") -> dict:
    found: dict = {
        "code": {"commit": commit, "dirty": diff is not None},
        "environment": {"torch": torch, "hostname": "h1"},
    }
    if diff:
        found["code"]["diff_hash"] = diff
    return found


def test_the_same_commit_with_other_local_changes_is_other_code() -> None:
    assert same_code(code(), code()) is True
    assert same_code(code(diff="aa" * 32), code(diff="bb" * 32)) is False
    assert same_code(code(), code(commit="ffff000")) is False
    assert same_code(code(), {"environment": {}}) is None
    assert same_code({"code": {"script_hash": "ab" * 32}}, {"code": {"script_hash": "ab" * 32}}) is True


def test_the_first_difference_is_the_earliest_step_over_every_metric() -> None:
    other = LOSS.copy()
    other[12] += 1e-7
    grads = np.ones(len(STEPS))
    moved = grads.copy()
    moved[20] = 2.0
    found, points, compared = first_difference(
        {"loss": (STEPS, LOSS), "grad_norm": (STEPS, grads)}, {"loss": (STEPS, other), "grad_norm": (STEPS, moved)}
    )
    assert found is not None and (found.metric, found.step) == ("loss", 120) and points == 2 * len(STEPS)
    assert compared == ["grad_norm", "loss"] and found.relative is not None and found.relative < 1e-6


def test_nan_at_the_same_step_is_the_same_value() -> None:
    nan = LOSS.copy()
    nan[-3:] = np.nan
    assert first_difference({"loss": (STEPS, nan)}, {"loss": (STEPS, nan.copy())})[0] is None


def test_repeats_of_the_same_code_that_part_are_not_deterministic_and_say_what_else_differed() -> None:
    other = LOSS.copy()
    other[5:] += 3e-6
    found = judge_repeat(
        "r2", "seed-0 again", code(), code(torch="2.12.0"), {"loss": (STEPS, LOSS)}, {"loss": (STEPS, other)}
    )
    assert found.same_code is True and not found.identical and found.difference.step == 50
    assert found.sentence.startswith(
        "run seed-0 again repeats this run's config, seeds and code (commit 1a2b3c4) but loss first differs at step 50"
    )
    assert ": not deterministic." in found.sentence and "torch 2.13.0 → 2.12.0" in found.sentence
    assert environment_changes(code(), code(torch="2.12.0")) == ["torch 2.13.0 → 2.12.0"]


def test_repeats_of_the_same_code_that_agree_are_deterministic() -> None:
    found = judge_repeat("r2", None, code(), code(), {"loss": (STEPS, LOSS)}, {"loss": (STEPS, LOSS.copy())})
    assert found.identical and found.sentence.endswith(
        f"logged bit-identical loss ({len(STEPS)} points): deterministic"
    )


def test_other_code_that_differs_is_not_called_nondeterministic() -> None:
    found = judge_repeat(
        "r2", None, code(), code(commit="ffff000"), {"loss": (STEPS, LOSS)}, {"loss": (STEPS, LOSS + 1)}
    )
    assert (
        found.same_code is False
        and "not deterministic" not in found.sentence
        and "ran other code (commit ffff000" in found.sentence
    )


def arm(label: str, curves: dict, seeds: dict | None = None) -> Arm:
    return Arm(label, curves, seeds=seeds or {})


def test_arms_whose_seed_pairs_logged_the_same_values_are_a_change_that_did_nothing() -> None:
    a = arm("a", {"a0": (STEPS, LOSS), "a1": (STEPS, LOSS + 0.01)}, {"a0": "s=0", "a1": "s=1"})
    b = arm("b", {"b1": (STEPS, LOSS + 0.01), "b0": (STEPS, LOSS.copy())}, {"b0": "s=0", "b1": "s=1"})
    found = identical_pairs("loss", a, b)
    assert found is not None and found.all_identical and sorted(found.identical) == [("a0", "b0"), ("a1", "b1")]
    assert found.sentence.startswith("every one of the 2 seed pairs logged bit-identical loss")


def test_one_identical_pair_of_several_is_told_as_such_and_none_is_nothing() -> None:
    a = arm("a", {"a0": (STEPS, LOSS), "a1": (STEPS, LOSS + 0.01)}, {"a0": "s=0", "a1": "s=1"})
    b = arm("b", {"b0": (STEPS, LOSS.copy()), "b1": (STEPS, LOSS + 0.02)}, {"b0": "s=0", "b1": "s=1"})
    found = identical_pairs("loss", a, b)
    assert found is not None and not found.all_identical and found.sentence.startswith("1 of the 2 seed pairs")
    c = arm("c", {"c0": (STEPS, LOSS + 1e-9), "c1": (STEPS, LOSS + 0.02)}, {"c0": "s=0", "c1": "s=1"})
    assert identical_pairs("loss", a, c) is None
    lone = identical_pairs("loss", arm("x", {"x": (STEPS, LOSS)}), arm("y", {"y": (STEPS, LOSS.copy())}))
    assert lone is not None and lone.sentence.startswith("runs x and y logged bit-identical loss at all 30 steps")
