"""Runs as the API reads and changes them: find one, create or resume it, list a page of them
with their health and metric names, change its tags, notes and provenance, read its metrics.

The routes call these rather than the store (the import contract `routes reach the store through
a service`); the rows they return are what the schemas are built from (`RunPublic.from_row`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from holter_server.analysis.configs import flatten, parse_search, value_matches
from holter_server.store import events as events_store
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.store.models import MetricRow, RunRow
from holter_server.store.models.config_keys import MAX_CONFIG_KEY_LENGTH
from holter_server.store.runs import MergeTooLargeError, RunIdTakenError

# A run's first config keys offered as the project's columns: a config of 100,000 keys is kept
# whole, but nobody picks a column from past the first 10,000.
MAX_CONFIG_KEYS_OFFERED = 10_000

# The run and the metric series as the services hand them to the API: the store's rows, until
# the schemas are built from domain objects (issue 34).
StoredRun = RunRow
StoredMetric = MetricRow

__all__ = [
    "MAX_CONFIG_KEY_LENGTH",
    "MergeTooLargeError",
    "RunIdTakenError",
    "StoredMetric",
    "StoredRun",
    "create_or_resume_run",
    "find_metric",
    "find_run",
    "health_of_runs",
    "list_config_keys",
    "list_runs",
    "metric_names_of_runs",
    "metrics_named",
    "metrics_of_run",
    "projects",
    "set_provenance",
    "update_run",
]


def find_run(*, session: Session, run_id: str) -> RunRow | None:
    """The run, or None when there is none of that id."""
    return runs_store.get_run(session=session, run_id=run_id)


def create_or_resume_run(
    *,
    session: Session,
    run_id: str,
    project: str,
    name: str | None,
    config: dict[str, Any],
    tags: list[str],
    max_config_bytes: int | None,
    max_tags: int | None,
    reopen: bool = True,
) -> tuple[RunRow, bool]:
    """A new run, or the run of that id resumed with the config and tags merged (`resumed` True);
    `RunIdTakenError` when another project has the id, `MergeTooLargeError` past a limit.
    `reopen` False: an ended run stays ended (a job's rank joining late is no restart of the job).
    The config's keys new to the run are remembered as its project's (`list_config_keys`)."""
    existing = runs_store.get_run(session=session, run_id=run_id) if config else None
    known = set(flatten(existing.config or {})) if existing is not None else set()
    run, resumed = runs_store.create_or_resume_run(
        session=session,
        run_id=run_id,
        project=project,
        name=name,
        config=config,
        tags=tags,
        max_config_bytes=max_config_bytes,
        max_tags=max_tags,
        reopen=reopen,
    )
    new_keys = [key for key in flatten(config) if key not in known][:MAX_CONFIG_KEYS_OFFERED]
    if new_keys:
        runs_store.record_config_keys(session=session, project=run.project, keys=new_keys)
    return run, resumed


def deleted_at(*, session: Session, run_id: str, project: str) -> datetime | None:
    """When the run of this id and project was deleted, if it was: a deleted run stays deleted."""
    return runs_store.deleted_at(session=session, run_id=run_id, project=project)


def set_provenance(*, session: Session, run: RunRow, provenance: dict[str, Any]) -> None:
    """Record where the run came from (git commit, host, command, ...)."""
    runs_store.set_provenance(session=session, run=run, provenance=provenance)


def update_run(*, session: Session, run: RunRow, tags: list[str] | None, notes: str | None) -> RunRow:
    """Change the run's tags or notes (None: left as they are)."""
    return runs_store.update_run(session=session, run=run, tags=tags, notes=notes)


def list_runs(
    *,
    session: Session,
    project: str | None,
    status: str | None,
    tag: str | None,
    archived: str,
    limit: int,
    offset: int,
    search: str | None = None,
    config: str | None = None,
    config_keys: Sequence[str] | None = None,
) -> tuple[Sequence[RunRow], int, dict[str, dict[str, Any]] | None]:
    """A page of runs, newest first, how many match the filters in all, and, when `config_keys`
    is given, each run's values at those dotted keys alone (its rows' configs then left unread).

    `search`: words each found in a run (id, name, project, tags, config) and `key=value` words;
    `config`: `key=value` or a key the config must have (`analysis.configs.parse_search`). Both
    look at every run of the project, not a recent page: the words in the database, the values
    of the keys named (one value a run, never its whole config) matched here."""
    asked = parse_search(search, config)
    trimmed = config_keys is not None
    filters: dict[str, Any] = {"project": project, "status": status, "tag": tag, "archived": archived}
    if asked.values:
        # `lr=3e-4` also looks at the keys ending in `.lr` (`optimizer.lr`): people name the leaf
        groups = [
            [key, *runs_store.config_keys_ending(session=session, project=project, key=key, limit=20)]
            for key, _ in asked.values
        ]
        keys = list(dict.fromkeys(k for group in groups for k in [*group, *asked.keys]))
        matching = [
            run_id
            for run_id, values in runs_store.config_values_of_matching(
                session=session,
                words=asked.words,
                keys=keys,
                groups=[*groups, *([key] for key in asked.keys)],
                **filters,
            )
            if all(
                any(key in values and value_matches(values[key], wanted) for key in group)
                for group, (_, wanted) in zip(groups, asked.values, strict=True)
            )
        ]
        rows: Sequence[RunRow] = runs_store.runs_in_order(
            session=session, run_ids=matching[offset : offset + limit], without_config=trimmed
        )
        count = len(matching)
    else:
        rows, count = runs_store.list_runs(
            session=session,
            words=asked.words,
            config_keys=asked.keys,
            without_config=trimmed,
            limit=limit,
            offset=offset,
            **filters,
        )
    shown = None
    if trimmed:
        shown = runs_store.config_values(
            session=session, run_ids=[row.id for row in rows], keys=list(config_keys or ())
        )
    return rows, count, shown


def projects(*, session: Session, project: str | None) -> list[tuple[str, int, int]]:
    """Every project with runs (or the one named): its name, runs and how many are archived."""
    return runs_store.project_counts(session=session, project=project)


def list_config_keys(
    *, session: Session, project: str | None, contains: str | None, limit: int
) -> tuple[list[str], int]:
    """The dotted config keys the project's runs were created with (None: every project's) that
    hold `contains`, in order, at most `limit`, and how many there are in all."""
    return runs_store.list_config_keys(session=session, project=project, contains=contains, limit=limit)


def health_of_runs(*, session: Session, run_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
    """Each run's health (its worst open event's level) and how many events are open."""
    return events_store.health_of_runs(session=session, run_ids=run_ids)


def metric_names_of_runs(*, session: Session, run_ids: Sequence[str]) -> dict[str, list[str]]:
    """The names of each run's metric series (runs without any are left out)."""
    return runs_store.metric_names_of_runs(session=session, run_ids=run_ids)


def metrics_of_run(*, session: Session, run_id: str, ranks: bool = False) -> list[MetricRow]:
    """The run's metric series with their summaries, by name (`ranks`: a distributed job's other
    ranks' series too, which are otherwise left out: vocabulary/ranks.py)."""
    return list(runs_store.list_metrics(session=session, run_id=run_id, ranks=ranks))


def find_metric(*, session: Session, run_id: str, name: str) -> MetricRow | None:
    """One metric series of the run, or None when it has none of that name."""
    return runs_store.get_metric(session=session, run_id=run_id, name=name)


def metrics_named(*, session: Session, run_id: str, names: Iterable[str]) -> dict[str, MetricRow]:
    """The run's metric series of these names (name → series); names it lacks are left out."""
    return points_store.get_metrics(session=session, run_id=run_id, names=names)
