"""API schemas for comparison, family and metric-listing reads."""

from __future__ import annotations

from pydantic import BaseModel, Field

from holter_server.schemas.points import SeriesPointsPublic
from holter_server.schemas.runs import MetricPublic


class SeriesKeyPublic(BaseModel):
    """A (run, metric) pair that was asked for."""

    run_id: str
    metric: str


class SeriesManyPublic(BaseModel):
    """Several series cut on the same step range, for one comparison chart."""

    data: list[SeriesPointsPublic]
    missing: list[SeriesKeyPublic] = Field(description="pairs asked for that do not exist (unknown run or metric)")


class MetricsPublic(BaseModel):
    """A run's metrics matching a prefix, in natural order (`layer.9` before `layer.10`)."""

    data: list[MetricPublic]
    count: int


class FamilyMatrixPublic(BaseModel):
    """A metric family as a matrix: one row per metric, one column per step bucket.

    `values[i][j]` is `stat` of metric i over bucket j, over its finite values (null: none);
    `nonfinite[i][j]` counts its NaN and ±Inf there.
    """

    run_id: str
    prefix: str
    stat: str
    metrics: list[str]
    bucket_width: int
    bucket_starts: list[int]
    values: list[list[float | None]]
    nonfinite: list[list[int]]
