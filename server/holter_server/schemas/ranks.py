"""API schemas for the ranks of a distributed job: what a rank says when it joins (`RankJoin`,
inside `RunCreate`) and in its beats (`RankBeat`), and what the API shows (`RankPublic`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from holter_server.schemas.points import Step

MAX_RANK = 1_048_575  # a world of a million ranks is beyond any job; a bound keeps the integer sane
Rank = Field(ge=0, le=MAX_RANK)


class RankJoin(BaseModel):
    """Which rank of which job the creating process is (client/holter/job.py reads it from the
    launcher's environment): every rank of the job joins the same run."""

    model_config = ConfigDict(extra="forbid")

    rank: int = Rank
    world_size: int = Field(ge=1, le=MAX_RANK + 1)
    local_rank: int | None = Field(default=None, ge=0, le=MAX_RANK)
    node_rank: int | None = Field(default=None, ge=0, le=MAX_RANK)
    host: str = Field(default="", max_length=256)
    pid: int | None = Field(default=None, ge=0, le=2**40)
    launcher: str | None = Field(default=None, max_length=32, description="torchrun, slurm, mpi or env")
    job: str | None = Field(default=None, max_length=256, description="the job's identity, the same on every rank")
    restart: int = Field(default=0, ge=0, le=1_000_000, description="the launcher's restarts of the job so far")
    beats: bool = Field(
        default=True,
        description="false: the rank is read from its log (`holter follow`) and sends no beat: "
        "its silence says nothing",
    )


class StackFrame(BaseModel):
    """One frame of a rank's main thread: where it stands."""

    model_config = ConfigDict(extra="forbid")

    file: str = Field(max_length=512)
    line: int = Field(ge=0, le=2**31)
    function: str = Field(max_length=256)
    code: str = Field(default="", max_length=512)


class Collective(BaseModel):
    """The collective a rank is inside, and for how long."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128)
    since_s: float = Field(ge=0, le=1e9)


class RankTiming(BaseModel):
    """A rank's recent steps (up to its last 200): the medians of the whole step, its wait in
    collectives for the other ranks, and its own work before them."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(ge=1, le=1_000_000)
    first_step: Step
    last_step: Step
    step_s: float = Field(ge=0, le=1e7)
    wait_s: float = Field(ge=0, le=1e7)
    compute_s: float = Field(ge=-1e7, le=1e7)


class RankBeat(BaseModel):
    """Where a rank stands, sent every few seconds from its background thread (also while its
    main thread is stuck): the step it is in and how long ago that step moved, the collective it is
    inside, its timings, and its main thread's top frames when its step has stopped moving."""

    model_config = ConfigDict(extra="forbid")

    step: Step
    quiet_s: float = Field(default=0.0, ge=0, le=1e9, description="seconds since its step last moved")
    interval_s: float = Field(default=5.0, gt=0, le=3600, description="seconds until its next beat")
    collective: Collective | None = None
    stack: list[StackFrame] | None = Field(default=None, max_length=32, description="outermost first")
    timing: RankTiming | None = None


class RankPublic(BaseModel):
    """One rank of the run as the service last heard it. `alive`: it beat within three of its
    intervals (a finished rank is not alive)."""

    rank: int
    world_size: int | None
    local_rank: int | None
    node_rank: int | None
    host: str | None
    pid: int | None
    launcher: str | None
    status: str = Field(description="running, finished or crashed (the rank's own)")
    reason: str | None = Field(default=None, description="why it crashed, as it said")
    alive: bool
    joined_at: datetime
    beat_at: datetime | None
    finished_at: datetime | None
    step: int | None
    step_at: datetime | None
    collective: str | None
    collective_since: datetime | None
    stack: list[dict[str, Any]] | None
    timing: dict[str, Any] | None


class RanksPublic(BaseModel):
    """The run's ranks, by rank, with the job they belong to."""

    run_id: str
    world_size: int | None = Field(description="the job's number of ranks, as its ranks said")
    launcher: str | None
    job: str | None
    hosts: dict[str, list[int]] = Field(description="each host with the ranks on it")
    data: list[RankPublic]


class RankMatrixPublic(BaseModel):
    """One metric across the ranks as a ranks × step-buckets matrix (the ranks view's heatmap)."""

    run_id: str
    metric: str
    stat: str
    ranks: list[int]
    bucket_width: int
    bucket_starts: list[int]
    values: list[list[float | None]]
