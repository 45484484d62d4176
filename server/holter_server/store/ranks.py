"""The ranks of a distributed job's run. All SQL about them lives here.

A rank's row is written by that rank alone (its join, its beats, its finish), so a thousand
ranks beating at once never wait on one another, and no beat touches the run's own row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from holter_server.store.models import MetricRow, RankRow, RunRow
from holter_server.store.runs import now
from holter_server.vocabulary.ranks import rank_of
from holter_server.vocabulary.statuses import RunStatus


def join_rank(*, session: Session, run_id: str, rank: int, fields: dict[str, Any]) -> tuple[RankRow, bool]:
    """Record that rank `rank` joined the run (`fields`: world_size, local_rank, node_rank, host,
    pid, launcher, job, restart, and `beats`: false for a rank read from its log, which never beats
    and so is never silent); returns (its row, whether it had joined before: a restart)."""
    moment = now()
    beats = fields.pop("beats", True)
    row = session.get(RankRow, (run_id, rank), with_for_update=True, populate_existing=True)
    rejoined = row is not None
    if row is None:
        row = RankRow(run_id=run_id, rank=rank, joined_at=moment, status=RunStatus.RUNNING)
        session.add(row)
    for name, value in fields.items():
        setattr(row, name, value)
    row.status = RunStatus.RUNNING
    row.reason = row.finished_at = None
    row.joined_at = moment
    row.beat_at = moment if beats else None
    session.flush()
    return row, rejoined


def get_rank(*, session: Session, run_id: str, rank: int) -> RankRow | None:
    """The rank's row, or None when it never joined the run."""
    return session.get(RankRow, (run_id, rank))


def record_beat(
    *,
    session: Session,
    run_id: str,
    rank: int,
    step: int,
    quiet_s: float,
    interval_s: float,
    collective: tuple[str, float] | None,
    stack: list[dict[str, Any]] | None,
    timing: dict[str, Any] | None,
) -> bool:
    """Rewrite the rank's row with its beat, in one UPDATE; False when the rank never joined the run."""
    moment = now()
    result = session.execute(
        update(RankRow)
        .where(RankRow.run_id == run_id, RankRow.rank == rank)
        .values(
            beat_at=moment,
            beat_interval=interval_s,
            step=step,
            step_at=moment - timedelta(seconds=quiet_s),
            collective=collective[0] if collective else None,
            collective_since=moment - timedelta(seconds=collective[1]) if collective else None,
            stack=stack,
            timing=timing,
        )
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def end_rank(*, session: Session, run_id: str, rank: int, status: str, reason: str | None) -> RankRow | None:
    """The rank finished or crashed; its row, or None when it never joined."""
    row = session.get(RankRow, (run_id, rank), with_for_update=True, populate_existing=True)
    if row is None:
        return None
    row.status = status
    row.reason = reason
    row.finished_at = now()
    row.collective = row.collective_since = None
    session.flush()
    return row


def ranks_of_run(*, session: Session, run_id: str) -> list[RankRow]:
    """The run's ranks, by rank."""
    return list(session.scalars(select(RankRow).where(RankRow.run_id == run_id).order_by(RankRow.rank)))


def rank_counts(*, session: Session, run_id: str) -> dict[str, Any] | None:
    """The run's job in a few numbers (None: no rank ever joined it): its world size, launcher and
    job, and how many ranks joined and stand at each status."""
    rows = session.execute(
        select(
            RankRow.status,
            func.count(),
            func.max(RankRow.world_size),
            func.max(RankRow.launcher),
            func.max(RankRow.job),
        )
        .where(RankRow.run_id == run_id)
        .group_by(RankRow.status)
    ).all()
    if not rows:
        return None
    by_status = {status: count for status, count, *_ in rows}
    return {
        "world_size": max((row[2] for row in rows if row[2] is not None), default=None),
        "launcher": next((row[3] for row in rows if row[3]), None),
        "job": next((row[4] for row in rows if row[4]), None),
        "joined": sum(by_status.values()),
        **{
            str(status): by_status.get(status, 0)
            for status in (RunStatus.RUNNING, RunStatus.FINISHED, RunStatus.CRASHED)
        },
    }


def runs_with_ranks(*, session: Session, active_since: datetime, limit: int) -> list[str]:
    """Runs still running that have ranks, or some rank of which joined, beat or ended since
    `active_since` (the ranks watch reads them)."""
    found = session.scalars(
        select(RankRow.run_id)
        .join(RunRow, RunRow.id == RankRow.run_id)
        .where(
            or_(
                RunRow.status == RunStatus.RUNNING,
                RankRow.beat_at >= active_since,
                RankRow.joined_at >= active_since,
                RankRow.finished_at >= active_since,
            )
        )
        .group_by(RankRow.run_id)
        .limit(limit)
    )
    return list(found)


def beating_since(*, session: Session, run_ids: Sequence[str], since: datetime) -> set[str]:
    """Those of `run_ids` of which some rank beat since `since`: alive, whatever their points say."""
    if not run_ids:
        return set()
    return set(
        session.scalars(
            select(RankRow.run_id)
            .where(RankRow.run_id.in_(list(run_ids)), RankRow.beat_at >= since)
            .group_by(RankRow.run_id)
        )
    )


def last_logged_steps(*, session: Session, run_id: str) -> dict[int, int]:
    """Each rank's newest step logged, by its series (rank 0's: the run's own): where a rank that
    went silent before its first beat had got to."""
    found: dict[int, int] = {}
    rows = session.execute(
        select(MetricRow.name, MetricRow.last_step).where(MetricRow.run_id == run_id, MetricRow.last_step.is_not(None))
    )
    for name, last_step in rows:
        if last_step is None:
            continue
        owner = rank_of(name)
        rank = owner[0] if owner is not None else 0
        found[rank] = max(found.get(rank, last_step), last_step)
    return found


def end_unheard_ranks(*, session: Session, run_id: str, status: str) -> None:
    """The run ended as a whole: its ranks read from a log (never a beat) end with it."""
    session.execute(
        update(RankRow)
        .where(RankRow.run_id == run_id, RankRow.status == RunStatus.RUNNING, RankRow.beat_at.is_(None))
        .values(status=status, finished_at=now())
        .execution_options(synchronize_session=False)
    )
