"""What the runs table shows beside each run: chosen metrics' last and best values, and a
sparkline of its loss, read from the rollups (a few buckets per metric, whatever its length)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from holter_server.services import kinds, reads
from holter_server.store import runs as runs_store
from holter_server.store.models import RunRow
from holter_server.vocabulary.profiles import profile_for

SPARK_POINTS = 48  # a sparkline's points: the min and max of 24 buckets, so a spike still shows


@dataclass(frozen=True)
class MetricColumn:
    """One metric of one run in the table: its kind, last value, and best value (the lowest for a
    metric where up is bad, a loss; the highest for one where down is bad, a reward, throughput)."""

    kind: str
    last: float | None
    best: float | None
    best_step: int | None


def finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def table_columns(
    *, session: Session, runs: Sequence[RunRow], metrics: Sequence[str], sparkline_kind: str | None
) -> tuple[dict[str, dict[str, MetricColumn]], dict[str, dict[str, object]]]:
    """Per run: the chosen metrics' columns (those it has), and its sparkline: the first metric
    (by name) of `sparkline_kind` as `{"metric", "values"}` (absent when it has none)."""
    by_id: Mapping[str, RunRow] = {run.id: run for run in runs}
    understood = kinds.understood_metrics_of_runs(session=session, runs=by_id) if (metrics or sparkline_kind) else {}
    columns: dict[str, dict[str, MetricColumn]] = {}
    sparklines: dict[str, dict[str, object]] = {}
    for run in runs:
        known = understood.get(run.id, {})
        wanted = [m for m in metrics if m in known]
        spark = next((name for name in sorted(known) if known[name].kind == sparkline_kind), None)
        for name in dict.fromkeys([*wanted, *([spark] if spark else [])]):
            metric = runs_store.get_metric(session=session, run_id=run.id, name=name)
            if metric is None or not metric.count:
                continue
            read = reads.read_series(
                session=session, metric=metric, start=None, end=None, max_points=SPARK_POINTS, plain_cap=SPARK_POINTS
            )
            values = [float(v) for v in read.values]
            finite = [(v, step) for v, step in zip(values, read.steps) if math.isfinite(v)]
            if name in wanted:
                kind = known[name].kind
                up_is_bad = profile_for(name, kind).direction > 0
                best = (min if up_is_bad else max)(finite, key=lambda pair: pair[0]) if finite else None
                columns.setdefault(run.id, {})[name] = MetricColumn(
                    kind=kind,
                    last=finite_or_none(metric.last_value),
                    best=best[0] if best else None,
                    best_step=best[1] if best else None,
                )
            if name == spark:
                sparklines[run.id] = {"metric": name, "values": [v if math.isfinite(v) else None for v in values]}
    return columns, sparklines
