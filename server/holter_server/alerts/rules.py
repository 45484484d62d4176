"""Which alert rules an event matches. Pure: facts in, a yes or no out."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass

from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.severities import DEFAULT_MIN_SEVERITY, Level, rank

# What a new project's first channel is told about unless someone says otherwise.
DEFAULT_RULES = (
    # the tripwire's report names the module where the NaN began: critical on the divergence it explains
    {
        "name": "divergence and NaN",
        "kinds": [EventKind.DIVERGENCE, EventKind.FIRST_NONFINITE],
        "min_severity": DEFAULT_MIN_SEVERITY,
    },
    {
        "name": "run stalled or crashed",
        "kinds": [EventKind.RUN_STALLED, EventKind.RUN_CRASHED],
        "min_severity": DEFAULT_MIN_SEVERITY,
    },
    {"name": "logprob mismatch off zero", "kinds": [EventKind.MISMATCH_OFF_ZERO], "min_severity": DEFAULT_MIN_SEVERITY},
    # an RL policy turned near-deterministic (a KL out of its band and a reward collapse are divergences)
    {"name": "policy entropy collapse", "kinds": [EventKind.ENTROPY_COLLAPSE], "min_severity": DEFAULT_MIN_SEVERITY},
    # a distributed job's ranks: the slow one, the hung job, the lost rank, the rank out of its peers' band
    {
        "name": "ranks of a distributed job",
        "kinds": [EventKind.STRAGGLER, EventKind.RANK_HUNG, EventKind.RANK_LOST, EventKind.RANK_OUTLIER],
        "min_severity": DEFAULT_MIN_SEVERITY,
    },
    # the job asked for it (run.alert): every level reaches chat, as wandb's alerts do
    {"name": "the training job's own alerts", "kinds": [EventKind.ALERT], "min_severity": Level.INFO},
)


@dataclass(frozen=True)
class RuleSpec:
    """The filters of one rule; None means any."""

    project: str | None = None
    run_tag: str | None = None
    metric_pattern: str | None = None
    kinds: tuple[str, ...] | None = None
    min_severity: str = DEFAULT_MIN_SEVERITY
    threshold_op: str | None = None
    threshold_value: float | None = None


@dataclass(frozen=True)
class EventFacts:
    """What a rule looks at in an event and its run."""

    project: str
    run_tags: tuple[str, ...]
    metric: str | None
    kind: str
    severity: str


def matches(rule: RuleSpec, event: EventFacts) -> bool:
    """True when the event passes every filter of an event rule (threshold rules never match events)."""
    if rule.threshold_op is not None:
        return False
    if rule.project is not None and rule.project != event.project:
        return False
    if rule.run_tag is not None and rule.run_tag not in event.run_tags:
        return False
    if rule.metric_pattern is not None and (
        event.metric is None or not fnmatch.fnmatchcase(event.metric, rule.metric_pattern)
    ):
        return False
    if rule.kinds and event.kind not in rule.kinds:
        return False
    return rank(event.severity) >= rank(rule.min_severity)


def threshold_applies(rule: RuleSpec, project: str, run_tags: tuple[str, ...], metric: str) -> bool:
    """True when a threshold rule watches this metric of this run."""
    if rule.threshold_op is None:
        return False
    if rule.project is not None and rule.project != project:
        return False
    if rule.run_tag is not None and rule.run_tag not in run_tags:
        return False
    return rule.metric_pattern is None or fnmatch.fnmatchcase(metric, rule.metric_pattern)


def first_crossing(rule: RuleSpec, steps: list[int], values: list[float]) -> tuple[int, float] | None:
    """The first (step, value) that crosses the rule's threshold, or None."""
    for step, value in zip(steps, values):
        if rule.threshold_op == "nonfinite" and not math.isfinite(value):
            return step, value
        if rule.threshold_op == "above" and (value > rule.threshold_value or (math.isnan(value))):  # type: ignore[operator]
            return step, value
        if rule.threshold_op == "below" and (value < rule.threshold_value or math.isnan(value)):  # type: ignore[operator]
            return step, value
    return None
