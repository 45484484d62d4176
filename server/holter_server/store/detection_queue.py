"""The live-detection queue: which runs and metrics have points detection has not read,
claimed a group at a time, and where detection of each got to (its progress and saved state).
All SQL about it lives here; `services/detection.py` drives it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, BindParameter, Select, and_, bindparam, func, literal, select, tuple_, update
from sqlalchemy.orm import Session

from holter_server.store import claims
from holter_server.store.backends import backend_for
from holter_server.store.database import insert_ignoring_conflicts
from holter_server.store.models import DetectorStateRow, MetricRow, RunRow, UTCDateTime
from holter_server.store.runs import now
from holter_server.vocabulary.ranks import RANK_PREFIX


@dataclass
class DetectionWork:
    """One metric with points the live detector has not seen yet."""

    run_id: str
    metric_id: int
    metric: str
    detected_step: int
    state: dict[str, Any] | None
    detector_version: str | None
    last_step: int | None = None  # the metric's newest stored step when claimed


# DetectionProgress.state meaning "leave the saved state as it is"
KEEP_STATE: dict[str, Any] = {"keep": True}


@dataclass(frozen=True)
class DetectionProgress:
    """Where live detection of one metric got to, to be saved (`state` KEEP_STATE: only the step)."""

    run_id: str
    metric_id: int
    detected_step: int
    state: dict[str, Any] | None
    detector_version: str


NEVER_READ = datetime(1970, 1, 1, tzinfo=UTC)  # the progress time of a metric detection has not read yet


# Runs with batches stored that detection has not settled (store/models/runs.py). With a lab's
# history of finished runs in the database, detection's statements look at these runs' metrics
# only: their ids are read first and passed on, since no planner can tell from its statistics
# how few rows a comparison of two columns keeps (it guessed a third, and joined every metric).
_RUNS = RunRow.__table__
_STATES = DetectorStateRow.__table__
_METRICS = MetricRow.__table__
_DUE = _RUNS.c.stored_batches > _RUNS.c.detected_batches
# A distributed job's other ranks' series (vocabulary/ranks.py) are read across the ranks by the
# ranks watch, never one by one: a job of a thousand ranks would otherwise bring thousands of
# metrics without a detector into every pass.
_RUNS_OWN = func.substr(_METRICS.c.name, 1, len(RANK_PREFIX)) != RANK_PREFIX
# The most due runs one statement names; past it (only when that many runs have unread points at
# once) each pass takes a random share, so none waits for ever.
MAX_DUE_RUNS = 5_000


def _due_runs(session: Session) -> list[tuple[str, int]]:
    """(id, stored batches) of runs due for detection."""
    query = select(_RUNS.c.id, _RUNS.c.stored_batches).where(_DUE)
    due = session.execute(query.limit(MAX_DUE_RUNS + 1)).all()
    if len(due) > MAX_DUE_RUNS:
        due = session.execute(query.order_by(func.random()).limit(MAX_DUE_RUNS)).all()
    return [(run_id, stored) for run_id, stored in due]


def settle_detected_runs(*, session: Session) -> list[str]:
    """Mark the due runs whose every metric detection has read as settled; returns the runs
    still due (with points detection has not read), for the pass's claims.

    The runs' batch counts are read before their metrics: a batch counted by then has its points
    in sight of the second read (its metrics' steps and its count commit together), and one
    stored after counts again, so its run is due again. The update only ever raises the settled
    count (several processes may settle at once).
    """
    due = _due_runs(session)
    if not due:
        return []
    metrics = MetricRow.__table__
    ids = [run_id for run_id, _ in due]
    unread = set(
        session.scalars(  # (the runs named on both tables: each then read by its key)
            select(metrics.c.run_id)
            .distinct()
            .select_from(
                metrics.outerjoin(
                    _STATES,
                    and_(
                        _STATES.c.run_id == metrics.c.run_id,
                        _STATES.c.metric_id == metrics.c.metric_id,
                        _STATES.c.run_id.in_(ids),
                    ),
                )
            )
            .where(
                metrics.c.run_id.in_(ids),
                metrics.c.last_step > func.coalesce(_STATES.c.detected_step, -1),
                _RUNS_OWN,
            )
        )
    )
    read = [{"run": run_id, "seen": seen} for run_id, seen in due if run_id not in unread]
    if read:
        session.execute(
            update(_RUNS)
            .where(_RUNS.c.id == bindparam("run"), _RUNS.c.detected_batches < bindparam("seen"))
            .values(detected_batches=bindparam("seen")),
            read,
        )
    return [run_id for run_id, _ in due if run_id in unread]


def claim_detection_work(
    *, session: Session, limit: int, not_since: datetime | None = None, among_runs: Sequence[str] | None = None
) -> list[DetectionWork]:
    """Metrics whose newest step is past what detection has seen, taken from every run with
    such metrics in turn, of runs this transaction holds for detection (`claims.claim_runs`).

    Several service processes share the work without doing any of it twice: each holds the runs
    it works on until it commits, and reads the metrics' progress only once it holds their runs
    (what another process committed meanwhile is then in view). No row is locked across runs,
    which a distributed table would refuse. `not_since`: leave out metrics whose progress was
    saved at or after that moment (already read in this pass). `among_runs`: the runs due, as
    `settle_detected_runs` returned them this pass (read here when not given).
    """
    due = list(among_runs) if among_runs is not None else [run_id for run_id, _ in _due_runs(session)]
    if not due:
        return []
    missing = (  # never read: first in the queue, and in this pass whenever it began
        select(MetricRow.run_id, MetricRow.metric_id, literal(-1, BigInteger()), literal(NEVER_READ, UTCDateTime()))
        .outerjoin(
            DetectorStateRow,
            and_(DetectorStateRow.run_id == MetricRow.run_id, DetectorStateRow.metric_id == MetricRow.metric_id),
        )
        .where(MetricRow.run_id.in_(due), DetectorStateRow.run_id.is_(None), _RUNS_OWN)
    )
    session.execute(
        insert_ignoring_conflicts(session, DetectorStateRow).from_select(
            ["run_id", "metric_id", "detected_step", "updated_at"], missing
        )
    )
    held_elsewhere: list[str] = []
    for _ in range(3):  # a few tries past runs other processes hold, then what is left waits a pass
        candidates = _pending_rows(
            session, limit=limit, runs=due, skip_runs=held_elsewhere, not_since=not_since, runs_only=True
        )
        wanted = list(dict.fromkeys(run_id for (run_id,) in candidates))
        held = claims.claim_runs(session=session, task=claims.Task.DETECTION, run_ids=wanted)
        if held:
            rows = _pending_rows(session, limit=limit, runs=held, not_since=not_since)
            # the saved states (tens of kB each) are read only where the caller has no detector at hand
            return [
                DetectionWork(
                    run_id=run_id,
                    metric_id=metric_id,
                    metric=name,
                    detected_step=detected_step,
                    state=None,
                    detector_version=version,
                    last_step=last_step,
                )
                for run_id, metric_id, detected_step, version, name, last_step in rows
            ]
        if len(wanted) == 0:
            return []
        held_elsewhere.extend(wanted)
    return []


def _pending_statement(*, runs_only: bool, skipping: bool, since: bool) -> Select[Any]:
    """Metrics with points detection has not read, in round-robin order over runs: each run's
    longest-waiting metric first, then each run's second, ... (ordering by waiting time alone let
    one run with thousands of new metrics hold every other run's live detection back for minutes).

    Built once per shape (`_PENDING`) on the tables, not the ORM classes, and read as plain
    rows: a pass runs it twice over every metric with new points, and building the statement and
    the ORM's handling of its rows cost more than Postgres's work on it. Parameters: `runs`
    (the runs to look at), `limit`, and `skip` (runs to leave out) and `since` (leave out
    metrics whose progress was saved at or after it) in the shapes that have them. `runs_only`:
    just the run of each row, for choosing the runs to claim.
    """
    turn = func.row_number().over(partition_by=_STATES.c.run_id, order_by=_STATES.c.updated_at).label("turn")
    runs: BindParameter[Any] = bindparam("runs", expanding=True)
    query = (
        select(
            _STATES.c.run_id,
            _STATES.c.metric_id,
            _STATES.c.detected_step,
            _STATES.c.detector_version,
            _STATES.c.updated_at,
            _METRICS.c.name,
            _METRICS.c.last_step,
            turn,
        )
        .join(_METRICS, and_(_METRICS.c.run_id == _STATES.c.run_id, _METRICS.c.metric_id == _STATES.c.metric_id))
        .where(_METRICS.c.last_step > _STATES.c.detected_step)
        # the runs named on both tables: the planner then reads each by its key, not every metric
        .where(_STATES.c.run_id.in_(runs), _METRICS.c.run_id.in_(runs))
    )
    if skipping:
        query = query.where(_STATES.c.run_id.not_in(bindparam("skip", expanding=True)))
    if since:
        query = query.where(_STATES.c.updated_at < bindparam("since", type_=_STATES.c.updated_at.type))
    ranked = query.subquery()
    columns = (
        [ranked.c.run_id]
        if runs_only
        else [
            ranked.c.run_id,
            ranked.c.metric_id,
            ranked.c.detected_step,
            ranked.c.detector_version,
            ranked.c.name,
            ranked.c.last_step,
        ]
    )
    return select(*columns).order_by(ranked.c.turn, ranked.c.updated_at).limit(bindparam("limit"))


_PENDING = {
    (runs_only, skipping, since): _pending_statement(runs_only=runs_only, skipping=skipping, since=since)
    for runs_only in (False, True)
    for skipping in (False, True)
    for since in (False, True)
}


def _pending_rows(
    session: Session,
    *,
    limit: int,
    runs: Sequence[str],
    skip_runs: Sequence[str] = (),
    not_since: datetime | None = None,
    runs_only: bool = False,
) -> Sequence[Any]:
    """The rows of `_pending_statement` (of the shape these arguments need), as plain tuples."""
    statement = _PENDING[(runs_only, bool(skip_runs), not_since is not None)]
    params: dict[str, Any] = {"runs": list(runs), "limit": limit}
    if skip_runs:
        params["skip"] = list(skip_runs)
    if not_since is not None:
        params["since"] = not_since
    return session.connection().execute(statement, params).all()


def lock_detection_rows(*, session: Session, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Hold the runs of these (run, metric id) pairs for detection in this transaction, skipping
    runs another process holds; returns the detected_step of each pair whose run is held."""
    by_run: dict[str, list[int]] = {}
    for run_id, metric_id in keys:
        by_run.setdefault(run_id, []).append(metric_id)
    held = claims.claim_runs(session=session, task=claims.Task.DETECTION, run_ids=sorted(by_run))
    out: dict[tuple[str, int], int] = {}
    for run_id in held:
        rows = session.execute(
            select(DetectorStateRow.metric_id, DetectorStateRow.detected_step).where(
                DetectorStateRow.run_id == run_id, DetectorStateRow.metric_id.in_(by_run[run_id])
            )
        )
        out.update(((run_id, metric_id), step) for metric_id, step in rows)
    return out


# Built once and sent as plain executemany (pipelined on Postgres): a pass saves the progress of
# every metric it read, and the ORM's bulk update by primary key cost more than the statements.
_SAVE_PROGRESS = (
    update(_STATES)
    .where(_STATES.c.run_id == bindparam("key_run"), _STATES.c.metric_id == bindparam("key_metric"))
    .values(detected_step=bindparam("step"), updated_at=bindparam("moment"))
)
_SAVE_STATE = _SAVE_PROGRESS.values(
    state=bindparam("state", type_=_STATES.c.state.type), detector_version=bindparam("version")
)


def save_detection_states(*, session: Session, progress: Sequence[DetectionProgress]) -> None:
    """Record how far detection got on many metrics: one statement for those whose state is
    saved, one for the rest (each sent as one pipelined batch on Postgres)."""
    if not progress:
        return
    moment = now()
    with_state = [
        {
            "key_run": p.run_id,
            "key_metric": p.metric_id,
            "step": p.detected_step,
            "moment": moment,
            "state": p.state,
            "version": p.detector_version,
        }
        for p in progress
        if p.state is not KEEP_STATE
    ]
    steps_only = [(p.run_id, p.metric_id, p.detected_step) for p in progress if p.state is KEEP_STATE]
    if with_state:
        session.execute(_SAVE_STATE, with_state)
    if steps_only and not backend_for(session).save_detected_steps(session, steps_only, moment):
        session.execute(
            _SAVE_PROGRESS,
            [
                {"key_run": run_id, "key_metric": metric_id, "step": step, "moment": moment}
                for run_id, metric_id, step in steps_only
            ],
        )


def mark_detection_read(*, session: Session, keys: Sequence[tuple[str, int]]) -> None:
    """Record that these (run, metric id) pairs were read just now without progress (their new
    points wait for their detector): the queue takes them last, and not again in this pass."""
    if keys and not backend_for(session).touch_detection_rows(session, keys, now()):
        session.execute(
            update(_STATES)
            .where(tuple_(_STATES.c.run_id, _STATES.c.metric_id).in_(list(keys)))
            .values(updated_at=now())
        )


def reset_detection(*, session: Session, run_id: str, metric_ids: Sequence[int]) -> None:
    """Make live detection read these metrics again from their first point with fresh detectors
    (once no process is detecting on the run, so that none writes its progress over this)."""
    if metric_ids:
        claims.wait_for_run(session=session, task=claims.Task.DETECTION, run_id=run_id)
        session.execute(
            update(DetectorStateRow)
            .where(DetectorStateRow.run_id == run_id, DetectorStateRow.metric_id.in_(list(metric_ids)))
            .values(detected_step=-1, state=None, updated_at=now())
        )
        # due again, with no batch stored: a pass looks at the run's metrics once more
        session.execute(update(RunRow).where(RunRow.id == run_id).values(stored_batches=RunRow.stored_batches + 1))


def detection_states(*, session: Session, run_id: str, metric_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The saved live-detector states of these metrics of a run (metric id → state), for the
    run-level rules that read series together; metrics without a saved state are left out."""
    rows = session.execute(
        select(DetectorStateRow.metric_id, DetectorStateRow.state).where(
            DetectorStateRow.run_id == run_id, DetectorStateRow.metric_id.in_(list(metric_ids))
        )
    ).all()
    return {metric_id: state for metric_id, state in rows if state}
