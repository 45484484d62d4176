"""API schemas for points. A batch is columnar: per metric, parallel lists of steps and values.

A metric is checked on its own: a batch whose `loss` is fine and whose `mfu(%)` is not stores
the loss and lists the refused metric with its reason (`PointsStored.refused`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from holter_server.schemas import MAX_BIGINT
from holter_server.schemas.vocabulary import MAX_METRIC_NAME_LENGTH, KindName, MetricName, MetricPattern
from holter_server.wire import shown

Step = Annotated[int, Field(strict=True, ge=0, le=MAX_BIGINT)]
# Control characters (C0, DEL, C1), lone surrogates and the line/paragraph separators: the only
# characters a metric name may not hold. Training frameworks log `mfu(%)` (torchtitan),
# `lm loss` (Megatron), `train/loss@step#`: every printable character is fair.
_UNFIT_IN_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")
WireFloat = Annotated[
    float,
    Field(
        description='a number, or one of the strings "NaN", "Infinity", "-Infinity" (JSON); msgpack floats as they are'
    ),
]


class SeriesPoints(BaseModel):
    """The points of one metric in a batch."""

    model_config = ConfigDict(extra="forbid")

    steps: list[Step] = Field(description="integer steps, >= 0")
    values: list[WireFloat]
    times: list[float | None] | None = Field(
        default=None, description="wall-clock seconds since the epoch, per point (else from the batch's step_times)"
    )

    @model_validator(mode="after")
    def _same_lengths(self) -> SeriesPoints:
        if len(self.values) != len(self.steps):
            raise ValueError(f"steps has {len(self.steps)} entries but values has {len(self.values)}")
        if self.times is not None and len(self.times) != len(self.steps):
            raise ValueError(f"steps has {len(self.steps)} entries but times has {len(self.times)}")
        return self


class StepTimes(BaseModel):
    """Wall-clock time per step, shared by every metric of the batch logged at that step."""

    model_config = ConfigDict(extra="forbid")

    steps: list[Step]
    times: list[float]

    @model_validator(mode="after")
    def _same_lengths(self) -> StepTimes:
        if len(self.times) != len(self.steps):
            raise ValueError(f"step_times has {len(self.steps)} steps but {len(self.times)} times")
        return self


class PointsBatch(BaseModel):
    """A batch of points for many metrics of one run.

    A point is identified by (run, metric, step): re-sending a batch stores nothing twice, and a
    step that arrives again with a different value keeps the value stored first (the answer
    lists such metrics under `conflicts`). A metric whose name or points are malformed is
    refused on its own (listed under `refused`); the other metrics are stored.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "metrics": {
                        "loss": {"steps": [120, 121], "values": [2.31, "NaN"]},
                        "grad_norm": {"steps": [120], "values": [0.8]},
                    }
                }
            ]
        },
    )

    metrics: dict[MetricName, SeriesPoints]
    step_times: StepTimes | None = Field(
        default=None, description="wall time per step for metrics without their own `times` (what the client sends)"
    )
    kinds: dict[MetricPattern, KindName] | None = Field(  # type: ignore[valid-type]
        default=None,
        max_length=1000,
        description='declared kinds by metric name or glob ({"train/ce": "loss"}): a declared kind always wins over '
        "the name",
    )


class _BatchEnvelope(PointsBatch):
    """The batch as first read: its metrics are checked one by one afterwards (`read_batch`)."""

    metrics: dict[str, Any]  # type: ignore[assignment]


class MetricRefused(BaseModel):
    """A metric of the batch that was not stored, and why."""

    metric: str = Field(description="the name as sent (characters that cannot be shown are escaped)")
    reason: str
    points: int = Field(description="points of this metric in the batch (0 when they could not be counted)")


class MetricConflict(BaseModel):
    """A metric with points at steps already stored with another value: the value stored first is kept."""

    metric: str
    count: int = Field(description="points of this batch whose step held another value")
    steps: list[int] = Field(description="the first of those steps (at most 10)")


class PointsStored(BaseModel):
    """What a batch did. `received` counts the points of the metrics taken in; of those,
    `stored` were new and `duplicates` were at steps already stored (a re-send, or a
    different value: then listed in `conflicts`). Refused metrics are not in these counts."""

    received: int
    stored: int
    duplicates: int
    refused: list[MetricRefused] = Field(default_factory=list, description="metrics not stored, each with its reason")
    conflicts: list[MetricConflict] = Field(
        default_factory=list, description="metrics re-sent with another value at a stored step"
    )


@dataclass(frozen=True)
class ReadBatch:
    """A batch after its metrics were checked one by one."""

    metrics: dict[str, SeriesPoints]
    step_times: StepTimes | None
    refused: list[MetricRefused]
    kinds: dict[str, str] | None = None

    def point_count(self) -> int:
        return sum(len(series.steps) for series in self.metrics.values())


# A refusal lists this many of a metric's problems, and counts the rest: a batch of millions of
# bad values must not answer with millions of messages (issue 47: 46.9 MB for 1M nulls).
MAX_LISTED_PROBLEMS = 10
_NONFINITE_NAMES = frozenset({"NaN", "Infinity", "-Infinity", "nan", "inf", "-inf", "Inf", "-Inf"})


def read_batch(body: Any) -> ReadBatch:
    """Check a decoded batch: its shape as a whole (a `ValidationError` when that is wrong),
    then each metric's name and points on their own, refusing only the metrics at fault.

    A column of the wrong things (millions of nulls) is found by one cheap pass per column and
    refused with its first bad element and a count, before the validator would build an error for
    each element (4M null steps cost 23 CPU-seconds and 4.4 GB that way).

    The batch's `kinds` are part of its shape: a kind that is not in the vocabulary fails the
    whole batch (a 422 listing the kinds). Storing the points read as another kind than the
    sender declared would misread them without a word; refusing the metrics it names would
    lose points over a typo in a declaration.
    """
    if isinstance(body, dict) and isinstance(times := body.get("step_times"), dict):
        problem = _column_problem(times, (("steps", _is_step, _STEP_RULE), ("times", _is_time, _TIME_RULE)))
        if problem is not None:
            raise BatchShapeError(f"step_times.{problem}")
    envelope = _BatchEnvelope.model_validate(body)
    metrics: dict[str, SeriesPoints] = {}
    refused: list[MetricRefused] = []
    for name, raw in envelope.metrics.items():
        problem = metric_name_problem(name) or _column_problem(raw, _SERIES_COLUMNS)
        if problem is None:
            try:
                metrics[name] = SeriesPoints.model_validate(raw)
                continue
            except ValidationError as exc:
                problem = problems_text([_error_text(error) for error in exc.errors(include_url=False)])
        refused.append(MetricRefused(metric=shown(name), reason=problem, points=_point_count(raw)))
    return ReadBatch(metrics=metrics, step_times=envelope.step_times, refused=refused, kinds=envelope.kinds)


def metric_name_problem(name: str) -> str | None:
    """Why `name` cannot be a metric name, or None when it can."""
    if not name:
        return "a metric name may not be empty"
    if len(name) > MAX_METRIC_NAME_LENGTH:
        return f"a metric name may have at most {MAX_METRIC_NAME_LENGTH} characters, this one has {len(name)}"
    unfit = _UNFIT_IN_NAME.search(name)
    if unfit is not None:
        return f"a metric name may not hold the control character {shown(unfit.group())} (at position {unfit.start()})"
    return None


class BatchShapeError(ValueError):
    """A batch whose shape as a whole is wrong, found before the validator (a 422 with this text)."""


def problems_text(problems: list[str]) -> str:
    """The first `MAX_LISTED_PROBLEMS` problems, and how many more there are."""
    listed = "; ".join(problems[:MAX_LISTED_PROBLEMS])
    more = len(problems) - MAX_LISTED_PROBLEMS
    return listed + (f"; and {more:,} more" if more > 0 else "")


def _is_step(item: Any) -> bool:
    return type(item) is int and 0 <= item <= MAX_BIGINT


def _is_value(item: Any) -> bool:
    if type(item) in (int, float):
        return True
    if type(item) is not str:
        return False
    if item in _NONFINITE_NAMES:
        return True
    try:
        float(item)
    except ValueError:
        return False
    return True


def _is_time(item: Any) -> bool:
    return item is None or type(item) in (int, float)


_STEP_RULE = "a step is an integer from 0 to 2**63-1"
_VALUE_RULE = 'a value is a number, or "NaN", "Infinity" or "-Infinity"'
_TIME_RULE = "a time is a number of seconds since the epoch"
_SERIES_COLUMNS = (("steps", _is_step, _STEP_RULE), ("values", _is_value, _VALUE_RULE), ("times", _is_time, _TIME_RULE))


def _column_problem(raw: Any, columns: Any) -> str | None:
    """The first element of `raw`'s columns (name, test, rule) that no check would pass, with how
    many of the column fail, in one pass per column; None when every element passes (or a column
    is not a list: the validator says so)."""
    if not isinstance(raw, dict):
        return None
    for name, fits, rule in columns:
        column = raw.get(name)
        if not isinstance(column, list):
            continue
        first = next((index for index, item in enumerate(column) if not fits(item)), None)
        if first is not None:
            count = sum(1 for item in column if not fits(item))
            return f"{name}[{first}]: {rule} ({count:,} of {len(column):,} elements are not)"
    return None


def _error_text(error: Any) -> str:
    location = ".".join(shown(str(part)) for part in error["loc"])
    return f"{location}: {error['msg']}" if location else error["msg"]


def _point_count(raw: Any) -> int:
    steps = raw.get("steps") if isinstance(raw, dict) else None
    return len(steps) if isinstance(steps, list) else 0


class BucketsPublic(BaseModel):
    """Per-bucket summaries of a downsampled series, as parallel columns. Bucket i holds steps
    `start[i]` to `start[i] + bucket_width - 1` (cut to the range read). `min`, `max` and `mean`
    are over finite values (null when a bucket has none); `nan`, `posinf` and `neginf` count the
    non-finite values, so none is ever averaged away."""

    start: list[int]
    count: list[int]
    min: list[float | None]
    max: list[float | None]
    mean: list[float | None]
    first: list[float | str]
    last: list[float | str]
    nan: list[int]
    posinf: list[int]
    neginf: list[int]


class SeriesPointsPublic(BaseModel):
    """Points of one metric in step order (JSON: non-finite values as "NaN", "Infinity", "-Infinity").

    Downsampled (`downsampled` true) when the range held more than `max_points` points: `steps`
    and `values` are then each bucket's minimum and maximum at the steps where they happened
    (or its first value when nothing in it is finite), `buckets` the summaries behind them.
    """

    run_id: str
    metric: str
    start: int | None = Field(default=None, description="first step of the range read, narrowed to the series")
    end: int | None = Field(default=None, description="last step of the range read, narrowed to the series")
    steps: list[int]
    values: list[float | str]
    times: list[float | None] | None = Field(
        description="wall times of the points (seconds since the epoch); null when downsampled unless `with_times` "
        "was asked"
    )
    truncated: bool = Field(description="true when more points lie in the range than `limit` allowed")
    downsampled: bool = False
    bucket_width: int | None = Field(default=None, description="steps per bucket when downsampled")
    points_in_range: int | None = Field(default=None, description="points the downsampled picture stands for")
    buckets: BucketsPublic | None = None
