"""A run's repeats (runs of its project with the same config and seeds) and whether they logged the
same values: `analysis.repeats` judges, this module reads what it needs from the store."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session

from holter_server.analysis.configs import fingerprint, flatten
from holter_server.analysis.repeats import Repeat, code_of, describe_code, judge_repeat
from holter_server.services import compare, reads
from holter_server.services.kinds import understood_metrics, understood_metrics_of_runs
from holter_server.store.models import RunRow

MAX_REPEATS = 10  # the newest repeats compared
MAX_METRICS = 8  # metrics compared per pair (losses first)
MAX_POINTS = 200_000  # points read per metric and run
# What training computes, and so should repeat to the bit: not clocks (step time, throughput,
# MFU, data wait) and not the machine's vitals.
COMPUTED_KINDS = (
    "loss",
    "eval_loss",
    "grad_norm",
    "activation_norm",
    "logprob_mismatch",
    "mismatch_ratio",
    "policy_loss",
    "reward",
)


@dataclass
class Repeats:
    """The run, what its code was, and each repeat's comparison."""

    run_id: str
    code: str
    repeats: list[Repeat]
    statuses: dict[str, str]
    sentence: str


def _computed(kinds: dict[str, str]) -> list[str]:
    order = {kind: i for i, kind in enumerate(COMPUTED_KINDS)}
    chosen = [name for name, kind in kinds.items() if kind in order]
    return sorted(chosen, key=lambda n: (order[kinds[n]], n))


def _curves(session: Session, run_id: str, metrics: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {
        m: c for m in metrics if (c := reads.read_curve(session=session, run_id=run_id, metric=m, limit=MAX_POINTS))
    }


def repeats_of(*, session: Session, run: RunRow) -> Repeats:
    """The run's repeats among its project's runs (the newest MAX_RUNS): the same config with the
    same seeds, compared on the metrics training computes (`COMPUTED_KINDS`)."""
    key = fingerprint(flatten(run.config or {}))
    others = [
        r
        for r in compare.project_runs(session=session, project=run.project)
        if r.id != run.id and r.config and fingerprint(flatten(r.config)) == key
    ][-MAX_REPEATS:]
    code = describe_code(code_of(run.provenance))
    if not run.config:
        return Repeats(run.id, code, [], {}, "this run has no config: which runs repeat it cannot be told")
    if not others:
        return Repeats(
            run.id, code, [], {}, "no other run of the project has this run's config and seeds: nothing to repeat"
        )
    kinds = {n: u.kind for n, u in understood_metrics(session=session, run=run).items()}
    mine = _computed(kinds)
    theirs = understood_metrics_of_runs(session=session, runs={r.id: r for r in others})
    own_curves = _curves(session, run.id, mine[:MAX_METRICS])
    found = []
    for other in others:
        shared = [m for m in mine if m in theirs.get(other.id, {})][:MAX_METRICS]
        found.append(
            judge_repeat(
                other.id,
                other.name,
                run.provenance,
                other.provenance,
                {m: own_curves[m] for m in shared if m in own_curves},
                _curves(session, other.id, shared),
            )
        )
    differing = [r for r in found if r.same_code is not False and r.difference is not None]
    identical = [r for r in found if r.identical]
    if differing:
        sentence = (
            f"{len(differing)} of the {len(found)} runs with this run's config and seeds logged other values: "
            "the runs are not deterministic (see each)"
        )
    elif identical:
        sentence = (
            f"{len(identical)} of the {len(found)} runs with this run's config and seeds logged bit-identical values"
        )
    elif all(r.same_code is False for r in found):
        sentence = f"{len(found)} runs have this run's config and seeds but ran other code"
    else:
        sentence = f"{len(found)} runs have this run's config and seeds; none could be compared value for value"
    return Repeats(run.id, code, found, {r.id: r.status for r in others}, sentence)
