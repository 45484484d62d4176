"""Twin runs: runs that saw the same batches in the same order, and spikes they share.

A spike that recurs at the same step in a run with the same data order but another optimiser
setting or init seed is the batch, not the optimiser (real pretraining runs show most large
spikes recurring in such twins). Two runs share a data order when their configs agree once the
optimiser's keys (`vocabulary.configs.is_optimizer_key`) and the seeds that do not set the data
order are left out; a data seed (`data_seed`, `shuffle_seed`, or one the project declared) must
match.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from holter_server.analysis.configs import fingerprint, flatten, without
from holter_server.detect.events import format_step
from holter_server.vocabulary.configs import is_data_seed_key, is_optimizer_key, is_seed_key

STEP_TOLERANCE = 1


def data_order_key(
    config: dict[str, Any], seed_keys: tuple[str, ...] = (), data_seed_keys: tuple[str, ...] = ()
) -> str | None:
    """What decides which batch comes at which step: equal keys, same data order. None when the
    config says nothing about it (empty once optimiser keys and seeds are left out): runs logged
    without a config are not known to share anything."""

    def ignored(key: str) -> bool:
        if is_data_seed_key(key, data_seed_keys):
            return False
        return is_optimizer_key(key) or is_seed_key(key, seed_keys)

    kept = without(flatten(config), ignored)
    return fingerprint(kept) if kept else None


@dataclass(frozen=True)
class SpikeAt:
    """A spike event of a run, where it peaked."""

    run_id: str
    metric: str
    step: int
    run_name: str | None = None


def twins_of(spike: SpikeAt, others: Iterable[SpikeAt], tolerance: int = STEP_TOLERANCE) -> list[SpikeAt]:
    """The spikes of other runs on the same metric within `tolerance` steps, the closest per run."""
    best: dict[str, SpikeAt] = {}
    for other in others:
        if other.run_id == spike.run_id or other.metric != spike.metric or abs(other.step - spike.step) > tolerance:
            continue
        if other.run_id not in best or abs(other.step - spike.step) < abs(best[other.run_id].step - spike.step):
            best[other.run_id] = other
    return sorted(best.values(), key=lambda s: s.run_id)


def twin_note(spike: SpikeAt, twins: list[SpikeAt]) -> str:
    """'this spike recurs at step 946 in 3 runs with the same data order: the batch, not the optimiser'."""
    steps = sorted({t.step for t in twins})
    where = f"step {format_step(steps[0])}" if len(steps) == 1 else "steps " + ", ".join(format_step(s) for s in steps)
    runs = f"{len(twins)} run{'s' if len(twins) != 1 else ''}"
    return f"this spike recurs at {where} in {runs} with the same data order: the batch, not the optimiser"
