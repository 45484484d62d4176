"""The ranks of a distributed job's run: joining, beats, each rank's end and the run's, what the
API shows of them, and the ranks watch that reads them side by side (detect/ranks.py).

A job is one run. Each rank joins it when it registers (`RunCreate.rank`), beats every few
seconds, and ends its own part; the run is finished when rank 0 says so or every rank has, and
crashed as soon as any rank crashed. The ranks watch (a loop, `RankWatch` in services/loops.py)
reads every active job's ranks each pass: the straggler and the stopped job from the ranks'
rows alone (a thousand ranks are a thousand small rows), and the rank out of band from the
ranks' recent losses and gradient norms, read only when the job's steps moved.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from holter_server.detect import ranks as rank_rules
from holter_server.detect.ranks import RankFinding, RankState
from holter_server.schemas.ranks import RankBeat, RankJoin
from holter_server.services import lifecycle, reads
from holter_server.services.alerting import alert_on_event
from holter_server.services.kinds import run_metric_kinds
from holter_server.store import claims
from holter_server.store import events as events_store
from holter_server.store import points as points_store
from holter_server.store import ranks as ranks_store
from holter_server.store import runs as runs_store
from holter_server.store.database import session_scope
from holter_server.store.models import RankRow, RunRow
from holter_server.store.runs import now
from holter_server.vocabulary.ranks import LOCAL_GRAD_NORM, rank_series
from holter_server.vocabulary.statuses import RunStatus

DETECTOR = "ranks"  # who found the ranks' events (events.detector_version)
ACTIVE_FOR = timedelta(minutes=30)  # a job whose ranks said nothing for this long is left alone
OUTLIER_STEPS = 200  # recent steps of each rank's loss and gradient norm read for the band
OUTLIER_EVERY_S = 5.0  # a job's series are read at most this often
MAX_RUNS_PER_PASS = 200
# what the band of ranks is read on: the run's losses, and each rank's gradient norm before the all-reduce
OUTLIER_KINDS = {"loss": "loss", "eval_loss": "eval loss"}


def join(*, session: Session, run: RunRow, joined: RankJoin) -> tuple[RankRow, bool]:
    """Record that a rank joined the run; returns (its row, whether it had joined before)."""
    fields = joined.model_dump(exclude={"rank"})
    return ranks_store.join_rank(session=session, run_id=run.id, rank=joined.rank, fields=fields)


def has_joined(*, session: Session, run_id: str, rank: int) -> bool:
    """Whether rank `rank` has joined the run before."""
    return ranks_store.get_rank(session=session, run_id=run_id, rank=rank) is not None


def record_beat(*, session: Session, run_id: str, rank: int, beat: RankBeat) -> bool:
    """Store a rank's beat; False when that rank never joined the run."""
    return ranks_store.record_beat(
        session=session,
        run_id=run_id,
        rank=rank,
        step=beat.step,
        quiet_s=beat.quiet_s,
        interval_s=beat.interval_s,
        collective=(beat.collective.name, beat.collective.since_s) if beat.collective else None,
        stack=[frame.model_dump() for frame in beat.stack] if beat.stack else None,
        timing=beat.timing.model_dump() if beat.timing else None,
    )


def end_rank(*, session: Session, run: RunRow, rank: int, status: str, reason: str | None) -> RunRow:
    """One rank ended its part. The run crashes with the first rank that crashed, and finishes
    when rank 0 finishes or every rank of the job has (a rank that never joined is one of a job's
    ranks only by its word: its end counts as the run's, as a plain run's would)."""
    row = ranks_store.end_rank(session=session, run_id=run.id, rank=rank, status=status, reason=reason)
    if row is None:
        return lifecycle.finish(session=session, run=run, status=status, reason=reason)
    # the run as it stands now, held until commit: ranks ending at once must not both end it
    runs_store.lock_run(session=session, run=run)
    if status == RunStatus.CRASHED:
        if run.status == RunStatus.CRASHED:
            return run
        where = f"rank {rank}" + (f" on host {row.host}" if row.host else "")
        said = rank_rules.short_reason(reason) if reason else "crashed"
        return lifecycle.finish(session=session, run=run, status=status, reason=f"{where}: {said}")
    if run.status == RunStatus.CRASHED:
        return run
    counts = ranks_store.rank_counts(session=session, run_id=run.id) or {}
    world = counts.get("world_size") or counts.get("joined") or 1
    done = rank == 0 or counts.get(RunStatus.FINISHED, 0) >= world
    if done and run.status != RunStatus.FINISHED:
        return lifecycle.finish(session=session, run=run, status=status, reason=None)
    return run


def end_run(*, session: Session, run: RunRow, status: str, reason: str | None) -> RunRow:
    """The run ended as a whole (a finish naming no rank: a plain run, or `holter follow` of a job's
    log): its ranks read from a log, which never beat, end with it."""
    ranks_store.end_unheard_ranks(session=session, run_id=run.id, status=status)
    return lifecycle.finish(session=session, run=run, status=status, reason=reason)


def job_of(*, session: Session, run_id: str) -> dict[str, Any] | None:
    """The run's job in a few numbers (None for a run of one process): world size, launcher,
    and its ranks joined, running, finished and crashed."""
    return ranks_store.rank_counts(session=session, run_id=run_id)


def ranks_of(*, session: Session, run_id: str) -> list[RankRow]:
    """The run's ranks, by rank."""
    return ranks_store.ranks_of_run(session=session, run_id=run_id)


def ranks_with_life(*, session: Session, run_id: str) -> list[tuple[RankRow, bool]]:
    """The run's ranks, by rank, each with whether it is alive now (`is_alive`)."""
    moment = now()
    return [(row, is_alive(row, moment)) for row in ranks_of(session=session, run_id=run_id)]


def is_alive(row: RankRow, moment: datetime) -> bool:
    """Whether the rank still runs and beat within three of its intervals."""
    if row.status != RunStatus.RUNNING or row.beat_at is None:
        return False
    return (moment - row.beat_at).total_seconds() <= rank_rules.SILENT_INTERVALS * (row.beat_interval or 5.0)


def state_of(row: RankRow, moment: datetime) -> RankState:
    """A rank's row as the pure rules read it, its quiet and silence measured at `moment`."""
    return RankState(
        rank=row.rank,
        status=row.status,
        host=row.host,
        reason=row.reason,
        step=row.step,
        quiet_s=(moment - row.step_at).total_seconds() if row.step_at else None,
        silent_s=(moment - row.beat_at).total_seconds() if row.beat_at else None,
        interval_s=row.beat_interval or 5.0,
        collective=row.collective,
        collective_s=(moment - row.collective_since).total_seconds() if row.collective_since else None,
        stack=row.stack,
        timing=row.timing,
        world_size=row.world_size,
    )


def rank_matrix(
    *,
    session: Session,
    run_id: str,
    metric: str,
    start: int | None,
    end: int | None,
    max_buckets: int,
    stat: reads.FamilyStat,
) -> tuple[list[int], reads.FamilyRead]:
    """`metric` of every rank (rank 0's under its own name) as a ranks × step-buckets matrix."""
    ranks = [row.rank for row in ranks_of(session=session, run_id=run_id)] or [0]
    names = {rank_series(metric, rank): rank for rank in ranks}
    rows = points_store.get_metrics(session=session, run_id=run_id, names=names)
    found = sorted((names[name], row) for name, row in rows.items())
    family = reads.read_family(
        session=session,
        run_id=run_id,
        prefix=metric,
        metrics=[row for _, row in found],
        start=start,
        end=end,
        max_buckets=max_buckets,
        stat=stat,
    )
    return [rank for rank, _ in found], family


# --- the ranks watch -----------------------------------------------------------------------------


@dataclass
class RankWatchState:
    """What the ranks watch keeps between passes: when it last read each job's series, at which step."""

    outliers_at: dict[str, tuple[float, int]] = field(default_factory=dict)


def watch_ranks(*, session_factory: sessionmaker[Session], state: RankWatchState) -> int:
    """One pass over the jobs whose ranks are active: their events found, kept current and
    alerted; returns the events written. Each run is held for the pass (`claims.Task.RANK_WATCH`),
    so several service processes never read one job at once."""
    written = 0
    moment = now()
    with session_scope(session_factory) as session:
        run_ids = ranks_store.runs_with_ranks(
            session=session, active_since=moment - ACTIVE_FOR, limit=MAX_RUNS_PER_PASS
        )
    for run_id in run_ids:
        with session_scope(session_factory) as session:
            if not claims.claim_runs(session=session, task=claims.Task.RANK_WATCH, run_ids=[run_id]):
                continue
            written += _watch_run(session, run_id, now(), state)
    return written


def _watch_run(session: Session, run_id: str, moment: datetime, state: RankWatchState) -> int:
    run = runs_store.get_run(session=session, run_id=run_id)
    rows = ranks_of(session=session, run_id=run_id)
    if run is None or len(rows) < 2:
        return 0
    states = [state_of(row, moment) for row in rows]
    if any(s.silent and s.step is None for s in states):  # gone before its first beat: where its points got to
        logged = ranks_store.last_logged_steps(session=session, run_id=run_id)
        states = [replace(s, step=logged[s.rank] + 1) if s.step is None and s.rank in logged else s for s in states]
    findings: list[RankFinding] = []
    straggler = rank_rules.find_straggler(states)
    if straggler is not None:
        seen = events_store.get_event_by_key(session=session, run_id=run_id, event_key=straggler.key)
        if seen is not None:  # the cost since it was first seen, not over the window alone
            straggler = rank_rules.find_straggler(states, episode_s=(moment - seen.created_at).total_seconds())
        if straggler is not None:
            findings.append(straggler)
    stopped = rank_rules.find_stopped(states)
    if stopped is not None:
        findings.append(stopped)
    findings.extend(_outliers(session, run, rows, state))
    written = 0
    for finding in findings:
        row, previous = events_store.upsert_event(
            session=session,
            run_id=run_id,
            event_key=finding.key,
            event=finding.event,
            detector_version=DETECTOR,
            keep_start=True,
        )
        alert_on_event(session=session, event=row, previous_severity=previous)
        written += 1
    return written


def _outliers(session: Session, run: RunRow, rows: Sequence[RankRow], state: RankWatchState) -> list[RankFinding]:
    """The ranks out of their peers' band on the run's losses and local gradient norms, read at
    most every `OUTLIER_EVERY_S` and only when the job's steps moved."""
    last = run.last_step or 0  # the newest step of any rank's points
    seen = state.outliers_at.get(run.id)
    clock = time.monotonic()
    if seen is not None and (seen[1] == last or clock - seen[0] < OUTLIER_EVERY_S):
        return []
    state.outliers_at[run.id] = (clock, last)
    kinds = run_metric_kinds(session=session, run=run)
    watched = {name: OUTLIER_KINDS[kind] for name, kind in kinds.items() if kind in OUTLIER_KINDS}
    watched[LOCAL_GRAD_NORM] = "gradient norm before the all-reduce"
    ranks = [row.rank for row in rows]
    hosts = {row.rank: row.host for row in rows}
    wanted = {rank_series(name, rank): (name, rank) for name in watched for rank in ranks}
    metrics = points_store.get_metrics(session=session, run_id=run.id, names=wanted)
    if not metrics:
        return []
    by_id: dict[int, tuple[str, int]] = {row.metric_id: wanted[name] for name, row in metrics.items()}
    top = max((row.last_step or 0) for row in metrics.values())
    found = points_store.read_run_points(
        session=session,
        run_id=run.id,
        metric_ids=sorted(by_id),
        after=None,
        start=max(0, top - OUTLIER_STEPS),
        end=None,
        limit=len(by_id) * (OUTLIER_STEPS + 1),
    )
    series: dict[str, dict[int, dict[int, float]]] = {}
    for metric_id, step, value in zip(found.metric_ids, found.steps, found.values):
        name, rank = by_id[metric_id]
        series.setdefault(name, {}).setdefault(rank, {})[step] = float(value) if value is not None else math.nan
    findings: list[RankFinding] = []
    for name, by_rank in series.items():
        findings.extend(rank_rules.find_outliers(by_rank, metric=name, label=watched[name], hosts=hosts))
    return findings


def forget_run(state: RankWatchState, run_id: str) -> None:
    """Drop what the watch keeps of a run (deleted)."""
    state.outliers_at.pop(run_id, None)
