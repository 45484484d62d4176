"""The lever finder: configuration parameters whose value changes the *structure* of a failure.

The model is the source story (shared/seeds/002): the glitch's period tracked `rollouts_num`
(8 → 128), which moved the search from "training instability" to "the rollout path". Given
runs with their configs and events, relate per-run event features (presence of a kind, first
step, count, sawtooth period, spike spacing, peak size) to every config key that varies, and
rank the candidates with their evidence. Pure: runs in, candidates out.

Guarding against invented levers: every candidate needs at least `MIN_RUNS` runs, a strong
relation, and a permutation p-value below `ALPHA` (exact for few runs); keys that move
together across the runs are reported as confounded instead of being told apart.

Bounded before it starts: the distinct config keys (`max_keys`, counted while the configs are
flattened) and the key × feature pairs (`max_pairs`) are checked before any grouping, so a
config of thousands of keys that all move together costs one refusal, not a partner list per
key; each candidate names at most `MAX_PARTNERS` of its confounded keys (the whole group is in
the report's `confounded`); the deadline is checked before every pair.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from holter_server.vocabulary.events import EventKind

MIN_RUNS = 3
ALPHA = 0.05
MIN_CORRELATION = 0.9
PERMUTATIONS = 5000
EXACT_RUNS = 8  # up to 8! = 40,320 pairings the permutation test tries them all
# What changes the shape of a failure ranks above what changes its size (count, peak_score).
STRUCTURAL = {"presence", "period", "first_step", "spike_spacing"}
MAX_PARTNERS = 20  # confounded keys named with each candidate; its whole group is in LeverReport.confounded


@dataclass(frozen=True)
class RunEvents:
    """One run as the lever finder sees it."""

    run_id: str
    config: dict[str, Any]
    events: Sequence[dict[str, Any]]  # each with metric, kind, start_step, period, score


@dataclass
class Candidate:
    """A config key whose value tracks a feature of a failure, with the evidence."""

    key: str
    metric: str
    kind: str
    feature: str
    relation: str  # proportional, correlated, separates, determines
    statistic: float
    p_value: float
    runs: int
    evidence: str
    confounded_with: list[str] = field(default_factory=list)

    @property
    def rank(self) -> float:
        weight = 1.0 if self.feature in STRUCTURAL else 0.5
        return weight * abs(self.statistic) * (1 - self.p_value) * min(1.0, self.runs / 5)


@dataclass
class LeverReport:
    runs: int
    varying_keys: list[str]
    candidates: list[Candidate]
    confounded: list[list[str]]
    note: str


def _flatten(config: dict[str, Any], *, limit: int | None = None) -> dict[str, Any]:
    """Nested configs by dotted key (`optimizer.betas`); a list of plain values is one value.
    Without recursion (a deep config must not overflow the stack); TooManyKeysError as soon as
    there are more than `limit` keys."""
    flat: dict[str, Any] = {}
    stack: list[tuple[dict[str, Any], str]] = [(config, "")]
    while stack:
        node, prefix = stack.pop()
        for key, value in node.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                stack.append((value, f"{name}."))
            elif (
                isinstance(value, (str, int, float, bool))
                or value is None
                or (
                    isinstance(value, list)
                    and all(isinstance(item, (str, int, float, bool)) or item is None for item in value)
                )
            ):
                flat[name] = value
                if limit is not None and len(flat) > limit:
                    raise TooManyKeysError(f"a run's config has more than {limit:,} keys")
    return flat


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)


def features(run: RunEvents) -> dict[tuple[str, str, str], float]:
    """Per (metric, kind, feature): the run's value. Presence is 1.0 when the kind occurred."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for event in run.events:
        if event.get("metric"):
            grouped.setdefault((event["metric"], event["kind"]), []).append(event)
    found: dict[tuple[str, str, str], float] = {}
    for (metric, kind), events in grouped.items():
        found[(metric, kind, "presence")] = 1.0
        found[(metric, kind, "count")] = float(len(events))
        found[(metric, kind, "first_step")] = float(min(e["start_step"] for e in events))
        found[(metric, kind, "peak_score")] = float(max(e.get("score") or 0.0 for e in events))
        periods = [e["period"] for e in events if e.get("period")]
        if periods:
            found[(metric, kind, "period")] = float(statistics.median(periods))
        starts = sorted(e["start_step"] for e in events)
        if kind == EventKind.SPIKE and len(starts) >= 3:
            found[(metric, kind, "spike_spacing")] = float(statistics.median(b - a for a, b in zip(starts, starts[1:])))
    return found


def _abs_pearson(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """|Pearson's r| of `xs` with each row of `ys` (0 where either side is constant)."""
    dx = xs - xs.mean()
    dy = ys - ys.mean(axis=-1, keepdims=True)
    spread = np.sqrt((dx * dx).sum() * (dy * dy).sum(axis=-1))
    covariance = (dy * dx).sum(axis=-1)
    return np.abs(np.divide(covariance, spread, out=np.zeros_like(covariance), where=spread > 0))


def _permutation_p(xs: Sequence[float], ys: Sequence[float], seed: int = 0) -> float:
    """P(|r| >= the observed |r|) when ys are paired with xs at random: scipy's permutation test,
    exact over every pairing for up to EXACT_RUNS runs, PERMUTATIONS sampled pairings beyond."""
    fixed = np.asarray(xs, dtype=float)
    n_resamples = math.factorial(len(ys)) if len(ys) <= EXACT_RUNS else PERMUTATIONS
    from scipy import stats  # here, not at the top: a second to import, which the worker never needs

    result = stats.permutation_test(
        (np.asarray(ys, dtype=float),),  # one sample: its order against the fixed xs is what varies
        lambda shuffled, axis: _abs_pearson(fixed, shuffled),
        permutation_type="pairings",
        vectorized=True,
        n_resamples=n_resamples,
        alternative="greater",
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


def _separation_p(n: int, positives: int) -> float:
    """Chance that a random labelling of n sorted runs is split perfectly by one threshold."""
    if positives in (0, n):
        return 1.0
    return min(1.0, 2 / math.comb(n, positives))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    return str(value)


class TooManyPairsError(ValueError):
    """More config key × feature pairs (or config keys) than one request may test."""


class TooManyKeysError(TooManyPairsError):
    """More distinct config keys across the runs than one request may read."""


def find_levers(
    runs: Sequence[RunEvents],
    *,
    max_pairs: int | None = None,
    max_seconds: float | None = None,
    max_keys: int | None = None,
) -> LeverReport:
    """Rank config keys whose value changes the structure of a failure across `runs`.

    `max_keys`: refuse (TooManyKeysError) when the runs' configs hold more distinct keys than
    that, counted while they are flattened; `max_pairs`: refuse (TooManyPairsError) when the runs
    give more config key × feature pairs than that (each pair may cost a permutation test), both
    before keys are grouped; `max_seconds`: stop testing pairs after that long and say so in the
    note (the candidates found so far are returned)."""
    configs: dict[str, dict[str, Any]] = {}
    distinct: set[str] = set()
    try:
        for run in runs:
            configs[run.run_id] = _flatten(run.config, limit=max_keys)
            distinct.update(configs[run.run_id])
            if max_keys is not None and len(distinct) > max_keys:
                raise TooManyKeysError("")
    except TooManyKeysError:
        raise TooManyKeysError(
            f"these {len(runs)} runs' configs hold more than {max_keys:,} distinct keys (HOLTER_MAX_LEVER_KEYS); "
            "select fewer runs, or runs whose configs differ in fewer keys"
        ) from None
    keys = sorted(distinct)
    varying = [k for k in keys if len({repr(cfg.get(k)) for cfg in configs.values()}) > 1]
    per_run = {run.run_id: features(run) for run in runs}
    feature_keys = sorted({f for fs in per_run.values() for f in fs})
    pairs = len(varying) * len(feature_keys)
    if len(runs) >= MIN_RUNS and max_pairs is not None and pairs > max_pairs:
        raise TooManyPairsError(
            f"these {len(runs)} runs give {len(varying):,} varying config keys × {len(feature_keys):,} event "
            f"features = {pairs:,} pairs to test, more than {max_pairs:,} (HOLTER_MAX_LEVER_PAIRS); select fewer runs"
        )
    confounded = _confounded(varying, configs, [run.run_id for run in runs])
    candidates: list[Candidate] = []
    if len(runs) < MIN_RUNS:
        return LeverReport(
            len(runs), varying, [], confounded, f"{len(runs)} runs: at least {MIN_RUNS} are needed to name a lever"
        )
    group_of = {key: group for group in confounded for key in group}  # each key in one group at most
    deadline = time.monotonic() + max_seconds if max_seconds is not None else None
    tested = 0
    for key in varying:
        with_key = [run.run_id for run in runs if configs[run.run_id].get(key) is not None]
        values = [configs[r][key] for r in with_key]
        for metric, kind, feature in feature_keys:
            if deadline is not None and time.monotonic() > deadline:
                break
            if feature == "presence":
                found = _presence(key, values, with_key, per_run, metric, kind)
            else:
                found = _numeric_feature(key, values, with_key, per_run, metric, kind, feature)
            if found is not None:
                found.confounded_with = [other for other in group_of.get(key, []) if other != key][:MAX_PARTNERS]
                candidates.append(found)
            tested += 1
        else:
            continue
        break  # the deadline passed
    candidates.sort(key=lambda c: c.rank, reverse=True)
    note = "" if candidates else f"no configuration key explains the failures across these {len(runs)} runs"
    if tested < pairs:
        note = (
            f"stopped after {max_seconds:g} s (HOLTER_MAX_LEVER_SECONDS) with {tested:,} of {pairs:,} pairs tested; "
            f"select fewer runs for a full answer. {note}"
        ).strip()
    return LeverReport(len(runs), varying, candidates, confounded, note)


def _presence(
    key: str, values: list[Any], run_ids: list[str], per_run: dict, metric: str, kind: str
) -> Candidate | None:
    has = [bool(per_run[r].get((metric, kind, "presence"))) for r in run_ids]
    positives = sum(has)
    if len(run_ids) < MIN_RUNS or positives in (0, len(run_ids)):
        return None
    if _numeric(values):
        order = sorted(zip(values, has), key=lambda pair: pair[0])
        labels = [h for _, h in order]
        # The event occurs only above one cut (ascending) or only below it (descending).
        ascending_cut = labels == sorted(labels)
        descending_cut = labels == sorted(labels, reverse=True)
        if not (ascending_cut or descending_cut):
            return None
        with_event = [v for v, h in order if h]
        without = [v for v, h in order if not h]
        if ascending_cut:
            cut = (max(without) + min(with_event)) / 2
            if max(without) == min(with_event):
                return None
            side = "above"
        else:
            cut = (max(with_event) + min(without)) / 2
            if max(with_event) == min(without):
                return None
            side = "below"
        p = _separation_p(len(labels), positives)
        if p >= ALPHA:
            return None
        return Candidate(
            key,
            metric,
            kind,
            "presence",
            "separates",
            1.0,
            p,
            len(labels),
            f"{key} {side} {_fmt(cut)} separates the {positives} runs with {kind} on {metric} from the "
            f"{len(labels) - positives} without (p = {p:.3f})",
        )
    groups: dict[str, set[bool]] = {}
    for value, flag in zip(values, has):
        groups.setdefault(repr(value), set()).add(flag)
    if any(len(flags) > 1 for flags in groups.values()) or len(groups) < 2:
        return None
    with_values = sorted({repr(v) for v, h in zip(values, has) if h})
    # Exact chance that a random labelling is constant within every value group.
    sizes = [sum(1 for v in values if repr(v) == g) for g in groups]
    # how many ways whole groups add up to `positives` runs: counted by size (subset sums, runs ×
    # groups steps), not by trying all 2^groups choices (a key with a value per run has as many groups)
    ways_to = [1] + [0] * len(values)
    for size in sizes:
        for total in range(len(values), size - 1, -1):
            ways_to[total] += ways_to[total - size]
    ways = ways_to[positives]
    p = min(1.0, ways / math.comb(len(values), positives))
    if p >= ALPHA:
        return None
    return Candidate(
        key,
        metric,
        kind,
        "presence",
        "determines",
        1.0,
        p,
        len(values),
        f"{kind} on {metric} occurs exactly in the runs where {key} is {', '.join(with_values)} "
        f"({positives} of {len(values)} runs, p = {p:.3f})",
    )


def _numeric_feature(
    key: str, values: list[Any], run_ids: list[str], per_run: dict, metric: str, kind: str, feature: str
) -> Candidate | None:
    pairs = [
        (v, per_run[r][(metric, kind, feature)])
        for v, r in zip(values, run_ids)
        if (metric, kind, feature) in per_run[r]
    ]
    if len(pairs) < MIN_RUNS or not _numeric([v for v, _ in pairs]):
        return None
    xs, ys = [float(v) for v, _ in pairs], [y for _, y in pairs]
    if len(set(xs)) < MIN_RUNS or len(set(ys)) < 2:
        return None
    from scipy import stats  # here, not at the top: a second to import, which the worker never needs

    r = float(stats.pearsonr(xs, ys).statistic)
    if abs(r) < MIN_CORRELATION:
        return None
    p = _permutation_p(xs, ys)
    if p >= ALPHA:
        return None
    ratios = [y / x for x, y in zip(xs, ys) if x]
    proportional = (
        len(ratios) == len(xs)
        and all(q > 0 for q in ratios)
        and statistics.pstdev(ratios) / statistics.fmean(ratios) < 0.15
    )
    label = feature.replace("_", " ")
    if proportional:
        evidence = (
            f"{label} of {kind} on {metric} is proportional to {key} across {len(xs)} runs "
            f"(≈{statistics.fmean(ratios):.3g} × {key}; r = {r:.2f}, p = {p:.3f})"
        )
    else:
        direction = "rises" if r > 0 else "falls"
        evidence = (
            f"{label} of {kind} on {metric} {direction} with {key} across {len(xs)} runs (r = {r:.2f}, p = {p:.3f})"
        )
    return Candidate(
        key, metric, kind, feature, "proportional" if proportional else "correlated", r, p, len(xs), evidence
    )


def _confounded(keys: list[str], configs: dict[str, dict[str, Any]], run_ids: list[str]) -> list[list[str]]:
    """Groups of varying keys that move together across the runs, so the runs cannot tell them
    apart: numeric keys in the same rank order, other keys splitting the runs the same way."""

    def signature(key: str) -> tuple:
        values = [configs[r].get(key) for r in run_ids]
        if _numeric(values):
            order = sorted(range(len(values)), key=lambda i: values[i])
            return ("rank", tuple(order), tuple(values[i] == values[j] for i, j in zip(order, order[1:])))
        seen: dict[str, int] = {}
        return ("partition", tuple(seen.setdefault(repr(v), len(seen)) for v in values))

    def reversed_signature(key: str) -> tuple:
        kind, *rest = signature(key)
        if kind != "rank":
            return (kind, *rest)
        order, ties = rest
        return ("rank", tuple(reversed(order)), tuple(reversed(ties)))

    groups: dict[tuple, list[str]] = {}
    for key in keys:
        sig = signature(key)
        target = sig if sig in groups or reversed_signature(key) not in groups else reversed_signature(key)
        groups.setdefault(target, []).append(key)
    return [sorted(group) for group in groups.values() if len(group) > 1]
