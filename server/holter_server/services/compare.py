"""Signal or noise: seed groups of a project, and one arm against another on a metric.

An arm is a run or the seed group a run belongs to (the runs of its project whose configs differ
from its only in seed keys). The verdict rule and the measures are `analysis.verdicts`'; this
module reads what they need from the store.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session

from holter_server.analysis.configs import fingerprint, flatten, without
from holter_server.analysis.seeds import GroupBand, RunConfig, SeedGroup, group_band, group_of, seed_groups
from holter_server.analysis.twins import Twin, data_order, describe_twins, twin_runs
from holter_server.analysis.verdicts import (
    Arm,
    Confounders,
    Identity,
    Verdict,
    compare_arms,
    confounders,
    identical_pairs,
)
from holter_server.services import reads
from holter_server.store import projects as projects_store
from holter_server.store import runs as runs_store
from holter_server.store.models import RunRow
from holter_server.vocabulary.configs import is_seed_key, is_token_counter

MAX_RUNS = 500  # runs of a project looked at to find a group
CURVE_POINTS = 1_000_000
BAND_POINTS = 1_000
ARM_KINDS = ("run", "group")
RUN_ARM, GROUP_ARM = ARM_KINDS


@dataclass(frozen=True)
class DeclaredKeys:
    """A project's own seed keys, and which seed keys set the data order."""

    seed_keys: tuple[str, ...] = ()
    data_seed_keys: tuple[str, ...] = ()


def declared_keys(*, session: Session, project: str) -> DeclaredKeys:
    """What the project declared (nothing when it never did)."""
    row = projects_store.get_settings(session=session, project=project)
    if row is None:
        return DeclaredKeys()
    # a declared data seed is a seed too: it must not split a seed group
    return DeclaredKeys(tuple(dict.fromkeys([*row.seed_keys, *row.data_seed_keys])), tuple(row.data_seed_keys))


def project_runs(*, session: Session, project: str) -> list[RunRow]:
    """The project's runs (newest MAX_RUNS), oldest first so groups list in the order they grew."""
    rows, _ = runs_store.list_runs(session=session, project=project, status=None, limit=MAX_RUNS, offset=0)
    return list(reversed(rows))


def groups_of_project(*, session: Session, project: str) -> list[SeedGroup]:
    """The project's seed groups, one-run groups included."""
    runs = project_runs(session=session, project=project)
    return seed_groups(
        [RunConfig(r.id, r.config or {}, r.name) for r in runs],
        declared_keys(session=session, project=project).seed_keys,
    )


def group_of_run(*, session: Session, run: RunRow, runs: list[RunRow] | None = None) -> SeedGroup:
    """The seed group `run` belongs to (itself alone when no other run shares its config);
    `runs`: the project's runs when the caller has read them already."""
    runs = list(runs) if runs is not None else project_runs(session=session, project=run.project)
    if all(r.id != run.id for r in runs):
        runs.append(run)
    found = group_of(
        run.id,
        [RunConfig(r.id, r.config or {}, r.name) for r in runs],
        declared_keys(session=session, project=run.project).seed_keys,
    )
    assert found is not None  # the run is among those grouped
    return found


@dataclass
class Twins:
    """The runs of a run's project that read the same batches in the same order (`analysis.twins`)."""

    run_id: str
    data_order: dict | None  # the keys that decide it; None when the config names no data
    twins: list[Twin]
    statuses: dict[str, str]
    sentence: str


def twins_of_run(*, session: Session, run: RunRow) -> Twins:
    """The run's data-order twins among its project's runs (the newest MAX_RUNS), whatever else
    differs: another width, optimiser or init seed."""
    declared = declared_keys(session=session, project=run.project)
    others = [r for r in project_runs(session=session, project=run.project) if r.id != run.id]
    found = twin_runs(
        run.config or {},
        [(r.id, r.name, r.config or {}) for r in others],
        seed_keys=declared.seed_keys,
        data_seed_keys=declared.data_seed_keys,
    )
    order = data_order(run.config or {}, declared.data_seed_keys)
    return Twins(
        run.id,
        order,
        found,
        {r.id: r.status for r in others},
        describe_twins(order, found, declared.seed_keys),
    )


def _curve(session: Session, run_id: str, metric: str) -> tuple[np.ndarray, np.ndarray] | None:
    return reads.read_curve(session=session, run_id=run_id, metric=metric, limit=CURVE_POINTS)


def token_counter(*, session: Session, run_ids: list[str]) -> dict[str, str]:
    """Each run's token counter metric: a name every run logs when there is one, else each its own."""
    names = {
        r: sorted(n for n in runs_store.metric_names(session=session, run_id=r) if is_token_counter(n)) for r in run_ids
    }
    common = set.intersection(*(set(n) for n in names.values())) if names else set()
    if common:
        chosen = min(common, key=lambda n: (len(n), n))
        return dict.fromkeys(run_ids, chosen)
    return {r: n[0] for r, n in names.items() if n}


def seeds_of(config: dict, declared: tuple[str, ...] = ()) -> str:
    """A canonical text of a config's seed keys: two runs with the same text ran the same seeds."""
    flat = flatten(config)
    return fingerprint({k: v for k, v in flat.items() if is_seed_key(k, declared)})


class MissingMetricError(LookupError):
    """An arm none of whose runs logs the metric."""


class GroupTooLargeError(ValueError):
    """An arm would read more points than one request may (HOLTER_MAX_GROUP_POINTS)."""


def check_points(*, session: Session, label: str, series: list[tuple[str, str]], max_points: int) -> None:
    """Refuse (GroupTooLargeError) when the (run, metric) `series` hold more than `max_points`
    points together: counted from the metric rows, before anything is read."""
    counts = sum(
        row.count
        for run_id, metric in series
        if (row := runs_store.get_metric(session=session, run_id=run_id, name=metric))
    )
    if counts > max_points:
        raise GroupTooLargeError(
            f"{label} would read {counts:,} points, more than {max_points:,} (HOLTER_MAX_GROUP_POINTS)"
        )


@dataclass
class ArmReading:
    """One arm as compared: who is in it, its shared config, its curves and its band."""

    kind: str
    run_id: str
    label: str
    run_ids: list[str]
    missing: list[str]  # members that do not log the metric
    config: dict
    arm: Arm
    band: GroupBand
    last_steps: dict[str, int]
    final_tokens: dict[str, float]


def read_arm(*, session: Session, kind: str, run: RunRow, metric: str, max_points: int | None = None) -> ArmReading:
    """The run, or its seed group, on `metric` (with token counters when logged); refused
    (GroupTooLargeError) past `max_points`."""
    declared = declared_keys(session=session, project=run.project)
    if kind == "group":
        group = group_of_run(session=session, run=run)
        members, config = group.run_ids, group.config
        label = f"group of {run.name or run.id} ({len(members)} seed{'s' if len(members) != 1 else ''})"
    else:
        members = [run.id]
        config = without(flatten(run.config or {}), lambda k: is_seed_key(k, declared.seed_keys))
        label = f"run {run.name or run.id}"
    return read_members(
        session=session,
        kind=kind,
        run=run,
        label=label,
        members=members,
        config=config,
        metric=metric,
        max_points=max_points,
    )


def read_members(
    *,
    session: Session,
    kind: str,
    run: RunRow,
    label: str,
    members: list[str],
    config: dict,
    metric: str,
    with_tokens: bool = True,
    max_points: int | None = None,
) -> ArmReading:
    """An arm of chosen runs on `metric`, read and banded as the compare route reads one (the
    post-mortem's seed siblings use it too, so a band is computed one way only); token counters
    only when `with_tokens`; refused (GroupTooLargeError) when the metric and the counters hold
    more than `max_points` points."""
    if max_points is not None:
        counters = token_counter(session=session, run_ids=list(members)) if with_tokens else {}
        check_points(
            session=session,
            label=f"comparing {metric!r} on the {label}",
            max_points=max_points,
            series=[(r, metric) for r in members] + list(counters.items()),
        )
    curves = {r: c for r in members if (c := _curve(session, r, metric)) is not None and len(c[0])}
    counters = token_counter(session=session, run_ids=list(curves)) if with_tokens else {}
    tokens = {r: c for r, name in counters.items() if (c := _curve(session, r, name)) is not None and len(c[0])}
    finite_tokens = {r: t[1][np.isfinite(t[1])] for r, t in tokens.items()}
    declared = declared_keys(session=session, project=run.project).seed_keys
    rows = runs_store.get_runs(session=session, run_ids=list(curves))
    seeds = {r: seeds_of(row.config or {}, declared) for r, row in rows.items()}
    return ArmReading(
        kind=kind,
        run_id=run.id,
        label=label,
        run_ids=list(members),
        missing=[r for r in members if r not in curves],
        config=config,
        arm=Arm(label, curves, tokens, seeds),
        band=group_band(curves, BAND_POINTS),
        last_steps={r: int(c[0].max()) for r, c in curves.items()},
        final_tokens={r: float(v.max()) for r, v in finite_tokens.items() if len(v)},
    )


@dataclass
class ArmComparison:
    """Arm A against arm B on a metric: both arms, every measure's verdict, the confounders, and
    whether the arms logged bit-identical values."""

    metric: str
    a: ArmReading
    b: ArmReading
    verdicts: list[Verdict]
    confounders: Confounders
    identity: Identity | None = None
    stand_in: ArmReading | None = None  # the seed group whose spread stood in (one run per arm)

    @property
    def headline(self) -> Verdict | None:
        """The primary measure, chosen up front: at matched tokens when every run counts them, else
        at matched steps (or the one the caller named)."""
        return next((v for v in self.verdicts if v.primary), self.verdicts[0] if self.verdicts else None)


def _typical(values: dict[str, float] | dict[str, int], every: list[str]) -> float | None:
    return float(statistics.median(values.values())) if values and set(values) >= set(every) else None


MAX_STAND_IN = 20  # runs of a stand-in seed group read
STAND_IN_GROUPS = 3  # other configs' seed groups tried (largest first) when neither arm's has seeds


def stand_in_group(
    *, session: Session, metric: str, arms: tuple[ArmReading, ArmReading], max_points: int | None
) -> ArmReading | None:
    """With one run per arm, a seed group whose spread on `metric` stands in for the arms' own: the
    seed group of arm A's run, else of arm B's (the same configs, other seeds), else the project's
    largest seed group that logs the metric (another config of the same project, said so). None
    when no group of two or more seeds logs it."""
    first = arms[0]
    run = runs_store.get_run(session=session, run_id=first.run_id)
    if run is None:
        return None
    runs = project_runs(session=session, project=run.project)
    candidates: list[tuple[list[str], dict, str]] = []
    for reading in arms:
        own = runs_store.get_run(session=session, run_id=reading.run_id)
        if own is not None:
            group = group_of_run(session=session, run=own, runs=runs)
            candidates.append((group.run_ids, group.config, f"{reading.label}'s seed group"))
    groups = sorted(
        (
            g
            for g in seed_groups(
                [RunConfig(r.id, r.config or {}, r.name) for r in runs],
                declared_keys(session=session, project=run.project).seed_keys,
            )
            if g.size >= 2
        ),
        key=lambda g: -g.size,
    )
    own = {tuple(c[0]) for c in candidates}
    candidates += [
        (g.run_ids, g.config, f"another config's seed group of project {run.project}")
        for g in groups
        if tuple(g.run_ids) not in own
    ][:STAND_IN_GROUPS]
    for group_runs, config, label in candidates:
        members = group_runs[-MAX_STAND_IN:]
        if len(members) < 2:
            continue
        try:
            found = read_members(
                session=session,
                kind=GROUP_ARM,
                run=run,
                label=label,
                members=members,
                config=config,
                metric=metric,
                max_points=max_points,
            )
        except GroupTooLargeError:
            continue
        if len(found.arm.curves) >= 2:
            found.label = found.arm.label = f"{label} ({len(found.arm.curves)} seeds)"
            return found
    return None


def compare(
    *,
    session: Session,
    metric: str,
    a: tuple[str, RunRow],
    b: tuple[str, RunRow],
    at_step: int | None = None,
    at_tokens: float | None = None,
    step_range: tuple[int, int] | None = None,
    primary: str | None = None,
    max_points: int | None = None,
) -> ArmComparison:
    """Arm A (a kind and a run) against arm B on `metric`; an arm holding more than `max_points`
    points is refused (GroupTooLargeError) before it is read, an arm that does not log the metric
    (MissingMetricError); a `primary` measure that cannot be read raises ValueError."""
    first, second = (
        read_arm(session=session, kind=kind, run=run, metric=metric, max_points=max_points) for kind, run in (a, b)
    )
    for arm in (first, second):
        if not arm.arm.curves:
            raise MissingMetricError(f"{metric!r} is not logged by {arm.label}")
    found = confounders(
        first.config,
        second.config,
        tokens_a=_typical(first.final_tokens, list(first.arm.curves)),
        tokens_b=_typical(second.final_tokens, list(second.arm.curves)),
        last_step_a=_int(_typical(first.last_steps, list(first.arm.curves))),
        last_step_b=_int(_typical(second.last_steps, list(second.arm.curves))),
    )
    stand_in = None
    if len(first.arm.curves) == 1 and len(second.arm.curves) == 1:
        stand_in = stand_in_group(session=session, metric=metric, arms=(first, second), max_points=max_points)
    verdicts = compare_arms(
        metric,
        first.arm,
        second.arm,
        at_step=at_step,
        at_tokens=at_tokens,
        step_range=step_range,
        primary=primary,
        stand_in=stand_in.arm if stand_in else None,
    )
    identity = identical_pairs(metric, first.arm, second.arm)
    return ArmComparison(metric, first, second, verdicts, found, identity, stand_in if verdicts else None)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)
