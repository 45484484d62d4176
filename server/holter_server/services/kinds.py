"""What a run's metrics are: each understood from what was declared about it and from its name
(see `holter_server.vocabulary`); declaring kinds has every metric whose kind changed analysed
again from its first point."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session

from holter_server.store import claims, detection_queue
from holter_server.store import events as events_store
from holter_server.store import runs as runs_store
from holter_server.store.models import RunRow
from holter_server.vocabulary.kinds import MetricKinds
from holter_server.vocabulary.names import Understanding, understand_all


def understood_metrics(*, session: Session, run: RunRow) -> dict[str, Understanding]:
    """Every metric of the run with its kind and how Holter knows it."""
    return understand_all(runs_store.metric_names(session=session, run_id=run.id), declarations=run.metric_definitions)


def run_metric_kinds(*, session: Session, run: RunRow | None) -> MetricKinds:
    """What each metric of the run is (declared or recognised), read once and passed down to the
    rules; a name it does not hold is read with the run's declarations (none without a run)."""
    if run is None:
        return MetricKinds()
    return metric_kinds_of(understood_metrics(session=session, run=run), run)


def metric_kinds_of(understood: Mapping[str, Understanding], run: RunRow | None) -> MetricKinds:
    """The run's `MetricKinds` from its metrics already understood (`understood_metrics`)."""
    return MetricKinds(
        {name: u.kind for name, u in understood.items()}, run.metric_definitions if run is not None else None
    )


def understood_metrics_of_runs(*, session: Session, runs: Mapping[str, RunRow]) -> dict[str, dict[str, Understanding]]:
    """`understood_metrics` of many runs (run id → run), their names read in one query."""
    names = runs_store.metric_names_of_runs(session=session, run_ids=list(runs))
    return {
        run_id: _understood(
            tuple(sorted(names.get(run_id, []))), json.dumps(run.metric_definitions or {}, sort_keys=True)
        )
        for run_id, run in runs.items()
    }


def understood_metrics_named(*, names: Collection[str], run: RunRow) -> dict[str, Understanding]:
    """`understood_metrics` of the run, its metrics' names already read (shared: not to be changed)."""
    return _understood(tuple(sorted(names)), json.dumps(run.metric_definitions or {}, sort_keys=True))


@lru_cache(maxsize=1024)
def _understood(names: tuple[str, ...], declarations: str) -> dict[str, Understanding]:
    # Live detection asks for every run of every pass; a run's names and declarations change
    # rarely, and reading them again (a regex per rule per name) was a tenth of a pass.
    return understand_all(names, declarations=json.loads(declarations))


def declare(*, session: Session, run: RunRow, definitions: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Record definitions (per metric name or glob: kind, summary, step_metric) and return the
    metrics whose kind they changed; those lose their classifier events and are read again, from
    their first point, by live detection. A declared kind always wins over the name's reading."""
    if not definitions:
        return []
    hold_for_declaring(session=session, run_id=run.id)
    session.refresh(run, with_for_update=True)  # two batches declaring at once must not lose one's definitions
    names = runs_store.metric_names(session=session, run_id=run.id)
    before = understand_all(names, declarations=run.metric_definitions)
    runs_store.define_metrics(session=session, run=run, definitions=definitions)
    after = understand_all(names, declarations=run.metric_definitions)
    changed = sorted(name for name in names if before[name].kind != after[name].kind)
    reanalyse(session=session, run_id=run.id, metrics=changed)
    return changed


def hold_for_declaring(*, session: Session, run_id: str) -> None:
    """Wait until live detection lets go of the run and hold it until commit, before its row is
    locked: live detection takes its claim on a run, then the run's row; a declaration that locked
    the row first and then waited for the claim (to reset detection) deadlocked with it."""
    claims.wait_for_run(session=session, task=claims.Task.DETECTION, run_id=run_id)


def reanalyse(*, session: Session, run_id: str, metrics: list[str]) -> None:
    """Withdraw these metrics' classifier events and have detection start them over."""
    if not metrics:
        return
    wanted = set(metrics)
    ids = [m.metric_id for m in runs_store.list_metrics(session=session, run_id=run_id) if m.name in wanted]
    events_store.withdraw_metric_events(session=session, run_id=run_id, metrics=metrics)
    detection_queue.reset_detection(session=session, run_id=run_id, metric_ids=ids)
