"""API schemas for seed groups, arm-against-arm comparisons and project settings."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from holter_server.analysis.seeds import GroupBand, SeedGroup
from holter_server.analysis.verdicts import Identity, Verdict
from holter_server.nonfinite import json_safe_column
from holter_server.services.compare import ArmComparison, ArmReading, Twins
from holter_server.services.repeats import Repeats


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
    verdict: str = Field(description="real effect, no detectable difference, or unknown (cannot be judged)")
    sentence: str = Field(description="the verdict in words with its numbers: difference, interval, effect size, test")
    primary: bool = Field(
        default=False, description="the measure chosen up front (tested at α; the others only after it, Holm-corrected)"
    )
    difference: float | None = Field(description="mean of B minus mean of A")
    ci_low: float | None = Field(default=None, description="the difference's confidence interval, low end")
    ci_high: float | None = Field(default=None, description="the difference's confidence interval, high end")
    confidence: float = Field(default=0.95, description="the interval's confidence level")
    effect_size: float | None = Field(
        default=None, description="the difference in seed standard deviations (Cohen's d); null without a spread"
    )
    sigma: float | None = Field(
        default=None,
        description="the seeds' standard deviation the test measured (pooled over the arms, or the stand-in's)",
    )
    test: str | None = Field(
        default=None,
        description="paired t-test (the arms ran the same seeds), Welch's t-test, t-test against the group's seeds, "
        "t-test on a stand-in seed spread; null when nothing could be tested",
    )
    paired: bool = False
    p_value: float | None = Field(description="the test's own p-value")
    p_adjusted: float | None = Field(
        default=None,
        description="the p-value compared with α: the primary's own; a secondary measure's after the primary and Holm",
    )
    spread: float | None = Field(
        description="the range of the seeds of the arm with the wider one; null with one run per arm (drawn, not "
        "the verdict's rule: see sigma and the interval)"
    )
    spread_seeds: int
    seeds_needed: int | None = Field(
        description="seeds per arm that would detect a difference of this size 80% of the time (101: more than 100)"
    )
    detectable_difference: float | None = Field(
        default=None, description="with no difference found: the smallest one this many seeds detect 80% of the time"
    )
    power_sentence: str | None = Field(
        default=None, description="with no difference found: what this many seeds can detect, and what more would"
    )
    stand_in: str | None = Field(
        default=None, description="with one run per arm: the seed group whose spread stood in for the arms' own"
    )
    interpolated: list[str] = Field(
        default_factory=list,
        description="runs that logged no point at the measure: their values lie on the line between the two around it",
    )
    a_runs: list[str] = Field(default_factory=list, description="the runs of arm A read, in the order of a_values")
    b_runs: list[str] = Field(default_factory=list, description="the runs of arm B read, in the order of b_values")
    a_values: list[float | None]
    b_values: list[float | None]
    step: int | None
    tokens: float | None
    step_range: list[int] | None

    @classmethod
    def from_verdict(cls, v: Verdict) -> VerdictPublic:
        interval = v.interval
        stand_in = v.stand_in
        return cls(
            measure=v.measure,
            where=v.where,
            verdict=v.verdict,
            sentence=v.sentence,
            primary=v.primary,
            difference=_finite(v.difference),
            ci_low=_finite(interval[0]) if interval else None,
            ci_high=_finite(interval[1]) if interval else None,
            effect_size=_finite(v.effect_size),
            sigma=_finite(v.sigma),
            test=v.test,
            paired=v.paired,
            p_value=_finite(v.p_value),
            p_adjusted=_finite(v.p_adjusted),
            spread=_finite(v.spread),
            spread_seeds=v.spread_seeds,
            seeds_needed=v.seeds_needed,
            detectable_difference=_finite(v.detectable),
            power_sentence=v.power_sentence,
            stand_in=stand_in.source if stand_in else None,
            interpolated=v.interpolated,
            a_runs=v.a_runs,
            b_runs=v.b_runs,
            a_values=[_finite(x) for x in v.a_values],
            b_values=[_finite(x) for x in v.b_values],
            step=v.step,
            tokens=v.tokens,
            step_range=list(v.step_range) if v.step_range else None,
        )


class IdentityPublic(BaseModel):
    """Runs of the two arms that logged bit-identical values of the metric, seed for seed."""

    sentence: str
    all_identical: bool = Field(description="every pair is identical: the change did nothing, or was never applied")
    pairs: int = Field(description="pairs of runs compared (the same seeds in both arms, or the one run of each)")
    identical: list[list[str]] = Field(description="[run of A, run of B] pairs whose every logged value is the same")
    points: int

    @classmethod
    def from_identity(cls, found: Identity) -> IdentityPublic:
        return cls(
            sentence=found.sentence,
            all_identical=found.all_identical,
            pairs=len(found.pairs),
            identical=[list(p) for p in found.identical],
            points=found.points,
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
        description="the primary measure, chosen up front: at matched tokens when every run counts tokens, else at "
        "matched steps, or the one ?primary= names"
    )
    verdicts: list[VerdictPublic]
    identical: IdentityPublic | None = Field(
        default=None, description="runs that logged bit-identical values seed for seed (null: none did)"
    )
    stand_in: ArmPublic | None = Field(
        default=None, description="with one run per arm: the seed group whose spread stood in for the arms' own"
    )
    config_diff: list[ConfigChangePublic] = Field(description="non-seed config keys that differ between the arms")
    warnings: list[str] = Field(
        description="confounders: more than one key changed, different token counts, a learning rate changed along "
        "with something else"
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
            identical=IdentityPublic.from_identity(c.identity) if c.identity else None,
            stand_in=ArmPublic.from_reading(c.stand_in) if c.stand_in else None,
            config_diff=[ConfigChangePublic(key=ch.key, a=ch.a, b=ch.b) for ch in c.confounders.changes],
            warnings=c.confounders.warnings,
        )


class TwinPublic(BaseModel):
    """A run that read the same batches in the same order."""

    run_id: str
    name: str | None
    status: str | None
    differs: list[ConfigChangePublic] = Field(description="config keys in which it differs (a: this run, b: the twin)")


class TwinsPublic(BaseModel):
    """The runs of the project with this run's data order, whatever else differs (width, optimiser,
    init seed): a spike they share at one step is the batch, not the optimiser."""

    run_id: str
    data_order: dict[str, Any] | None = Field(
        description="the keys that decide which batch comes at which step; null: the config names no data"
    )
    sentence: str
    twins: list[TwinPublic]

    @classmethod
    def from_twins(cls, found: Twins) -> TwinsPublic:
        return cls(
            run_id=found.run_id,
            data_order=found.data_order,
            sentence=found.sentence,
            twins=[
                TwinPublic(
                    run_id=t.run_id,
                    name=t.name,
                    status=found.statuses.get(t.run_id),
                    differs=[ConfigChangePublic(key=c.key, a=c.a, b=c.b) for c in t.differs],
                )
                for t in found.twins
            ],
        )


class DifferencePublic(BaseModel):
    metric: str
    step: int
    a: float | None = Field(description="this run's value")
    b: float | None = Field(description="the repeat's value")
    relative: float | None


class RepeatPublic(BaseModel):
    """A run with this run's config and seeds, compared value for value."""

    run_id: str
    name: str | None
    status: str | None
    same_code: bool | None = Field(description="the same commit and local changes; null: a code version is unknown")
    code: str = Field(description="the repeat's code version in words")
    identical: bool = Field(description="every value both logged is the same, bit for bit")
    metrics: list[str] = Field(description="the metrics compared (what training computes: losses, norms, rewards)")
    points: int
    first_difference: DifferencePublic | None
    environment: list[str] = Field(description="what differs between the two environments ('torch 2.3.0 → 2.4.0')")
    sentence: str


class RepeatsPublic(BaseModel):
    """Determinism: the runs of the project with this run's config and seeds, and whether they
    logged the same values (when the code is the same too, they should)."""

    run_id: str
    code: str = Field(description="this run's code version in words")
    sentence: str
    repeats: list[RepeatPublic]

    @classmethod
    def from_repeats(cls, found: Repeats) -> RepeatsPublic:
        return cls(
            run_id=found.run_id,
            code=found.code,
            sentence=found.sentence,
            repeats=[
                RepeatPublic(
                    run_id=r.run_id,
                    name=r.name,
                    status=found.statuses.get(r.run_id),
                    same_code=r.same_code,
                    code=r.code,
                    identical=r.identical,
                    metrics=r.compared,
                    points=r.points,
                    first_difference=DifferencePublic(
                        metric=r.difference.metric,
                        step=r.difference.step,
                        a=_finite(r.difference.a),
                        b=_finite(r.difference.b),
                        relative=r.difference.relative,
                    )
                    if r.difference
                    else None,
                    environment=r.environment,
                    sentence=r.sentence,
                )
                for r in found.repeats
            ],
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
