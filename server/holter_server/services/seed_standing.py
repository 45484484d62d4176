"""A run against its seed siblings, for the post-mortem (its summary and HTML report).

The siblings are the other finished runs of the run's seed group (`services.compare`); their
band is read exactly as the compare route reads a group's (`compare.read_members`: the same
point cap and band grid) and each loss-like metric they share with the run gets a standing
(`analysis.standing`: where the run ends relative to them, judged by `analysis.verdicts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from holter_server.analysis.seeds import GroupBand, SeedGroup
from holter_server.analysis.standing import MIN_SEEDS, Standing, standing
from holter_server.services import compare, reads
from holter_server.store.models import RunRow
from holter_server.vocabulary.signals import LOSS_KINDS, REFERENCE_KINDS
from holter_server.vocabulary.statuses import RunStatus

MAX_SIBLINGS = 20  # the newest finished siblings read: the report stays cheap however big the group
MAX_METRICS = 4  # loss-like metrics compared (eval losses first)


@dataclass
class MetricStanding:
    """One loss-like metric: the siblings' band (drawn behind the run) and the run's standing."""

    metric: str
    band: GroupBand
    standing: Standing
    missing: list[str] = field(default_factory=list)  # siblings that do not log it


@dataclass
class SeedStanding:
    """The run's seed group as the post-mortem tells it."""

    project: str
    group: SeedGroup
    siblings: list[RunRow]  # the finished siblings read (the run left out)
    others: list[RunRow]  # siblings left out: not finished, or beyond MAX_SIBLINGS
    metrics: list[MetricStanding]
    refused: list[str] = field(default_factory=list)  # why a metric's siblings were not read (HOLTER_MAX_GROUP_POINTS)

    @property
    def clause(self) -> str | None:
        """The summary's clause: the first metric's (eval losses come first)."""
        return self.metrics[0].standing.clause if self.metrics else None

    def sentences(self) -> list[str]:
        """The report's "Seed group" section: a sentence per metric, or why there is none."""
        if self.metrics or self.refused:
            return [
                m.standing.sentence
                + (f" ({len(m.missing)} of the siblings do not log {m.metric})" if m.missing else "")
                for m in self.metrics
            ] + self.refused
        how = (
            f"run the same config again with another seed (seed, data_seed or any *_seed key, or a key declared with "
            f"PUT /api/v1/projects/{self.project}/settings) at least {MIN_SEEDS} times: the report then draws their "
            "band "
            "behind this run and says whether it ends inside their spread (seed noise) or outside it"
        )
        if not self.siblings and not self.others:
            return [
                f"This run has no seed siblings: no other run of project {self.project} has its config with only the "
                f"seed changed. To make some, {how}."
            ]
        if len(self.siblings) < MIN_SEEDS:
            names = ", ".join(_name(r) for r in [*self.siblings, *self.others])
            return [
                f"This run has {len(self.siblings)} finished seed sibling{'s' if len(self.siblings) != 1 else ''} "
                f"({names} in its group): a seed spread needs at least {MIN_SEEDS} other finished runs. To make more, "
                f"{how}."
            ]
        return [f"This run's {len(self.siblings)} seed siblings share no loss metric with it: nothing to compare."]


def _name(run: RunRow) -> str:
    return run.name or run.id


def _loss_metrics(kinds: Mapping[str, str]) -> list[str]:
    order = {kind: i for i, kind in enumerate(REFERENCE_KINDS)}
    found = [name for name, kind in kinds.items() if kind in LOSS_KINDS]
    return sorted(found, key=lambda n: (order.get(kinds[n], len(order)), n))[:MAX_METRICS]


def seed_standing(
    *, session: Session, run: RunRow, kinds: Mapping[str, str], max_points: int | None = None
) -> SeedStanding:
    """The run against its finished seed siblings on its loss-like metrics (`kinds`: the run's
    metrics by name, with what each is); a metric whose siblings hold more than `max_points`
    points is left out, with the reason."""
    runs = compare.project_runs(session=session, project=run.project)
    group = compare.group_of_run(session=session, run=run, runs=runs)
    rows = {r.id: r for r in runs}
    others = [rows[r] for r in group.run_ids if r != run.id and r in rows]
    # only a finished sibling shows where its config ends (a crashed or running one does not)
    finished = [r for r in others if r.status == RunStatus.FINISHED]
    siblings = finished[-MAX_SIBLINGS:]  # oldest first: the newest are last
    left_out = [r for r in others if r not in siblings]
    metrics: list[MetricStanding] = []
    refused: list[str] = []
    if len(siblings) >= MIN_SEEDS:
        label = f"seed siblings of {_name(run)} ({len(siblings)} seeds)"
        for metric in _loss_metrics(kinds):
            try:
                arm = compare.read_members(
                    session=session,
                    kind=compare.GROUP_ARM,
                    run=run,
                    label=label,
                    members=[r.id for r in siblings],
                    config=group.config,
                    metric=metric,
                    with_tokens=False,
                    max_points=max_points,
                )
            except compare.GroupTooLargeError as exc:
                refused.append(f"Not compared: {exc}.")
                continue
            own = reads.read_curve(session=session, run_id=run.id, metric=metric, limit=compare.CURVE_POINTS)
            found = standing(metric, own, arm.arm.curves) if own is not None else None
            if found is not None:
                metrics.append(MetricStanding(metric, arm.band, found, arm.missing))
    return SeedStanding(run.project, group, siblings, left_out, metrics, refused)
