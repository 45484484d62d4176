"""Runs and their metric summaries. All SQL about runs lives here."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, String, Text, and_, bindparam, case, cast, delete, exists, func, or_, select, update
from sqlalchemy.orm import Session, defer
from sqlalchemy.orm.util import identity_key

from holter_server.store import claims
from holter_server.store.database import insert_ignoring_conflicts
from holter_server.store.models import (
    AnnotationRow,
    ConfigKeyRow,
    DeletedRunRow,
    DeliveryRow,
    DetectorStateRow,
    EventRow,
    MetricRow,
    MuteRow,
    PointRow,
    RankRow,
    ReferenceRow,
    RollupRow,
    RunRow,
)
from holter_server.store.models.config_keys import MAX_CONFIG_KEY_LENGTH
from holter_server.vocabulary.ranks import RANK_PREFIX
from holter_server.vocabulary.statuses import RunStatus


def now() -> datetime:
    """The current time, timezone-aware (UTC)."""
    return datetime.now(UTC)


def get_run(*, session: Session, run_id: str) -> RunRow | None:
    """The run with this id, or None."""
    return session.get(RunRow, run_id)


def get_runs(*, session: Session, run_ids: Iterable[str]) -> dict[str, RunRow]:
    """The runs with these ids (id → run); ids no run has are left out."""
    wanted = list(run_ids)
    if not wanted:
        return {}
    return {run.id: run for run in session.scalars(select(RunRow).where(RunRow.id.in_(wanted)))}


class RunIdTakenError(ValueError):
    """The run id is another project's."""


def projects_of_runs(*, session: Session, run_ids: Sequence[str]) -> dict[str, str]:
    """The project of each run that exists (id → project), read in one statement per 500 ids and
    without the runs' configs: the gate binds every id a request names this way."""
    found: dict[str, str] = {}
    for start in range(0, len(run_ids), 500):
        chunk = list(run_ids[start : start + 500])
        found.update(
            {
                run_id: project
                for run_id, project in session.execute(select(RunRow.id, RunRow.project).where(RunRow.id.in_(chunk)))
            }
        )
    return found


class MergeTooLargeError(ValueError):
    """Resuming would grow the run's config or tags past their limits (`what`: "config" or "tags")."""

    def __init__(self, what: str, message: str) -> None:
        super().__init__(message)
        self.what = what


def create_or_resume_run(
    *,
    session: Session,
    run_id: str,
    project: str,
    name: str | None,
    config: dict[str, Any],
    tags: list[str],
    max_config_bytes: int | None = None,
    max_tags: int | None = None,
    reopen: bool = True,
) -> tuple[RunRow, bool]:
    """Create the run, or resume it when the id exists; returns (run, resumed).

    The create is an `INSERT ... ON CONFLICT DO NOTHING`: identical creates racing each other (a
    client's retry after its timeout, while the first is still being answered) make one run, and
    the losers resume it instead of failing on the duplicate key. Resuming sets the run running
    again and merges the new config and tags into the old ones; `resumed` is False when the run
    is still running and has logged nothing, since such a "resume" is a resent create. An id another
    project holds raises RunIdTakenError (the race the caller's own check cannot see).
    With `reopen` False an ended (finished or crashed) run keeps its status: a rank of a job
    joining after another rank ended the run is no restart.
    Resuming merges within limits: MergeTooLargeError, and nothing changed, when the merged
    config would be larger than `max_config_bytes` (as JSON) or the merged tags more than
    `max_tags` (each request is within them, but a run resumed many times must not grow without
    end; one already past a limit may resume as long as it does not grow).
    """
    moment = now()
    created = session.execute(  # a row back: this call inserted it (rowcount is -1 through psycopg here)
        insert_ignoring_conflicts(session, RunRow)
        .values(
            id=run_id,
            project=project,
            name=name,
            config=config,
            tags=tags,
            status=RunStatus.RUNNING,
            created_at=moment,
            updated_at=moment,
            heartbeat_at=moment,
        )
        .returning(RunRow.id)
    ).first()
    run = session.get(RunRow, run_id, with_for_update=True, populate_existing=True)
    assert run is not None  # inserted above, or there already
    if created is not None:
        return run, False
    if run.project != project:
        raise RunIdTakenError(run_id)
    resumed = run.status != RunStatus.RUNNING or run.last_step is not None
    merged_config = {**(run.config or {}), **config}
    merged_tags = list(dict.fromkeys([*(run.tags or []), *tags]))
    # only growth past a limit is refused: a run stored over it (before this check) still resumes unchanged
    if (
        max_config_bytes is not None
        and config
        and (size := len(json.dumps(merged_config))) > max_config_bytes
        and size > len(json.dumps(run.config or {}))
    ):
        raise MergeTooLargeError(
            "config",
            f"resuming run {run_id!r} would make its config {size:,} bytes (the stored one merged with this one), "
            f"over the limit of {max_config_bytes:,}: send fewer or smaller keys",
        )
    if max_tags is not None and len(merged_tags) > max(max_tags, len(run.tags or [])):
        raise MergeTooLargeError(
            "tags",
            f"resuming run {run_id!r} would give it {len(merged_tags)} tags (the stored ones and these), "
            f"over the limit of {max_tags}: replace its tags with PATCH /api/v1/runs/{run_id} instead",
        )
    if reopen or run.status not in (RunStatus.FINISHED, RunStatus.CRASHED):
        run.status = RunStatus.RUNNING
        run.finished_at = None
    run.name = name or run.name
    run.config = merged_config
    run.tags = merged_tags
    run.updated_at = run.heartbeat_at = moment
    session.flush()
    return run, resumed


def set_provenance(*, session: Session, run: RunRow, provenance: dict[str, Any]) -> None:
    """Record where the run came from, unless it already has it: the first create's code version
    stands (a resume from other code is another run's business, not a rewrite of this one's)."""
    if run.provenance is None:
        run.provenance = provenance
        session.flush()


def record_preflight(*, session: Session, run: RunRow, checks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Store pre-flight check results by name (a check run again replaces its result); returns
    what is stored."""
    stored = dict((run.preflight or {}).get("checks") or {})
    moment = now().isoformat()
    for check in checks:
        stored[str(check["name"])] = {**check, "at": moment}
    run.preflight = {"checks": stored}
    session.flush()
    return run.preflight


def has_tag(tag: str) -> Any:
    """A run whose tags hold `tag`, as an element of the JSON list stored (written `["a", "b"]`):
    its quoted text between the list's brackets or separators, so that "a" matches neither "ab"
    nor `x"a` (whose text is `"x\\"a"`: the quote inside is escaped)."""
    text, element = cast(RunRow.tags, String), json.dumps(tag)
    return or_(
        text == f"[{element}]",
        text.startswith(f"[{element}, ", autoescape=True),
        text.endswith(f", {element}]", autoescape=True),
        text.contains(f", {element}, ", autoescape=True),
    )


def config_at(key: str) -> Any:
    """The value at a dotted config key (`optimizer.lr`), as JSON (JSON null where the run has
    none: SQLite's JSON_QUOTE makes a missing value the text `null`)."""
    return RunRow.config[tuple(key.split("."))]


def has_config_key(key: str) -> Any:
    """A run whose config has a non-null value at this dotted key (the value read as text is
    NULL on both stores where it has none)."""
    return RunRow.config[tuple(key.split("."))].as_string().is_not(None)


def _has_word(word: str) -> Any:
    """A run whose id, name, project, tags or config (its JSON text, keys and values) holds `word`
    in any case; a dotted word (`optimizer.lr`) also finds the runs whose config has that key."""
    lowered = word.lower()
    found = or_(
        *(
            func.lower(column).contains(lowered, autoescape=True)
            for column in (RunRow.id, func.coalesce(RunRow.name, ""), RunRow.project, cast(RunRow.tags, Text))
        ),
        func.lower(cast(RunRow.config, Text)).contains(lowered, autoescape=True),
    )
    return or_(found, has_config_key(word)) if "." in word.strip(".") else found


def _filtered(
    query: Select[Any],
    *,
    project: str | None,
    status: str | None,
    tag: str | None,
    archived: str = "include",
    words: Sequence[str] = (),
    config_keys: Sequence[str] = (),
) -> Select[Any]:
    """`query` narrowed to a project, status and tag, to the runs holding every one of `words`
    (`_has_word`) and those whose config has each of `config_keys`; `archived`: "exclude"
    (archived runs left out), "include" or "only"."""
    if words:
        query = query.where(and_(*(_has_word(word) for word in words)))
    if config_keys:
        query = query.where(and_(*(has_config_key(key) for key in config_keys)))
    if archived == "exclude":
        query = query.where(RunRow.archived_at.is_(None))
    elif archived == "only":
        query = query.where(RunRow.archived_at.is_not(None))
    if project is not None:
        query = query.where(RunRow.project == project)
    if status is not None:
        query = query.where(RunRow.status == status)
    if tag is not None:
        query = query.where(has_tag(tag))
    return query


def run_config_sizes(
    *, session: Session, project: str | None, tag: str | None, run_ids: Sequence[str] | None, limit: int
) -> dict[str, int]:
    """The runs a selection names (ids, or a project and tag: the newest `limit`), each with the
    length of its config as JSON text, without reading any config into memory."""
    query = select(RunRow.id, func.length(cast(RunRow.config, Text)))
    if run_ids is not None:
        query = query.where(RunRow.id.in_(list(run_ids)))
    else:
        query = _filtered(query, project=project, status=None, tag=tag)
    query = query.order_by(RunRow.created_at.desc(), RunRow.id).limit(limit)
    return {run_id: int(size or 0) for run_id, size in session.execute(query).all()}


def list_runs(
    *,
    session: Session,
    project: str | None,
    status: str | None,
    tag: str | None = None,
    archived: str = "exclude",
    words: Sequence[str] = (),
    config_keys: Sequence[str] = (),
    without_config: bool = False,
    limit: int,
    offset: int,
) -> tuple[Sequence[RunRow], int]:
    """Runs, newest first, with the total count matching the filters. `archived`: "exclude"
    (archived runs left out), "include" or "only"; `words` and `config_keys` as `_filtered`
    takes them; `without_config`: the configs are not read (see `config_values`)."""
    query = _filtered(
        select(RunRow), project=project, status=status, tag=tag, archived=archived, words=words, config_keys=config_keys
    )
    count = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    if without_config:
        query = query.options(defer(RunRow.config))
    rows = session.scalars(query.order_by(RunRow.created_at.desc(), RunRow.id).limit(limit).offset(offset)).all()
    return rows, count


def config_values_of_matching(
    *,
    session: Session,
    project: str | None,
    status: str | None,
    tag: str | None,
    archived: str,
    words: Sequence[str],
    keys: Sequence[str],
    groups: Sequence[Sequence[str]],
) -> list[tuple[str, dict[str, Any]]]:
    """Every run the filters select whose config has a key of each of `groups`, newest first,
    with its values at `keys` (those it has): a few values each, never a whole config, for a
    caller matching values itself."""
    query = _filtered(
        select(RunRow.id, *(config_at(key) for key in keys)),
        project=project,
        status=status,
        tag=tag,
        archived=archived,
        words=words,
    ).where(and_(*(or_(*(has_config_key(key) for key in group)) for group in groups)))
    return [
        (row[0], {key: value for key, value in zip(keys, row[1:], strict=True) if value is not None})
        for row in session.execute(query.order_by(RunRow.created_at.desc(), RunRow.id))
    ]


def runs_in_order(*, session: Session, run_ids: Sequence[str], without_config: bool = False) -> list[RunRow]:
    """The runs of these ids in the order given (ids of no run left out); `without_config`: their
    configs are not read (the caller reads the keys it shows with `config_values`)."""
    if not run_ids:
        return []
    query = select(RunRow).where(RunRow.id.in_(list(run_ids)))
    if without_config:
        query = query.options(defer(RunRow.config))
    found = {row.id: row for row in session.scalars(query)}
    return [found[run_id] for run_id in run_ids if run_id in found]


def config_values(*, session: Session, run_ids: Sequence[str], keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each run's values at these dotted config keys (a key the run lacks is left out), read in
    the database: a config of 10,000 keys is never loaded to show three of them."""
    out: dict[str, dict[str, Any]] = {run_id: {} for run_id in run_ids}
    if run_ids and keys:
        query = select(RunRow.id, *(config_at(key) for key in keys)).where(RunRow.id.in_(list(run_ids)))
        for run_id, *values in session.execute(query):
            out[run_id] = {key: value for key, value in zip(keys, values, strict=True) if value is not None}
    return out


def record_config_keys(*, session: Session, project: str, keys: Iterable[str]) -> None:
    """Remember these dotted config keys as the project's (keys over 512 characters are not)."""
    rows = [{"project": project, "key": key} for key in dict.fromkeys(keys) if len(key) <= MAX_CONFIG_KEY_LENGTH]
    for start in range(0, len(rows), 1000):
        session.execute(insert_ignoring_conflicts(session, ConfigKeyRow), rows[start : start + 1000])


def config_keys_ending(*, session: Session, project: str | None, key: str, limit: int) -> list[str]:
    """The project's dotted config keys whose last parts are `key` (`lr`: `optimizer.lr`)."""
    query = select(ConfigKeyRow.key).distinct().where(ConfigKeyRow.key.endswith(f".{key}", autoescape=True))
    if project is not None:
        query = query.where(ConfigKeyRow.project == project)
    return list(session.scalars(query.order_by(ConfigKeyRow.key).limit(limit)))


def project_counts(*, session: Session, project: str | None) -> list[tuple[str, int, int]]:
    """Each project (or the one named) with its runs counted: (name, runs, of them archived)."""
    archived = func.count(RunRow.archived_at)
    query = select(RunRow.project, func.count(), archived).group_by(RunRow.project).order_by(RunRow.project)
    if project is not None:
        query = query.where(RunRow.project == project)
    return [(name, runs, archived_runs) for name, runs, archived_runs in session.execute(query)]


def list_config_keys(
    *, session: Session, project: str | None, contains: str | None, limit: int
) -> tuple[list[str], int]:
    """The project's (None: every project's) config keys holding `contains` in any case, in order,
    at most `limit` of them, and how many there are in all."""
    query = select(ConfigKeyRow.key).distinct()
    if project is not None:
        query = query.where(ConfigKeyRow.project == project)
    if contains:
        query = query.where(func.lower(ConfigKeyRow.key).contains(contains.lower(), autoescape=True))
    count = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    return list(session.scalars(query.order_by(ConfigKeyRow.key).limit(limit))), count


# The run's own series: what a distributed job's other ranks logged (`holter/rank/<r>/...`,
# vocabulary/ranks.py) is read across the ranks, and left out of what lists a run's curves.
_RUNS_OWN = func.substr(MetricRow.name, 1, len(RANK_PREFIX)) != RANK_PREFIX


def list_metrics(*, session: Session, run_id: str, ranks: bool = False) -> Sequence[MetricRow]:
    """The run's metric series with their summaries, by name (`ranks`: its other ranks' series too)."""
    query = select(MetricRow).where(MetricRow.run_id == run_id)
    if not ranks:
        query = query.where(_RUNS_OWN)
    return session.scalars(query.order_by(MetricRow.name)).all()


def list_metrics_of_runs(*, session: Session, run_ids: Sequence[str]) -> dict[str, list[MetricRow]]:
    """`list_metrics` of many runs in one query (every run given is in the answer)."""
    out: dict[str, list[MetricRow]] = {run_id: [] for run_id in run_ids}
    if run_ids:
        query = select(MetricRow).where(MetricRow.run_id.in_(list(run_ids)), _RUNS_OWN)
        for row in session.scalars(query.order_by(MetricRow.run_id, MetricRow.name)):
            out[row.run_id].append(row)
    return out


def metric_names(*, session: Session, run_id: str) -> list[str]:
    """The names of the run's own metric series (its other ranks' left out)."""
    return list(session.scalars(select(MetricRow.name).where(MetricRow.run_id == run_id, _RUNS_OWN)))


# Built once on the table and read as plain rows: live detection reads every name of the runs it
# works on in every pass (a row per metric), where the ORM's handling of each row cost most.
_METRIC_NAMES_OF_RUNS = select(MetricRow.__table__.c.run_id, MetricRow.__table__.c.name).where(
    MetricRow.__table__.c.run_id.in_(bindparam("runs", expanding=True)),
    func.substr(MetricRow.__table__.c.name, 1, len(RANK_PREFIX)) != RANK_PREFIX,
)


def metric_names_of_runs(*, session: Session, run_ids: Sequence[str]) -> dict[str, list[str]]:
    """The names of each run's own metric series (run id → names; runs without any are left out)."""
    out: dict[str, list[str]] = {}
    if run_ids:
        for run_id, name in session.connection().execute(_METRIC_NAMES_OF_RUNS, {"runs": list(run_ids)}):
            out.setdefault(run_id, []).append(name)
    return out


def define_metrics(
    *, session: Session, run: RunRow, definitions: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Merge what was declared about metrics (per name or glob) into the run's definitions and
    return them. A field set to None is removed, and a pattern left with nothing is dropped."""
    merged = {pattern: dict(fields) for pattern, fields in (run.metric_definitions or {}).items()}
    for pattern, fields in definitions.items():
        current = merged.setdefault(pattern, {})
        for name, value in fields.items():
            if value is None:
                current.pop(name, None)
            else:
                current[name] = value
        if not current:
            del merged[pattern]
    run.metric_definitions = merged  # a new object, so SQLAlchemy sees the JSON change
    run.updated_at = now()
    session.flush()
    return merged


def update_summary(*, session: Session, run: RunRow, values: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `values` into the run's summary key by key (a None removes the key) and return it."""
    merged = dict(run.summary or {})
    for key, value in values.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    run.summary = merged  # a new object, so SQLAlchemy sees the JSON change
    run.updated_at = now()
    session.flush()
    return merged


def get_metric(*, session: Session, run_id: str, name: str) -> MetricRow | None:
    """One metric series of a run, or None."""
    return session.scalar(select(MetricRow).where(MetricRow.run_id == run_id, MetricRow.name == name))


def count_metrics(*, session: Session, run_id: str) -> int:
    """How many metric series a run has."""
    return session.scalar(select(func.count()).select_from(MetricRow).where(MetricRow.run_id == run_id)) or 0


def existing_metric_names(*, session: Session, run_id: str, names: Iterable[str]) -> set[str]:
    """Which of `names` the run already has."""
    wanted = list(names)
    return (
        set(session.scalars(select(MetricRow.name).where(MetricRow.run_id == run_id, MetricRow.name.in_(wanted))))
        if wanted
        else set()
    )


# Built once: a small batch's one statement about its run, written for every batch of every job
# (building the expression each time was a tenth of a small batch's CPU).
_STEP = bindparam("last_step", type_=RunRow.__table__.c.last_step.type)
_MOMENT = bindparam("moment", type_=RunRow.__table__.c.heartbeat_at.type)
_ACTIVITY = (
    update(RunRow.__table__)
    .where(RunRow.__table__.c.id == bindparam("run_id"))
    .values(
        heartbeat_at=_MOMENT,
        updated_at=_MOMENT,
        # a NULL step (a heartbeat, an empty batch) leaves last_step as it was
        last_step=case(
            (RunRow.__table__.c.last_step.is_(None) | (RunRow.__table__.c.last_step < _STEP), _STEP),
            else_=RunRow.__table__.c.last_step,
        ),
        # a batch with points makes the run due for live detection; a heartbeat does not
        stored_batches=RunRow.__table__.c.stored_batches + case((_STEP.is_(None), 0), else_=1),
    )
)

# The same UPDATE answering the run's status and creation moment after it: a batch written under
# metric ids remembered from an earlier read asks it whether the run is still the one they came from.
ACTIVITY_RETURNING_RUN = _ACTIVITY.returning(RunRow.__table__.c.status, RunRow.__table__.c.created_at)


def activity_params(*, run_id: str, last_step: int | None) -> dict[str, Any]:
    """The parameters of the activity UPDATE (`record_activity`, `ACTIVITY_RETURNING_RUN`), now."""
    return {"run_id": run_id, "moment": now(), "last_step": last_step}


def record_activity(*, session: Session, run_id: str, last_step: int | None) -> None:
    """Note that the run is alive (a batch or a heartbeat arrived) and how far it got."""
    params = activity_params(run_id=run_id, last_step=last_step)
    if session.new or session.dirty or session.deleted or identity_key(RunRow, run_id) in session.identity_map:
        # the ORM has writes to flush first (session.execute does), or the run's object to keep current
        session.execute(_ACTIVITY, params)
        if (loaded := session.identity_map.get(identity_key(RunRow, run_id))) is not None:
            session.expire(loaded, ["heartbeat_at", "updated_at", "last_step", "stored_batches"])
        return
    session.connection().execute(_ACTIVITY, params)


def update_run(*, session: Session, run: RunRow, tags: list[str] | None, notes: str | None) -> RunRow:
    """Replace the run's tags and/or notes."""
    if tags is not None:
        run.tags = list(dict.fromkeys(tags))
    if notes is not None:
        run.notes = notes
    run.updated_at = now()
    session.flush()
    return run


def lock_run(*, session: Session, run: RunRow) -> None:
    """Read the run again and hold its row until commit (on SQLite the transaction's write lock,
    taken by an earlier write, already holds it)."""
    session.refresh(run, with_for_update=True)


def set_status(*, session: Session, run: RunRow, status: str) -> RunRow:
    """Change the run's status (running, stalled, ...) without touching anything else."""
    run.status = status
    return run


def finish_run(*, session: Session, run: RunRow, status: str) -> RunRow:
    """Mark the run finished or crashed."""
    moment = now()
    run.status = status
    run.finished_at = run.updated_at = run.heartbeat_at = moment
    run.drift_due_at = moment  # the reference-drift loop compares it with its reference
    session.flush()
    return run


def stall_silent_runs(*, session: Session, silent_since: datetime) -> list[RunRow]:
    """Running runs with no points or heartbeat since `silent_since` become stalled; returns them.
    A distributed job's run is alive while any of its ranks beats (a hung job is named by the
    ranks watch, where its ranks stand, not as a silence).

    Each run is held for the stall watch (`claims.claim_runs`) and changed by its own conditional
    UPDATE, so two watchers never report one run twice, and a run whose heartbeat has just
    arrived stays running; no row is locked across runs (a distributed table refuses that).
    """
    beating = exists().where(RankRow.run_id == RunRow.id, RankRow.beat_at >= silent_since)
    silent = session.scalars(
        select(RunRow.id).where(RunRow.status == RunStatus.RUNNING, RunRow.heartbeat_at < silent_since, ~beating)
    ).all()
    stalled: list[RunRow] = []
    for run_id in claims.claim_runs(session=session, task=claims.Task.STALL_WATCH, run_ids=list(silent)):
        run = session.scalars(
            update(RunRow)
            .where(
                RunRow.id == run_id, RunRow.status == RunStatus.RUNNING, RunRow.heartbeat_at < silent_since, ~beating
            )
            .values(status=RunStatus.STALLED, updated_at=now())
            .returning(RunRow)
            .execution_options(synchronize_session=False, populate_existing=True)
        ).one_or_none()
        if run is not None:
            stalled.append(run)
    return stalled


def claim_drift_due(*, session: Session, limit: int) -> list[RunRow]:
    """Up to `limit` finished runs whose comparison with their reference is due, oldest first,
    held for this transaction (`claims.claim_runs`: no row lock across runs, which a distributed
    table refuses), so two workers never compare the same run; read again once held, since
    another worker may have just done one."""
    due = session.scalars(
        select(RunRow.id).where(RunRow.drift_due_at.is_not(None)).order_by(RunRow.drift_due_at, RunRow.id).limit(limit)
    ).all()
    held = claims.claim_runs(session=session, task=claims.Task.REFERENCE_DRIFT, run_ids=list(due))
    if not held:
        return []
    return list(
        session.scalars(
            select(RunRow)
            .where(RunRow.id.in_(held), RunRow.drift_due_at.is_not(None))
            .order_by(RunRow.drift_due_at, RunRow.id)
            .execution_options(populate_existing=True)
        )
    )


def drift_done(*, session: Session, run: RunRow) -> None:
    """The run's comparison with its reference is recorded: nothing more is due."""
    run.drift_due_at = None
    session.flush()


def delete_run(*, session: Session, run_id: str) -> dict[str, int]:
    """Remove a run and every row that belongs to it; returns how many rows of each table went.

    One statement per table, each naming this one run (so it runs on one shard of a table
    distributed by run, and on one partition of a partitioned one), children before parents so
    that no foreign key has to cascade across tables: notes before the events they comment on,
    detector states and rollups before the metrics they belong to. Deliveries name their run
    without a foreign key (the outbox is the channel's history), and so do reference choices:
    both go too. The caller holds the run's background work (`claims.wait_for_run`) and commits.
    """
    removed: dict[str, int] = {}
    for model in (
        AnnotationRow,
        MuteRow,
        EventRow,
        DetectorStateRow,
        RollupRow,
        PointRow,
        MetricRow,
        RankRow,
        ReferenceRow,
        DeliveryRow,
    ):
        table = model.__table__
        result = session.execute(delete(table).where(table.c.run_id == run_id))
        removed[table.name] = result.rowcount or 0  # type: ignore[attr-defined]
    project = session.scalar(select(RunRow.project).where(RunRow.id == run_id))
    result = session.execute(delete(RunRow.__table__).where(RunRow.__table__.c.id == run_id))
    removed["runs"] = result.rowcount or 0  # type: ignore[attr-defined]
    if project is not None:  # remembered, so that a job still writing it cannot bring it back
        session.execute(
            insert_ignoring_conflicts(session, DeletedRunRow).values(run_id=run_id, project=project, deleted_at=now())
        )
    session.expire_all()
    return removed


def deleted_at(*, session: Session, run_id: str, project: str) -> datetime | None:
    """When the run of this id and project was deleted (None: it never was)."""
    return session.scalar(
        select(DeletedRunRow.deleted_at).where(DeletedRunRow.run_id == run_id, DeletedRunRow.project == project)
    )


def set_archived(*, session: Session, run: RunRow, archived: bool) -> RunRow:
    """Archive the run (left out of the runs list unless asked for) or bring it back."""
    run.archived_at = now() if archived else None
    session.flush()
    return run
