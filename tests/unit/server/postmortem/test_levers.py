"""The lever finder recovers planted levers and invents none."""

from __future__ import annotations

import random

import pytest
from holter_server.postmortem.levers import PERMUTATIONS, RunEvents, _permutation_p, find_levers


def sawtooth(period: float, start: int = 100) -> dict:
    return {"metric": "logprob_mismatch", "kind": "sawtooth", "start_step": start, "period": period, "score": 5.0}


def test_a_period_that_tracks_a_parameter_is_named_proportional() -> None:
    rng = random.Random(1)
    runs = [
        RunEvents(
            f"r{n}",
            {"rollouts_num": n, "seed": rng.randint(0, 99), "lr": 1e-6},
            [sawtooth(period=n * 2.0 * rng.uniform(0.97, 1.03))],
        )
        for n in (8, 16, 32, 64, 128)
    ]
    report = find_levers(runs)
    top = report.candidates[0]
    assert (top.key, top.feature, top.relation) == ("rollouts_num", "period", "proportional")
    assert "proportional to rollouts_num across 5 runs" in top.evidence and top.p_value < 0.05
    assert all(c.key != "seed" for c in report.candidates)


def test_a_threshold_on_a_parameter_separates_runs_with_the_event_from_those_without() -> None:
    utilisation = [0.3, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9]
    seeds = [5, 2, 7, 1, 8, 3, 6, 4]  # not in the same order as the utilisation: not confounded
    runs = [
        RunEvents(f"r{i}", {"gpu_memory_utilization": u, "seed": seeds[i]}, [sawtooth(64.0)] if u > 0.55 else [])
        for i, u in enumerate(utilisation)
    ]
    candidates = [c for c in find_levers(runs).candidates if c.feature == "presence"]
    (found,) = [c for c in candidates if c.key == "gpu_memory_utilization"]
    assert found.relation == "separates" and "gpu_memory_utilization above 0.55" in found.evidence
    assert not found.confounded_with


def test_a_categorical_parameter_that_decides_the_failure_is_found() -> None:
    runs = [
        RunEvents(f"r{i}", {"attention": "flash" if i % 2 else "eager", "seed": i}, [sawtooth(64.0)] if i % 2 else [])
        for i in range(8)
    ]
    (found,) = [c for c in find_levers(runs).candidates if c.key == "attention"]
    assert found.relation == "determines" and "'flash'" in found.evidence


def test_no_lever_is_invented_when_failures_are_unrelated_to_the_config() -> None:
    rng = random.Random(7)
    runs = [
        RunEvents(
            f"r{i}",
            {"lr": rng.choice([1e-4, 3e-4, 1e-3]), "seed": i, "batch": rng.choice([32, 64])},
            [sawtooth(rng.uniform(20, 200))] if rng.random() < 0.5 else [],
        )
        for i in range(8)
    ]
    report = find_levers(runs)
    assert report.candidates == [] and "no configuration key" in report.note


def test_keys_that_move_together_are_reported_as_confounded() -> None:
    runs = [RunEvents(f"r{n}", {"rollouts_num": n, "batch_size": n * 4}, [sawtooth(n * 2.0)]) for n in (8, 16, 32, 64)]
    report = find_levers(runs)
    assert ["batch_size", "rollouts_num"] in report.confounded
    named = {c.key: c for c in report.candidates if c.feature == "period"}
    assert named["rollouts_num"].confounded_with == ["batch_size"]


def test_two_runs_are_too_few_to_name_a_lever() -> None:
    runs = [RunEvents("a", {"x": 1}, [sawtooth(10)]), RunEvents("b", {"x": 2}, [sawtooth(20)])]
    report = find_levers(runs)
    assert report.candidates == [] and "at least 3" in report.note


def test_nested_config_keys_are_compared_by_dotted_name() -> None:
    runs = [RunEvents(f"r{n}", {"rollout": {"n": n}}, [sawtooth(n * 3.0)]) for n in (4, 8, 16, 32)]
    assert find_levers(runs).candidates[0].key == "rollout.n"


def test_the_lever_finder_refuses_more_pairs_than_its_cap() -> None:
    from holter_server.postmortem.levers import TooManyPairsError

    runs = [
        RunEvents(
            run_id=f"r{i}",
            config={f"k{j}": i * j for j in range(50)},
            events=[{"metric": "loss", "kind": "divergence", "start_step": 100 * i, "period": None, "score": 1.0}],
        )
        for i in range(1, 5)
    ]
    with pytest.raises(TooManyPairsError, match="HOLTER_MAX_LEVER_PAIRS"):
        find_levers(runs, max_pairs=20)
    assert find_levers(runs, max_pairs=10_000).runs == 4


def test_the_lever_finder_stops_at_its_time_cap_and_says_so() -> None:
    runs = [
        RunEvents(
            run_id=f"r{i}",
            config={f"k{j}": i * j for j in range(50)},
            events=[{"metric": "loss", "kind": "divergence", "start_step": 100 * i, "period": None, "score": 1.0}],
        )
        for i in range(1, 5)
    ]
    assert "HOLTER_MAX_LEVER_SECONDS" in find_levers(runs, max_seconds=0.0).note


def divergence(start: int) -> dict:
    return {"metric": "loss", "kind": "divergence", "start_step": start, "period": None, "score": 1.0}


def moving_together(keys: int, runs: int = 5) -> list[RunEvents]:
    """Runs whose configs hold `keys` keys that all move together (one confounded group)."""
    return [
        RunEvents(f"r{i}", {f"k{j}": i * (j + 1) for j in range(keys)}, [divergence(100 * i)])
        for i in range(1, runs + 1)
    ]


def test_more_config_keys_than_the_cap_are_refused_before_any_grouping() -> None:
    from holter_server.postmortem.levers import TooManyKeysError

    with pytest.raises(TooManyKeysError, match="HOLTER_MAX_LEVER_KEYS"):
        find_levers(moving_together(12_000), max_keys=10_000, max_pairs=10**9)


def test_a_deep_config_is_flattened_without_recursion() -> None:
    deep: dict = {"lr": 0.1}
    for _ in range(5_000):
        deep = {"x": deep}
    runs = [RunEvents(f"r{i}", {"a": deep, "n": i}, [divergence(10 * i)]) for i in range(1, 4)]
    assert "n" in find_levers(runs).varying_keys


def test_a_candidate_names_at_most_twenty_of_its_confounded_keys() -> None:
    from holter_server.postmortem.levers import MAX_PARTNERS

    report = find_levers(moving_together(300), max_keys=10_000, max_pairs=10**9)
    assert report.candidates and len(report.confounded) == 1 and len(report.confounded[0]) == 300
    assert max(len(c.confounded_with) for c in report.candidates) == MAX_PARTNERS == 20


@pytest.mark.timeout(30)
def test_a_key_with_a_value_per_run_is_weighed_without_trying_every_split() -> None:
    """30 runs, a name per run, the divergence in half of them: 2^30 ways to choose groups, which
    the exact count must not try one by one."""
    runs = [RunEvents(f"r{i}", {"name": f"run-{i}", "n": i}, [divergence(10)] if i % 2 else []) for i in range(30)]
    report = find_levers(runs)
    assert report.runs == 30 and "name" in report.varying_keys


def test_the_permutation_p_value_counts_every_pairing_for_few_runs() -> None:
    xs, ys = [1.0, 2.0, 3.0, 4.0, 5.0], [2.1, 3.9, 6.2, 8.0, 9.7]
    # of the 120 pairings only this one and its reverse reach the observed |r|
    assert _permutation_p(xs, ys) == pytest.approx(2 / 120)


def test_the_permutation_p_value_is_sampled_for_many_runs() -> None:
    xs = [float(i) for i in range(12)]
    ys = [2.0 * x + 0.1 * (-1) ** i for i, x in enumerate(xs)]
    # 12! pairings are too many: PERMUTATIONS are drawn, the observed pairing counted among them
    assert _permutation_p(xs, ys) == pytest.approx(1 / (PERMUTATIONS + 1))
    assert _permutation_p(xs, list(reversed(ys))) == pytest.approx(1 / (PERMUTATIONS + 1))
