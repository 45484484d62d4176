"""What a run's config implies about a period: "period 64 = rollouts_num".

A sawtooth's period is the clue that points at its cause (DESIGN.md). Each rule of
`vocabulary.configs.PERIOD_RULES` turns the config into a number of steps (steps per epoch,
an interval, a rollout count, the steps one data shard lasts); a period within
`PERIOD_MATCH_TOLERANCE` of it (or half a step) is named with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from holter_server.analysis.configs import flatten
from holter_server.vocabulary.configs import PERIOD_MATCH_TOLERANCE, PERIOD_RULES, ROLES, PeriodRule, leaf


@dataclass(frozen=True)
class PeriodCause:
    """A rule whose implied period matches: its name, the number it implies and how it reads."""

    rule: str
    implied: float
    formula: str
    exact: bool

    def describe(self, period: float) -> str:
        """'period 64 = rollouts_num' or 'period 189 ≈ shard_tokens / (batch_size × seq_len)'."""
        return f"period {_number(period)} {'=' if self.exact else '≈'} {self.formula}"


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value - round(value)) < 0.05 else f"{value:,.1f}"


def _quantity(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def roles_in(config: dict[str, Any]) -> dict[str, tuple[str, float]]:
    """Per role, the config key that holds it and its value (the shortest key when several do)."""
    found: dict[str, tuple[str, float]] = {}
    for key, value in sorted(flatten(config).items(), key=lambda kv: (kv[0].count("."), kv[0])):
        number = _quantity(value)
        if number is None:
            continue
        for role, names in ROLES.items():
            if leaf(key) in names and role not in found:
                found[role] = (key.rsplit(".", 1)[-1], number)
    return found


def implied(rule: PeriodRule, roles: dict[str, tuple[str, float]]) -> tuple[float, str] | None:
    """The period `rule` implies from the config's roles, and its formula in the config's names."""
    if any(r not in roles for r in (*rule.numerator, *rule.denominator)):
        return None
    below = (
        [*rule.denominator, *(r for r in rule.optional if r in roles and roles[r][1] != 1)] if rule.denominator else []
    )
    top = math.prod(roles[r][1] for r in rule.numerator)
    bottom = math.prod(roles[r][1] for r in below) if below else 1.0
    names = " × ".join(roles[r][0] for r in rule.numerator)
    if below:
        under = " × ".join(roles[r][0] for r in below)
        names = f"{names} / ({under})" if len(below) > 1 else f"{names} / {under}"
    return top / bottom, names


def period_causes(period: float, config: dict[str, Any]) -> list[PeriodCause]:
    """Every rule whose implied period matches `period` (in steps), closest first."""
    if not period or not math.isfinite(period) or period <= 0:
        return []
    roles = roles_in(config)
    causes = []
    for rule in PERIOD_RULES:
        found = implied(rule, roles)
        if found is None:
            continue
        value, formula = found
        miss = abs(period - value)
        if miss <= max(0.5, PERIOD_MATCH_TOLERANCE * value):
            exact = miss <= 0.5 and abs(value - round(value)) < 1e-9
            causes.append(PeriodCause(rule.name, value, formula, exact))
    return sorted(causes, key=lambda c: abs(period - c.implied))


def cause_note(period: float, causes: list[PeriodCause]) -> str:
    """The causes as one clause: 'period 64 = rollouts_num; period 64 = eval_interval'."""
    return "; ".join(c.describe(period) for c in causes)


# Holter's own rhythms, in seconds, and what beats at each: a job measured by Holter slows a little
# whenever the client sends (its thread takes the interpreter for a moment) or samples the machine,
# and a step-time or throughput curve then shows that beat. A period at one of them is the monitor's
# footprint, not a finding about the job (issue 46: "period 4 steps" at 4 steps a second).
OWN_CADENCES: tuple[tuple[float, str], ...] = (
    (1.0, "the client's send, once a second (and a dashboard's refresh)"),
    (5.0, "a distributed job's rank sending every 5 s"),
    (10.0, "the system-vitals sampler, every 10 s"),
)
CADENCE_TOLERANCE = 0.1


def own_cadence(period_seconds: float) -> str | None:
    """What of Holter's own beats at this period (in seconds), or None when none does."""
    if not math.isfinite(period_seconds) or period_seconds <= 0:
        return None
    for seconds, what in OWN_CADENCES:
        if abs(period_seconds - seconds) <= CADENCE_TOLERANCE * seconds:
            return what
    return None


def period_seconds(steps: list[int], wall_times: list[float | None], period: float) -> float | None:
    """A period of `period` steps in seconds, from the wall times at the steps of its beats (the
    first and last with a time); None when they do not say."""
    timed = [(step, time) for step, time in zip(steps, wall_times) if time is not None]
    if len(timed) < 2 or period <= 0:
        return None
    (first, t0), (last, t1) = timed[0], timed[-1]
    beats = (last - first) / period
    return (t1 - t0) / beats if beats >= 1 else None
