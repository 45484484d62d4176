"""The ranks of a distributed job, as the service names them.

A job of many ranks is one run (shared/DESIGN.md). Rank 0's metrics are the run's curves; what
rank r > 0 logs as `loss` is stored as `holter/rank/<r>/loss`, the rank's own series beside the
run's (the client names it so: client/holter/job.py `rank_series`, the wire protocol). The rank
is a dimension of a series, read back from its name here and nowhere else; the run's own
listings leave these series out, and the ranks watch (services/ranks.py) reads them across ranks.

Each rank also logs its timings under `holter/dist/` (client/holter/ranks.py): the whole step,
the part of it blocked in collectives waiting for the other ranks, the rest (its own work), and
its gradient norm before the all-reduce.
"""

from __future__ import annotations

import re

RANK_PREFIX = "holter/rank/"
DIST_PREFIX = "holter/dist/"
STEP_S = "holter/dist/step_s"
WAIT_S = "holter/dist/wait_s"
COMPUTE_S = "holter/dist/compute_s"
LOCAL_GRAD_NORM = "holter/dist/local_grad_norm"
# The timings the ranks view draws as a rank × step heatmap (the straggler is a stripe), in order.
TIMINGS: tuple[str, ...] = (COMPUTE_S, WAIT_S, STEP_S)
_RANK_SERIES = re.compile(r"^holter/rank/(\d{1,7})/(.+)$", re.DOTALL)


def rank_series(name: str, rank: int) -> str:
    """The name of rank `rank`'s series of `name`: `name` itself on rank 0, `holter/rank/3/name` on 3."""
    return name if rank == 0 else f"{RANK_PREFIX}{rank}/{name}"


def rank_of(name: str) -> tuple[int, str] | None:
    """(rank, the metric's own name) of a rank's series; None for a run's own series (rank 0's)."""
    found = _RANK_SERIES.match(name)
    return (int(found.group(1)), found.group(2)) if found else None


def is_rank_series(name: str) -> bool:
    """Whether `name` is a rank's series other than rank 0's (`holter/rank/<r>/...`)."""
    return name.startswith(RANK_PREFIX)


def rank_list(ranks: list[int], limit: int = 8) -> str:
    """Ranks as a person reads them: "rank 2", "ranks 0, 1 and 3", "ranks 0–15", "12 ranks (0, 1, ... 63)"."""
    ordered = sorted(set(ranks))
    if len(ordered) == 1:
        return f"rank {ordered[0]}"
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 3:
        return f"ranks {ordered[0]}–{ordered[-1]}"
    if len(ordered) > limit:
        shown = ", ".join(str(r) for r in ordered[: limit - 1])
        return f"{len(ordered)} ranks ({shown}, ... {ordered[-1]})"
    return "ranks " + ", ".join(str(r) for r in ordered[:-1]) + f" and {ordered[-1]}"
