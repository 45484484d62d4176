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
    # norms grow from their initialisation before they settle: when set, the running minimum
    # starts once the level has settled (see divergence.py), and before that only a rise of
    # `rise_warmup_factor` x the minimum since init counts
    rise_warmup_factor: float | None = None
    # level shift between two 16-point windows
    shift_min_rel: float = 0.5
    shift_severity: str = "warning"
    # when set, only an abrupt change is a shift (both windows flat, the change in the gap block)
    # and not one out of the first blocks: a slow drift or the growth from init is not a regime change
    shift_abrupt: bool = False
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
        name="grad_norm", spike_min_rel=0.5, spike_warn_ratio=8.0, spike_warn_points=None, rise_factor=5.0,
        rise_warmup_factor=10.0, shift_min_rel=0.5, shift_abrupt=True, zero_is_plateau=True,
        frozen_min_points=30, sawtooth_min_rel=0.05,
    ),
    "activation_norm": KindProfile(
        name="activation_norm", spike_min_rel=0.3, spike_warn_ratio=3.0, spike_warn_points=None, rise_factor=3.0,
        rise_warmup_factor=20.0, shift_min_rel=0.3, shift_abrupt=True, zero_is_plateau=True,
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

# Ordered: the first pattern that matches the lower-cased metric name wins. A kind of None marks
# quantities that are logged next to the vital signs but are not read by the classifier: RL
# rewards and scores, accuracies, KL to the reference policy, entropy, clip ratios, policy-gradient
# losses (hover around 0 and may go negative), and agreement statistics such as the
# rollout/actor probability correlation (healthy ≈ 1, flat). Reading them as a loss would call a
# rising reward a divergence and a flat correlation "nothing learns from step zero".
_NAME_PATTERNS: tuple[tuple[str, str | None], ...] = (
    # logprob mismatch between the rollout engine and the trainer (TRL, verl, OpenRLHF, slime,
    # holter.rl's `logprob_mismatch/*`)
    (r"logp_diff|logp_difference|logprob.*(diff|mismatch)|rollout_probs_diff|vllm_kl|rollout_logprob", "logprob_mismatch"),
    (r"grad(ient)?[_/ ]?norm|gnorm", "grad_norm"),
    (r"act(ivation)?s?[_/ ]?(norm|rms)|resid(ual)?[_/]?(norm|rms)", "activation_norm"),
    # step and phase timings: verl `timing_s/step` (and every `timing_s/<phase>`,
    # `timing_per_token_ms/<phase>`), `perf/time_per_step`
    (r"(^|[_/])timing(_s|_ms|_per_token_ms)?/|step[_/ ]?time|iter(ation)?[_/ ]?time|time[_/ ]?per[_/ ]?step|"
     r"batch[_/ ]?time|runtime|_ms$|ms[_/]per[_/]step", "step_time"),
    (r"tokens?[_/ ]?per[_/ ]?s|tok/s|tokens_per_sec|samples?[_/ ]?per[_/ ]?s|throughput|tflops|mfu|it/s|steps_per_second", "throughput"),
    (r"reward|(^|[^a-z])(?<!cross_)(score|scores|return|returns|advantages?|acc|accuracy|entropy|kl|ppo_kl|approx_kl|"
     r"pg_clipfrac|clipfrac|clip_frac(tion)?|pg_loss|policy_loss|actor_loss|kl_loss|entropy_loss|(mean_)?length|"
     r"(mean_)?len|loss_scale|loss_scaler)([^a-z]|$)|clip_ratio|clipped_ratio|pearson|corr(elation)?([^a-z]|$)|accuracy|win_rate|pass@", None),
    (r"(^|[^a-z])(eval|val|valid|validation|test)([^a-z]|$).*(loss|nll|perplexity|ppl)", "eval_loss"),
    (r"loss|nll|perplexity|ppl|cross_?entropy", "loss"),
)

# Tolerances (the healthy ceiling) of the mismatch statistics, by the end of the name: maxima
# and high percentiles of a per-token gap are naturally larger than its mean; the share of
# tokens above the per-token tolerance and the KL estimate are small numbers of their own.
_MISMATCH_TOLERANCE_BY_SUFFIX: tuple[tuple[str, float], ...] = (
    ("max", 0.5), ("p99", 0.3), ("p95", 0.2), ("std", 0.1), ("frac_above_tol", 0.02), ("kl_k3", 0.01),
)


# Schedules and bookkeeping: logged next to the metrics but not vital signs. Timings named after
# the step (`timing_s/step`, `perf/time_per_step`) are step times, not step counters.
_BOOKKEEPING = re.compile(
    r"(^|[_/])(learning_rate|lr|epoch|total_flos|train_runtime|num_tokens|num_input_tokens_seen|samples_seen|"
    r"global_step|step|timestamp|wall_time|runtime)$"
)
_TIMING = re.compile(r"(^|[_/])timing(_s|_ms|_per_token_ms)?/|time[_/ ]?per[_/ ]?step")


def _is_bookkeeping(lowered: str) -> bool:
    return bool(_BOOKKEEPING.search(lowered)) and not _TIMING.search(lowered)


def _match(metric: str) -> tuple[bool, str | None]:
    """(whether a name pattern matched, the kind it names: None for a quantity not read)."""
    lowered = metric.lower()
    for pattern, kind in _NAME_PATTERNS:
        if re.search(pattern, lowered):
            return True, kind
    return False, None


def is_vital_sign(metric: str) -> bool:
    """False for what `analyze` skips: schedules and bookkeeping (learning rate, epoch, counters)
    and quantities the classifier does not read (reward, accuracy, KL to the reference, entropy,
    clip ratios, policy-gradient losses, correlations). Unknown names count as vital signs."""
    if _is_bookkeeping(metric.lower()):
        return False
    matched, kind = _match(metric)
    return not matched or kind is not None


def infer_kind(metric: str) -> str:
    """Guess the metric kind from its name; 'loss' when the name names no kind.

    Callers that must not read a non-loss as a loss check `is_vital_sign` (as `analyze` does)
    or use `recognised_kind` (as live detection does) first.

    >>> infer_kind("sampling/sampling_logp_difference/mean")
    'logprob_mismatch'
    """
    return recognised_kind(metric) or "loss"


def recognised_kind(metric: str) -> str | None:
    """The kind a metric's name names, or None for names that say nothing (say "my_metric"),
    bookkeeping (lr, epoch) and quantities that are not read (reward, accuracy, KL, entropy).

    Live detection watches only recognised vital signs: reading an accuracy as a loss would
    call its rise a divergence.
    """
    if _is_bookkeeping(metric.lower()):
        return None
    return _match(metric)[1]


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
