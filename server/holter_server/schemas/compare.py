"""API schemas for seed groups, arm-against-arm comparisons and project settings."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from holter_server.analysis.seeds import GroupBand, SeedGroup
from holter_server.analysis.verdicts import Verdict
from holter_server.nonfinite import json_safe_column
from holter_server.services.compare import ArmComparison, ArmReading


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


class SeedGroupPublic(BaseModel):
    """Runs of one config told apart only by their seeds."""

    run_ids: list[str]
    size: int
    config: dict[str, Any] = Field(description="what the runs share (flat dotted keys, seed keys left out)")
    seeds: dict[str, dict[str, Any]] = Field(description="each run's seed keys")

    @classmethod
    def from_group(cls, group: SeedGroup) -> SeedGroupPublic:
        return cls(run_ids=group.run_ids, size=group.size, config=group.config, seeds=group.seeds)


class SeedGroupsPublic(BaseModel):
    project: str
    data: list[SeedGroupPublic]


class BandPublic(BaseModel):
    """A group's curve on a shared step grid: median, min–max, median ± robust spread (1.4826 × MAD)."""

    steps: list[int]
    median: list[float | str]
    low: list[float | str]
    high: list[float | str]
    spread: list[float | str] = Field(
        description="robust spread of the seeds at each step: 1.4826 × median absolute deviation"
    )
    seeds: list[int] = Field(description="how many seeds cover each step")

    @classmethod
    def from_band(cls, band: GroupBand) -> BandPublic:
        return cls(
            steps=band.steps.tolist(),
            median=json_safe_column(band.median.tolist()),
            low=json_safe_column(band.low.tolist()),
            high=json_safe_column(band.high.tolist()),
            spread=json_safe_column(band.spread.tolist()),
            seeds=band.seeds.tolist(),
        )


class ArmPublic(BaseModel):
    kind: str = Field(description="run or group")
    run_id: str = Field(description="the run named; for a group, the run whose group it is")
    label: str
    run_ids: list[str]
    missing: list[str] = Field(description="members that do not log the metric")
    config: dict[str, Any]
    band: BandPublic

    @classmethod
    def from_reading(cls, arm: ArmReading) -> ArmPublic:
        return cls(
            kind=arm.kind,
            run_id=arm.run_id,
            label=arm.label,
            run_ids=arm.run_ids,
            missing=arm.missing,
            config=arm.config,
            band=BandPublic.from_band(arm.band),
        )


class VerdictPublic(BaseModel):
    measure: str = Field(description="final, at_step, at_tokens or auc")
    where: str
    verdict: str = Field(description="real effect, noise or unknown")
    sentence: str
    difference: float | None = Field(description="mean of B minus mean of A")
    spread: float | None = Field(
        description="the seed spread (range of an arm's seeds, the wider arm's); null with one run per arm"
    )
    spread_seeds: int
    p_value: float | None
    seeds_needed: int | None = Field(description="seeds per arm that would settle a difference of this size")
    a_values: list[float | None]
    b_values: list[float | None]
    step: int | None
    tokens: float | None
    step_range: list[int] | None

    @classmethod
    def from_verdict(cls, v: Verdict) -> VerdictPublic:
        return cls(
            measure=v.measure,
            where=v.where,
            verdict=v.verdict,
            sentence=v.sentence,
            difference=_finite(v.difference),
            spread=_finite(v.spread),
            spread_seeds=v.spread_seeds,
            p_value=_finite(v.p_value),
            seeds_needed=v.seeds_needed,
            a_values=[_finite(x) for x in v.a_values],
            b_values=[_finite(x) for x in v.b_values],
            step=v.step,
            tokens=v.tokens,
            step_range=list(v.step_range) if v.step_range else None,
        )


class ConfigChangePublic(BaseModel):
    key: str
    a: Any
    b: Any


class ArmComparisonPublic(BaseModel):
    """Arm A against arm B on a metric: both bands, a verdict per measure, and the confounders."""

    metric: str
    a: ArmPublic
    b: ArmPublic
    headline: VerdictPublic | None = Field(
        description="at matched tokens when both arms count tokens, else at matched steps"
    )
    verdicts: list[VerdictPublic]
    config_diff: list[ConfigChangePublic] = Field(description="non-seed config keys that differ between the arms")
    warnings: list[str] = Field(
        description="confounders: more than one key changed, different token counts, a different learning rate"
    )

    @classmethod
    def from_comparison(cls, c: ArmComparison) -> ArmComparisonPublic:
        headline = c.headline
        return cls(
            metric=c.metric,
            a=ArmPublic.from_reading(c.a),
            b=ArmPublic.from_reading(c.b),
            headline=VerdictPublic.from_verdict(headline) if headline else None,
            verdicts=[VerdictPublic.from_verdict(v) for v in c.verdicts],
            config_diff=[ConfigChangePublic(key=ch.key, a=ch.a, b=ch.b) for ch in c.confounders.changes],
            warnings=c.confounders.warnings,
        )


class ProjectSettingsSet(BaseModel):
    """What a project declares about its configs."""

    model_config = ConfigDict(extra="forbid")

    seed_keys: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="more seed keys (dotted key or last segment) beyond seed, data_seed and *_seed",
    )
    data_seed_keys: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="seed keys that set the data order (beyond data_seed, shuffle_seed...): twins share them",
    )


class ProjectSettingsPublic(BaseModel):
    project: str
    seed_keys: list[str]
    data_seed_keys: list[str]
    updated_at: datetime | None
