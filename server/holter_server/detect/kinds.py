"""Metric kinds: what healthy looks like for each signal, and which way is bad.

The kind is inferred from the metric name when the caller does not give one; the names of the
common training frameworks (TRL, verl, OpenRLHF, slime, HF Trainer) are recognised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KindProfile:
    """Per-kind defaults for every detector.

    `direction` is +1 when up is bad (loss, norms, mismatch, step time) and -1 when down is bad
    (throughput). Thresholds are relative to the local level unless named `abs_`.
    """

    name: str
    direction: int = 1
    # spikes
    spike_z: float = 8.0
    spike_min_rel: float = 0.05
    spike_severity: str = "info"
    # a recovered spike becomes a warning when it peaks this many times the baseline above it,
    # or (when set) stays up longer than `spike_warn_points` points
    spike_warn_ratio: float = 1.0
    spike_warn_points: int | None = 3
    # divergence by a sustained rise above the running minimum of the smoothed level
    rise_factor: float | None = 1.5
    rise_persist: int = 5
    # level shift between two 16-point windows
    shift_min_rel: float = 0.5
    shift_severity: str = "warning"
    # plateau
    zero_is_plateau: bool = False
    frozen_min_points: int | None = 20
    flat_from_start: bool = False
    # too_good
    too_good: bool = False
    # sawtooth
    sawtooth_severity: str = "warning"
    sawtooth_min_rel: float = 0.005
    # healthy ceiling (logprob mismatch ≈ 0): excursions below it never count
    abs_tolerance: float | None = None
    abs_floor: float = 1e-12


KINDS: dict[str, KindProfile] = {
    "loss": KindProfile(
        name="loss", spike_min_rel=0.05, rise_factor=1.5, shift_min_rel=0.1, shift_severity="info",
        flat_from_start=True, too_good=True,
    ),
    "eval_loss": KindProfile(
        name="eval_loss", spike_min_rel=0.05, rise_factor=1.5, rise_persist=3, shift_min_rel=0.1,
        shift_severity="info", too_good=True,
    ),
    "grad_norm": KindProfile(
        name="grad_norm", spike_min_rel=0.5, spike_warn_ratio=8.0, spike_warn_points=None, rise_factor=5.0, shift_min_rel=0.5, zero_is_plateau=True,
        frozen_min_points=30, sawtooth_min_rel=0.05,
    ),
    "activation_norm": KindProfile(
        name="activation_norm", spike_min_rel=0.3, spike_warn_ratio=3.0, spike_warn_points=None, rise_factor=3.0, shift_min_rel=0.3, zero_is_plateau=True,
        frozen_min_points=30, sawtooth_min_rel=0.02,
    ),
    "logprob_mismatch": KindProfile(
        name="logprob_mismatch", spike_min_rel=0.0, spike_severity="warning", rise_factor=None,
        shift_min_rel=1.0, frozen_min_points=None, abs_tolerance=0.05, abs_floor=1e-3,
    ),
    "throughput": KindProfile(
        name="throughput", direction=-1, spike_min_rel=0.2, rise_factor=None, shift_min_rel=0.15,
        frozen_min_points=None, sawtooth_severity="info", sawtooth_min_rel=0.05,
    ),
    "step_time": KindProfile(
        name="step_time", spike_min_rel=0.2, rise_factor=None, shift_min_rel=0.2,
        frozen_min_points=None, sawtooth_severity="info", sawtooth_min_rel=0.05,
    ),
}

# Ordered: the first pattern that matches the lower-cased metric name wins.
_NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    # logprob mismatch between the rollout engine and the trainer (TRL, verl, OpenRLHF, slime)
    (r"logp_diff|logp_difference|logprob.*(diff|mismatch)|rollout_probs_diff|vllm_kl|rollout_logprob", "logprob_mismatch"),
    (r"grad(ient)?[_/ ]?norm|gnorm", "grad_norm"),
    (r"act(ivation)?s?[_/ ]?(norm|rms)|resid(ual)?[_/]?(norm|rms)", "activation_norm"),
    (r"step[_/ ]?time|iter(ation)?[_/ ]?time|time[_/ ]?per[_/ ]?step|batch[_/ ]?time|runtime|_ms$|ms[_/]per[_/]step", "step_time"),
    (r"tokens?[_/ ]?per[_/ ]?s|tok/s|tokens_per_sec|samples?[_/ ]?per[_/ ]?s|throughput|tflops|mfu|it/s|steps_per_second", "throughput"),
    (r"(^|[^a-z])(eval|val|valid|validation|test)([^a-z]|$).*(loss|nll|perplexity|ppl)", "eval_loss"),
    (r"loss|nll|perplexity|ppl|cross_?entropy", "loss"),
)

# Names that are probabilities or maxima of the mismatch are naturally larger; give them room.
_MISMATCH_TOLERANCE_BY_SUFFIX: tuple[tuple[str, float], ...] = (("max", 0.5), ("std", 0.1))


# Schedules and bookkeeping: logged next to the metrics but not vital signs.
_BOOKKEEPING = re.compile(
    r"(^|[_/])(learning_rate|lr|epoch|total_flos|train_runtime|num_tokens|num_input_tokens_seen|samples_seen|"
    r"global_step|step|timestamp|wall_time|runtime)$"
)


def is_vital_sign(metric: str) -> bool:
    """False for schedules and bookkeeping (learning rate, epoch, counters) that `analyze` skips."""
    return not _BOOKKEEPING.search(metric.lower())


def infer_kind(metric: str) -> str:
    """Guess the metric kind from its name; 'loss' when nothing matches.

    >>> infer_kind("sampling/sampling_logp_difference/mean")
    'logprob_mismatch'
    """
    return recognised_kind(metric) or "loss"


def recognised_kind(metric: str) -> str | None:
    """The kind a metric's name names, or None for names that say nothing (say "accuracy").

    Live detection watches only recognised vital signs: reading an accuracy as a loss would
    call its rise a divergence.
    """
    lowered = metric.lower()
    if not is_vital_sign(metric):
        return None
    for pattern, kind in _NAME_PATTERNS:
        if re.search(pattern, lowered):
            return kind
    return None


def profile_for(metric: str, kind: str | None = None) -> KindProfile:
    """Return the thresholds for a series: the given kind, or the one its name implies."""
    chosen = kind or infer_kind(metric)
    if chosen not in KINDS:
        raise ValueError(f"unknown metric kind {chosen!r}; expected one of {', '.join(KINDS)}")
    profile = KINDS[chosen]
    if chosen == "logprob_mismatch":
        lowered = metric.lower()
        for suffix, tolerance in _MISMATCH_TOLERANCE_BY_SUFFIX:
            if lowered.endswith(suffix):
                return KindProfile(**{**profile.__dict__, "abs_tolerance": tolerance})
    return profile
