"""Determinism: runs that should be identical (the same config, the same seeds, the same code),
and whether they are.

"Seeds alone do not guarantee bit-exact determinism" (shared chapter, *Reproducibility and
determinism*): atomic-add reductions accumulate in another order, floating-point addition is
not associative, a data-loader worker draws from an unseeded generator. Most of that is benign
jitter in the low bits; it matters when it masks or mimics a bug, and when it means two arms of
an ablation differ for no reason. So a run is compared with its repeats, value for value on the
metrics training computes (losses, norms, rewards: not step times or throughput, which are clocks),
and the first step where they part is named, with what else differed between the two machines.

Pure: curves and provenance in, findings out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from holter_server.detect.events import format_step, format_value

Curve = tuple[np.ndarray, np.ndarray]
ENVIRONMENT_KEYS = ("python", "torch", "cuda", "cudnn", "gpus", "hostname", "platform")


def code_of(provenance: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The code version a run recorded, or None."""
    code = (provenance or {}).get("code")
    return dict(code) if isinstance(code, Mapping) and code else None


def same_code(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool | None:
    """Whether two runs ran the same code: the same commit and the same local changes (equal diff
    hashes, or both clean); outside git, the same script hash. None when either did not say."""
    ca, cb = code_of(a), code_of(b)
    if ca is None or cb is None:
        return None
    if ca.get("commit") and cb.get("commit"):
        return ca["commit"] == cb["commit"] and ca.get("diff_hash") == cb.get("diff_hash")
    if ca.get("script_hash") and cb.get("script_hash"):
        return ca["script_hash"] == cb["script_hash"]
    return None


def describe_code(code: Mapping[str, Any] | None) -> str:
    """'commit 1a2b3c4 with local changes (diff 9f8e7d6c)', 'commit 1a2b3c4', 'script train.py'."""
    if not code:
        return "no recorded code version"
    if code.get("commit"):
        text = f"commit {str(code['commit'])[:7]}"
        if code.get("dirty"):
            text += f" with local changes (diff {str(code.get('diff_hash') or '')[:8]})"
        return text
    if code.get("script"):
        return f"script {str(code['script']).rsplit('/', 1)[-1]} ({str(code.get('script_hash') or '')[:8]})"
    return "no recorded code version"


def environment_changes(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[str]:
    """What differs between two runs' environments: 'torch 2.3.0 → 2.4.0', 'hostname a → b'."""
    ea = dict((a or {}).get("environment") or {})
    eb = dict((b or {}).get("environment") or {})
    if not ea or not eb:
        return []
    changes = [f"{k} {_shown(ea.get(k))} → {_shown(eb.get(k))}" for k in ENVIRONMENT_KEYS if ea.get(k) != eb.get(k)]
    pa, pb = dict(ea.get("packages") or {}), dict(eb.get("packages") or {})
    changes += [
        f"{k} {pa.get(k) or 'absent'} → {pb.get(k) or 'absent'}"
        for k in sorted(pa.keys() | pb.keys())
        if pa.get(k) != pb.get(k)
    ]
    return changes


def _shown(value: Any) -> str:
    if value is None:
        return "absent"
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


@dataclass
class Difference:
    """Where two runs' values first part: the metric, the step, each run's value."""

    metric: str
    step: int
    a: float
    b: float

    @property
    def relative(self) -> float | None:
        """|a − b| over the larger magnitude (None when either is not finite)."""
        if not (math.isfinite(self.a) and math.isfinite(self.b)):
            return None
        scale = max(abs(self.a), abs(self.b))
        return abs(self.a - self.b) / scale if scale else 0.0


def first_difference(a: Mapping[str, Curve], b: Mapping[str, Curve]) -> tuple[Difference | None, int, list[str]]:
    """The earliest step at which any metric both runs logged has another value (NaN equals NaN),
    over the steps both logged; with the points compared and the metrics compared."""
    found: Difference | None = None
    points = 0
    compared = sorted(a.keys() & b.keys())
    for metric in compared:
        (sa, va), (sb, vb) = a[metric], b[metric]
        sa, sb = np.asarray(sa), np.asarray(sb)
        va, vb = np.asarray(va, dtype=float), np.asarray(vb, dtype=float)
        common, ia, ib = np.intersect1d(sa, sb, assume_unique=False, return_indices=True)
        points += len(common)
        x, y = va[ia], vb[ib]
        differs = ~((x == y) | (np.isnan(x) & np.isnan(y)))
        if differs.any():
            i = int(np.argmax(differs))
            if found is None or int(common[i]) < found.step:
                found = Difference(metric, int(common[i]), float(x[i]), float(y[i]))
    return found, points, compared


@dataclass
class Repeat:
    """Another run with this run's config and seeds, and how it compares."""

    run_id: str
    name: str | None
    same_code: bool | None
    code: str
    compared: list[str]
    points: int
    difference: Difference | None
    environment: list[str] = field(default_factory=list)
    sentence: str = ""

    @property
    def identical(self) -> bool:
        return self.points > 0 and self.difference is None


def judge_repeat(
    run_id: str,
    name: str | None,
    provenance: Mapping[str, Any] | None,
    other_provenance: Mapping[str, Any] | None,
    curves: Mapping[str, Curve],
    other_curves: Mapping[str, Curve],
) -> Repeat:
    """This run against one of its repeats (the same config and seeds): identical, or where they
    part and what may explain it."""
    code = same_code(provenance, other_provenance)
    difference, points, compared = first_difference(curves, other_curves)
    changes = environment_changes(provenance, other_provenance)
    who = f"run {name or run_id}"
    what = describe_code(code_of(other_provenance))
    if code is False:
        why = f"ran other code ({what} against this run's {describe_code(code_of(provenance))})"
    elif code is None:
        why = "has this run's config and seeds (the code version of one of them is unknown)"
    else:
        why = f"repeats this run's config, seeds and code ({what})"
    found = Repeat(run_id, name, code, what, compared, points, difference, changes)
    if not points:
        found.sentence = f"{who} {why}; no metric both logged at the same steps to compare"
        return found
    metrics = ", ".join(compared[:4]) + (f" and {len(compared) - 4} more" if len(compared) > 4 else "")
    if difference is None:
        verdict = "deterministic" if code else "identical"
        found.sentence = f"{who} {why} and logged bit-identical {metrics} ({points:,} points): {verdict}"
        return found
    relative = difference.relative
    size = f", {relative:.1e} relative" if relative is not None else ""
    parted = (
        f"{difference.metric} first differs at step {format_step(difference.step)} "
        f"({format_value(difference.a)} vs {format_value(difference.b)}{size})"
    )
    if code is False:
        found.sentence = f"{who} {why}: {parted}"
        return found
    env = f"; the environments differ: {'; '.join(changes[:4])}" if changes else ""
    found.sentence = (
        f"{who} {why} but {parted}: not deterministic. Nondeterministic kernels (atomic adds in reductions, "
        f"cuDNN autotuning) or an unseeded source of randomness (data-loader workers, dropout) make seeded runs "
        f"part{env}; torch.use_deterministic_algorithms(True) and seeding every worker make them repeat"
    )
    return found
