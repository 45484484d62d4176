"""The ranks of a distributed job read side by side (detect/ranks.py): pure, states in, events out."""

from __future__ import annotations

import math
import random

from holter_server.detect.ranks import RankState, find_outliers, find_stopped, find_straggler, hang_threshold


def timed(rank: int, compute: float, wait: float, *, host: str = "node-0", steps: int = 200) -> RankState:
    return RankState(
        rank=rank,
        status="running",
        host=host,
        step=500,
        quiet_s=0.1,
        silent_s=1.0,
        timing={
            "steps": steps,
            "first_step": 300,
            "last_step": 499,
            "step_s": compute + wait,
            "wait_s": wait,
            "compute_s": compute,
        },
        world_size=4,
    )


def test_the_rank_that_computes_longest_and_waits_least_is_the_straggler() -> None:
    ranks = [timed(0, 0.012, 0.045), timed(1, 0.011, 0.046), timed(2, 0.052, 0.004), timed(3, 0.012, 0.045)]
    found = find_straggler(ranks)
    assert found is not None and found.ranks == [2]
    assert found.event.kind == "straggler" and found.event.severity == "warning"
    assert found.event.summary.startswith("rank 2 on host node-0 computes")
    assert found.event.details["share_of_job"] > 0.5  # 40 ms of every ~57 ms step


def test_ranks_within_their_noise_have_no_straggler() -> None:
    noise = random.Random(3)
    ranks = [timed(r, 0.020 + noise.uniform(-0.001, 0.001), 0.005 + noise.uniform(0, 0.001)) for r in range(8)]
    assert find_straggler(ranks) is None


def test_a_rank_that_computes_longer_but_also_waits_longer_is_not_blamed() -> None:
    # every rank waits for the slowest: the one computing longest must also wait least to be it
    ranks = [timed(0, 0.012, 0.010), timed(1, 0.012, 0.010), timed(2, 0.030, 0.020), timed(3, 0.012, 0.010)]
    assert find_straggler(ranks) is None


def test_a_slow_node_is_named_by_its_host_with_all_its_ranks() -> None:
    ranks = [timed(r, 0.010, 0.030, host="fast-a") for r in range(4)]
    ranks += [timed(r, 0.010, 0.030, host="fast-b") for r in range(4, 8)]
    ranks += [timed(r, 0.040, 0.001, host="slow-c") for r in range(8, 12)]
    ranks += [timed(r, 0.010, 0.030, host="fast-d") for r in range(12, 16)]
    found = find_straggler(ranks)
    assert found is not None and found.ranks == [8, 9, 10, 11]
    assert found.event.summary.startswith("ranks 8–11 on host slow-c compute")


def test_a_rank_with_too_few_steps_timed_is_not_judged() -> None:
    ranks = [timed(0, 0.012, 0.045, steps=5), timed(1, 0.050, 0.001, steps=5), timed(2, 0.012, 0.045, steps=5)]
    assert find_straggler(ranks) is None


def waiting(rank: int, quiet: float, *, step: int = 100) -> RankState:
    return RankState(
        rank=rank,
        status="running",
        host="node-0",
        step=step,
        quiet_s=quiet,
        silent_s=2.0,
        collective="all_reduce (DDP gradients)",
        collective_s=quiet,
        timing={"steps": 99, "first_step": 1, "last_step": 99, "step_s": 0.05, "wait_s": 0.01, "compute_s": 0.04},
    )


STUCK_STACK = [
    {"file": "/job/train.py", "line": 88, "function": "main", "code": "loss = model(x)"},
    {"file": "/job/train.py", "line": 41, "function": "forward", "code": "time.sleep(3600)"},
]


def stuck(rank: int, quiet: float) -> RankState:
    return RankState(
        rank=rank, status="running", host="node-1", step=100, quiet_s=quiet, silent_s=2.0, stack=STUCK_STACK
    )


def test_a_job_stopped_with_three_ranks_in_a_collective_names_the_fourth_and_where_it_is() -> None:
    found = find_stopped([waiting(0, 25), waiting(1, 25), waiting(2, 25), stuck(3, 25)])
    assert found is not None and found.event.kind == "rank_hung" and found.ranks == [3]
    assert found.event.severity == "critical"
    assert found.event.summary == (
        "ranks 0, 1 and 2 wait in all_reduce (DDP gradients) since step 100 (25 s); rank 3 on host node-1 is in "
        "`forward` (train.py:41: time.sleep(3600)) and has not reached it"
    )


def test_a_job_quiet_for_less_than_its_threshold_is_not_hung() -> None:
    ranks = [waiting(0, 8), waiting(1, 8), stuck(2, 8)]
    assert hang_threshold(ranks) == 10.0
    assert find_stopped(ranks) is None


def test_ranks_all_paused_outside_any_collective_are_not_hung() -> None:
    # every rank evaluating or saving a checkpoint: a pause, not a hang
    assert find_stopped([stuck(0, 60), stuck(1, 60)]) is None


def test_ranks_all_waiting_name_the_ones_at_an_earlier_step() -> None:
    found = find_stopped([waiting(0, 30, step=101), waiting(1, 30, step=101), waiting(2, 30, step=100)])
    assert found is not None and found.ranks == [2]
    assert "rank 2 waits at an earlier step" in found.event.summary


def test_a_rank_silent_without_finishing_while_the_others_crashed_is_lost() -> None:
    gone = RankState(rank=3, status="running", host="node-1", step=60, quiet_s=30, silent_s=30, interval_s=5)
    crashed = [
        RankState(rank=r, status="crashed", host="node-0", reason="RuntimeError: Connection closed by peer")
        for r in range(3)
    ]
    found = find_stopped([*crashed, gone])
    assert found is not None and found.event.kind == "rank_lost" and found.ranks == [3]
    assert found.event.summary.startswith("rank 3 on host node-1 went silent at step 60 without finishing")
    assert "ranks 0, 1 and 2 crashed after it (RuntimeError: Connection closed by peer)" in found.event.summary


def test_every_rank_silent_at_once_is_no_lost_rank() -> None:
    # the job or the way to it is gone: a stall of the run, not one rank's death
    silent = [RankState(rank=r, status="running", step=60, quiet_s=40, silent_s=40) for r in range(4)]
    assert find_stopped(silent) is None


def test_a_rank_that_never_beats_is_never_silent() -> None:
    # a rank read from its log (holter follow) has no beats: its silence says nothing
    followed = [RankState(rank=r, status="running", step=10, quiet_s=None, silent_s=None) for r in range(3)]
    assert find_stopped(followed) is None


def losses(ranks: int, steps: int, *, seed: int = 0) -> dict[int, dict[int, float]]:
    noise = random.Random(seed)
    return {r: {s: 2.0 * math.exp(-s / 300) + 0.3 + noise.gauss(0, 0.05) for s in range(steps)} for r in range(ranks)}


def test_a_rank_non_finite_where_its_peers_are_finite_is_named_at_that_step() -> None:
    series = losses(4, 100)
    for step in range(80, 100):
        for rank in range(4):
            series[rank][step] = math.nan if rank == 1 or step > 80 else series[rank][step]
    (found,) = find_outliers(series, metric="loss", label="loss", hosts={1: "node-0"})
    assert found.ranks == [1] and found.event.start_step == 80 and found.event.severity == "critical"
    assert found.event.summary.startswith("rank 1 on host node-0: loss NaN at step 80 while its peers' are finite")
    assert found.event.details["cause"] == "nonfinite"


def test_a_rank_whose_loss_sits_apart_from_its_peers_is_named_with_the_gap() -> None:
    series = losses(8, 150)
    series[5] = {step: value + 0.4 for step, value in series[5].items()}  # a bad shard: its loss stays higher
    (found,) = find_outliers(series, metric="loss", label="loss")
    assert found.ranks == [5] and found.event.severity == "warning"
    assert found.event.summary.startswith("rank 5: loss above its peers' over the last 150 steps")


def test_healthy_ranks_are_left_alone() -> None:
    for seed in range(20):
        assert find_outliers(losses(8, 200, seed=seed), metric="loss", label="loss") == []
    assert find_outliers(losses(4, 200, seed=1), metric="loss", label="loss") == []


def test_two_ranks_alone_cannot_say_which_of_them_is_apart() -> None:
    series = losses(2, 100)
    series[1] = {step: value + 1.0 for step, value in series[1].items()}
    assert find_outliers(series, metric="loss", label="loss") == []


def test_a_straggler_among_a_thousand_ranks_is_named() -> None:
    noise = random.Random(1)
    ranks = [timed(r, 0.020 + noise.uniform(-0.001, 0.001), 0.030, host=f"node-{r // 8}") for r in range(1024)]
    ranks[517] = timed(517, 0.045, 0.004, host="node-64")
    found = find_straggler(ranks)
    assert found is not None and found.ranks == [517]


def test_many_lost_ranks_make_a_key_the_store_can_hold() -> None:
    # issue 43's bench: 95 lost ranks made a key past events.event_key's 400 characters
    lost = [
        RankState(rank=r, status="running", step=60, quiet_s=30, silent_s=30, interval_s=5) for r in range(1000, 1300)
    ]
    ended = [RankState(rank=r, status="crashed", reason="x") for r in range(1000)]
    found = find_stopped([*ended, *lost])
    assert found is not None and len(found.key) <= 400 and found.ranks == list(range(1000, 1300))


def test_most_of_a_running_job_silent_at_once_is_the_services_lag_not_lost_ranks() -> None:
    # a service behind on its beats sees most ranks late together: no rank is dead for that
    late = [RankState(rank=r, status="running", step=60, quiet_s=1, silent_s=40, interval_s=5) for r in range(600)]
    heard = [
        RankState(rank=r, status="running", step=60, quiet_s=1, silent_s=2, interval_s=5) for r in range(600, 1024)
    ]
    assert find_stopped([*late, *heard]) is None
    one_dead = [*heard, late[0]]
    found = find_stopped(one_dead)
    assert found is not None and found.event.kind == "rank_lost" and found.ranks == [0]


def test_ranks_stopped_after_the_lost_one_are_dropped_from_its_finding_in_place() -> None:
    # rank 3 died at step 60; torchrun stopped the others, whose "crashed" came late on a busy box
    first = find_stopped(
        [
            RankState(rank=1, status="crashed", reason="SIGTERM", step=61),
            *(RankState(rank=r, status="running", step=61, silent_s=20, interval_s=5) for r in (0, 2)),
            RankState(rank=3, status="running", step=60, silent_s=22, interval_s=5),
        ]
    )
    later = find_stopped(
        [
            *(RankState(rank=r, status="crashed", reason="SIGTERM", step=61) for r in (0, 1, 2)),
            RankState(rank=3, status="running", step=60, silent_s=30, interval_s=5),
        ]
    )
    assert first is not None and later is not None
    assert later.ranks == [3] and later.key == first.key  # one event, now naming rank 3 alone


def test_a_rank_killed_later_in_the_jobs_teardown_is_not_another_lost_rank() -> None:
    # rank 3 died at step 60; rank 2, held in the all-reduce by it, could not run its handler and
    # torchrun killed it 30 s later: it went quiet long after rank 3, while the job was torn down
    found = find_stopped(
        [
            *(RankState(rank=r, status="crashed", reason="SIGTERM", step=61) for r in (0, 1)),
            RankState(rank=2, status="running", step=61, silent_s=22, interval_s=5),
            RankState(rank=3, status="running", step=60, silent_s=52, interval_s=5),
        ]
    )
    assert found is not None and found.ranks == [3]


def test_two_ranks_lost_apart_in_a_job_still_running_are_both_named() -> None:
    # no rank has ended: nothing is being torn down, and a second loss is a loss
    found = find_stopped(
        [
            *(RankState(rank=r, status="running", step=200, silent_s=1, interval_s=5) for r in (0, 1, 4, 5)),
            RankState(rank=2, status="running", step=150, silent_s=22, interval_s=5),
            RankState(rank=3, status="running", step=60, silent_s=600, interval_s=5),
        ]
    )
    assert found is not None and found.ranks == [2, 3]
