"""Twin runs: runs that saw the same batches in the same order, and spikes they share.

A spike that recurs at the same step in a run with the same data order but another optimiser
setting, init seed or model width is the batch, not the optimiser (real pretraining runs show most
large spikes recurring in such twins). Two runs share a data order when they agree on the keys
that decide which batch comes at which step (`vocabulary.configs.is_data_order_key`): the data
(a data section, a dataset, path, file, shard or mixture key, and a data seed: `data_seed`,
`shuffle_seed`, or one the project declared), its shuffling, and how it is cut into batches (batch
size, sequence length, accumulation, world size). Everything else may differ. A run whose config
names no data at all (no data seed, dataset or data section) has no known data order: a batch
size alone does not say which data was read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from holter_server.analysis.configs import KeyChange, diff, fingerprint, flatten
from holter_server.detect.events import format_step
from holter_server.vocabulary.configs import is_data_order_key, is_seed_key, names_data

STEP_TOLERANCE = 1


def data_order(config: dict[str, Any], data_seed_keys: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The keys of a config that decide its data order (flat), or None when it names no data."""
    flat = flatten(config)
    if not any(names_data(k, data_seed_keys) for k in flat):
        return None
    return {k: v for k, v in flat.items() if is_data_order_key(k, data_seed_keys)}


def data_order_key(
    config: dict[str, Any], seed_keys: tuple[str, ...] = (), data_seed_keys: tuple[str, ...] = ()
) -> str | None:
    """What decides which batch comes at which step: equal keys, same data order. None when the
    config names no data (runs logged without a data config are not known to share anything).
    `seed_keys` is accepted for the callers that pass a project's declarations; an init seed never
    sets the data order unless the project declares it a data seed."""
    found = data_order(config, data_seed_keys)
    return fingerprint(found) if found is not None else None


@dataclass(frozen=True)
class Twin:
    """A run with the same data order as another, and what else differs between them (seed keys
    that do not set the data order included: a twin with another init seed is the common case)."""

    run_id: str
    name: str | None
    differs: list[KeyChange]


def twin_runs(
    config: dict[str, Any],
    others: Sequence[tuple[str, str | None, dict[str, Any]]],
    *,
    seed_keys: tuple[str, ...] = (),
    data_seed_keys: tuple[str, ...] = (),
) -> list[Twin]:
    """The runs among `others` (id, name, config) with `config`'s data order, each with the keys in
    which its config differs; none when `config` names no data."""
    key = data_order_key(config, seed_keys, data_seed_keys)
    if key is None:
        return []
    flat = flatten(config)
    return [
        Twin(run_id, name, diff(flat, flatten(other)))
        for run_id, name, other in others
        if data_order_key(other, seed_keys, data_seed_keys) == key
    ]


def describe_twins(data: Mapping[str, Any] | None, twins: Sequence[Twin], seed_keys: tuple[str, ...] = ()) -> str:
    """'3 runs share this run's data order (data.path, data.data_seed, batch_size): 2 differ in
    width, 1 in seed only' — or why no twin can be known."""
    if data is None:
        return (
            "this run's config names no data (no data seed, dataset, data path or data section), so runs that read "
            "the same batches in the same order cannot be told; log its data config (or declare the seed that "
            "shuffles as a data seed in the project's settings)"
        )
    keys = ", ".join(sorted(data)) or "no keys"
    if not twins:
        return f"no other run of the project shares this run's data order ({keys})"
    repeats = [t for t in twins if not t.differs]
    seeds = [t for t in twins if t.differs and all(is_seed_key(c.key, seed_keys) for c in t.differs)]
    others = [t for t in twins if t not in repeats and t not in seeds]
    parts = [f"{len(repeats)} repeat{'s' if len(repeats) == 1 else ''} its config exactly"] if repeats else []
    if seeds:
        parts.append(f"{len(seeds)} differ{'s' if len(seeds) == 1 else ''} only in seeds")
    if others:
        changed = sorted({c.key for t in others for c in t.differs if not is_seed_key(c.key, seed_keys)})
        shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        parts.append(f"{len(others)} in {shown}")
    runs = f"{len(twins)} run{'s' if len(twins) != 1 else ''}"
    return f"{runs} share{'s' if len(twins) == 1 else ''} this run's data order ({keys}): {'; '.join(parts)}"


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
