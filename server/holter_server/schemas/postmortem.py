"""API schemas for post-mortem review."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from holter_server.postmortem.levers import Candidate, LeverReport
from holter_server.schemas.annotations import AnnotationPublic
from holter_server.schemas.events import EventPublic
from holter_server.schemas.runs import RunPublic
from holter_server.schemas.zoom import Zoomable


class LeverPublic(BaseModel):
    key: str
    metric: str
    kind: str
    feature: str = Field(description="presence, period, first_step, spike_spacing, count or peak_score")
    relation: str = Field(description="proportional, correlated, separates or determines")
    statistic: float = Field(description="Pearson r, or 1.0 for a perfect split")
    p_value: float = Field(description="permutation p-value (exact for up to 8 runs)")
    runs: int
    evidence: str
    confounded_with: list[str] = Field(
        description="keys that move with this one (at most 20; the whole group is in the report's `confounded`)"
    )

    @classmethod
    def from_candidate(cls, c: Candidate) -> LeverPublic:
        return cls(
            key=c.key,
            metric=c.metric,
            kind=c.kind,
            feature=c.feature,
            relation=c.relation,
            statistic=c.statistic,
            p_value=c.p_value,
            runs=c.runs,
            evidence=c.evidence,
            confounded_with=c.confounded_with,
        )


class LeversPublic(BaseModel):
    """Config keys whose value changes the structure of a failure, best first."""

    runs: int
    varying_keys: list[str]
    candidates: list[LeverPublic]
    confounded: list[list[str]] = Field(
        description="keys that move together across these runs: the runs cannot tell them apart"
    )
    note: str

    @classmethod
    def from_report(cls, report: LeverReport) -> LeversPublic:
        return cls(
            runs=report.runs,
            varying_keys=report.varying_keys,
            candidates=[LeverPublic.from_candidate(c) for c in report.candidates],
            confounded=report.confounded,
            note=report.note,
        )


class ReferenceSet(BaseModel):
    """Make a run the reference of its project, or of a tag within it."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    tag: str | None = Field(default=None, max_length=128, description="omit for the project-wide reference")
    by: str | None = Field(
        default=None, max_length=128, description="ignored (kept for older clients): the key's name is recorded"
    )


class ReferencePublic(BaseModel):
    project: str
    tag: str | None
    run_id: str
    set_by: str | None
    created_at: datetime


class DriftPublic(Zoomable):
    start_step: int
    end_step: int
    mean_gap: float
    direction: str
    points: int


class ComparisonPublic(BaseModel):
    """A run's metric against its reference, aligned by step: the band and where the run left it."""

    run_id: str
    reference_id: str
    metric: str
    steps: list[int] = Field(description="steps where the reference covers the run")
    values: list[float | str]
    reference: list[float]
    low: list[float]
    high: list[float]
    drifts: list[DriftPublic]


class PostMortemPublic(BaseModel):
    """A finished run's review: what a colleague would want on one page."""

    run: RunPublic
    summary: str
    timeline: list[EventPublic] = Field(description="every event and status change, in step order")
    annotations: list[AnnotationPublic]
