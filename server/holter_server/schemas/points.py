"""API schemas for points. A batch is columnar: per metric, parallel lists of steps and values."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

Step = Annotated[int, Field(strict=True, ge=0, le=2**63 - 1)]
METRIC_NAME_PATTERN = r"^[\w][\w.\-/:@()\[\]=+ ]*$"
MetricName = Annotated[str, Field(min_length=1, max_length=256, pattern=METRIC_NAME_PATTERN)]
WireFloat = Annotated[
    float,
    Field(description='a number, or one of the strings "NaN", "Infinity", "-Infinity" (JSON); msgpack floats as they are'),
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
    step that arrives again with a different value keeps the value stored first.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"metrics": {"loss": {"steps": [120, 121], "values": [2.31, "NaN"]}, "grad_norm": {"steps": [120], "values": [0.8]}}}]},
    )

    metrics: dict[MetricName, SeriesPoints]
    step_times: StepTimes | None = Field(
        default=None, description="wall time per step for metrics without their own `times` (what the client sends)"
    )

    def point_count(self) -> int:
        return sum(len(series.steps) for series in self.metrics.values())


class PointsStored(BaseModel):
    """What a batch did: points received, newly stored, and already present (duplicates)."""

    received: int
    stored: int
    duplicates: int


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
    times: list[float | None] | None = Field(description="wall times of the points (seconds since the epoch); null when downsampled unless `with_times` was asked")
    truncated: bool = Field(description="true when more points lie in the range than `limit` allowed")
    downsampled: bool = False
    bucket_width: int | None = Field(default=None, description="steps per bucket when downsampled")
    points_in_range: int | None = Field(default=None, description="points the downsampled picture stands for")
    buckets: BucketsPublic | None = None
