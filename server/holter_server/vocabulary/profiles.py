"""Detector defaults per signal kind: what healthy looks like for each signal, and which way is bad.

`KINDS` is the table every detector reads its thresholds from (moved here from detect/kinds.py so
the vocabulary is the one home of what a kind is; the values are the classifier's to tune).
`SYSTEM_KINDS` holds the thresholds of the GPU vitals, which have detectors of their own
(detect/system_vitals.py) rather than the curve classifier.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.severities import Level

# The curve classifier's detectors, which read every vital sign (detect/incremental.py runs the
# ones a profile lists).
CURVE_DETECTORS: tuple[str, ...] = (
    "nonfinite",
    "spike",
    "rise",
    "drift",
    "level_shift",
    "plateau",
    "sawtooth",
    "too_good",
)
# An RL policy's health (detect/rl_health.py): a KL held above the band its algorithm fixes, an
# entropy collapsing toward 0, a clip fraction saturating, a reward collapsing. Each reads one kind.
HEALTH_DETECTORS: tuple[str, ...] = ("kl_band", "entropy_collapse", "clip_saturation", "reward_collapse")
# Every detector a kind may run, by name.
DETECTORS: tuple[str, ...] = CURVE_DETECTORS + HEALTH_DETECTORS
# A signal Holter does not read as a vital sign is watched only for NaN/±Inf and extreme outliers.
WATCH_DETECTORS: tuple[str, ...] = ("nonfinite", "spike")
# PPO keeps the KL between the policy before and after an update near its target, 0.01-0.02
# (Schulman et al. 2017; CleanRL's `target_kl`, stable-baselines3's): held at five times that it
# leaves its band, at 0.5 it has blown up. The frameworks' maps give this ceiling to the names
# that measure the KL to the old policy (`approx_kl`, `ppo_kl`, `policy/approxkl_avg`).
KL_PER_UPDATE_CEILING = 0.1
KL_PER_UPDATE_CRITICAL = 0.5


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
    spike_severity: str = Level.INFO
    # a recovered spike stays `spike_severity` whatever its size (healthy runs are spiky: a 15x
    # one-step gradient-norm spike in a healthy fine-tune); one that takes more than
    # `spike_warn_points` points to come back (when set) is a warning
    spike_warn_points: int | None = 3
    # divergence by a sustained rise above the running minimum of the smoothed level
    rise_factor: float | None = 1.5
    rise_persist: int = 5
    # ... and covers this share of the way back up from that minimum to the highest level seen
    # before it: a hump on a memorising loss at 0.002 is not a divergence of a loss that started at 2
    rise_min_range: float = 0.0
    # norms grow from their initialisation before they settle: when set, the running minimum
    # starts once the level has settled (see divergence.py), and before that only a rise of
    # `rise_warmup_factor` x the minimum since init counts
    rise_warmup_factor: float | None = None
    # drift (detect/drift.py): a sustained move in the bad direction from the best level, named once
    # it is `drift_min_rel` of the best (and clear of the noise); None: not read for drift. It is
    # information below `drift_warn_rel` (None: the same as `drift_min_rel`): a gradient norm that
    # doubled is worth a note, and a warning once the run's other series say it is no benign rise
    # (findings.py); a drift still under way that reaches `drift_critical_rel` is critical (None: never)
    drift_min_rel: float | None = None
    drift_warn_rel: float | None = None
    drift_critical_rel: float | None = None
    # level shift between two 16-point windows
    shift_min_rel: float = 0.5
    shift_severity: str = Level.WARNING
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
    sawtooth_severity: str = Level.WARNING
    sawtooth_min_rel: float = 0.005
    # a spike train is named when chance would line its spikes up this well less often than this
    # (see sawtooth.py); the period needs less proof where every spike is already a fault (the
    # mismatch) or where naming it raises no alarm (a slow step every N steps is info)
    sawtooth_max_chance: float = 1e-3
    # healthy ceiling (logprob mismatch ≈ 0): excursions below it never count
    abs_tolerance: float | None = None
    abs_floor: float = 1e-12
    # the value a signal with a healthy ceiling sits at when all is well (0 for a gap, 1 for a
    # ratio): a route's own numerical floor is measured from it (detect/ceiling.py)
    healthy_level: float = 0.0
    # RL policy health (detect/rl_health.py, the detectors of `HEALTH_DETECTORS` a profile lists):
    # the smoothed level held out of its band for `band_persist` points in a row
    band_persist: int = 5
    # kl_band, clip_saturation: the ceiling the algorithm fixes, and the level that makes it
    # critical while it is still there (None: never critical)
    band_ceiling: float | None = None
    band_critical: float | None = None
    # entropy_collapse: at or below this share of its settled high (critical at or below
    # `collapse_critical_share`); reward_collapse: down by this share of what it had gained (from
    # its low to its best, or of its best's own size when it never rose), critical back at its low
    collapse_share: float | None = None
    collapse_critical_share: float | None = None
    # which detectors read this kind
    detectors: tuple[str, ...] = CURVE_DETECTORS
    # no event of the curve classifier's detectors on this kind is louder than this severity
    # (None: as each detector says); the RL health detectors say their own
    severity_cap: str | None = None
    # whether a spike may open before the baseline has history (its noise scale is then only a
    # floor relative to the level, meaningless for a signal that sits around zero)
    spike_early: bool = True


_THROUGHPUT = KindProfile(
    name="throughput",
    drift_min_rel=0.08,
    drift_critical_rel=0.4,
    direction=-1,
    spike_min_rel=0.08,
    spike_warn_points=None,
    rise_factor=None,
    shift_min_rel=0.15,
    frozen_min_points=None,
    sawtooth_severity=Level.INFO,
    sawtooth_min_rel=0.05,
    sawtooth_max_chance=0.01,
)

KINDS: dict[str, KindProfile] = {
    "loss": KindProfile(
        name="loss",
        drift_min_rel=0.02,
        drift_critical_rel=0.25,
        spike_min_rel=0.05,
        rise_factor=1.5,
        rise_min_range=0.2,
        shift_min_rel=0.1,
        shift_severity=Level.INFO,
        flat_from_start=True,
        too_good=True,
    ),
    "eval_loss": KindProfile(
        name="eval_loss",
        drift_min_rel=0.02,
        spike_min_rel=0.05,
        rise_factor=1.5,
        rise_min_range=0.2,
        rise_persist=3,
        shift_min_rel=0.1,
        shift_severity=Level.INFO,
        too_good=True,
    ),
    "grad_norm": KindProfile(
        name="grad_norm",
        drift_min_rel=1.0,
        drift_warn_rel=1.5,
        drift_critical_rel=3.0,
        spike_min_rel=0.5,
        spike_warn_points=None,
        rise_factor=5.0,
        rise_warmup_factor=10.0,
        shift_min_rel=0.5,
        shift_abrupt=True,
        zero_is_plateau=True,
        frozen_min_points=30,
        sawtooth_min_rel=0.05,
    ),
    "activation_norm": KindProfile(
        name="activation_norm",
        drift_min_rel=1.0,
        drift_warn_rel=1.5,
        drift_critical_rel=3.0,
        spike_min_rel=0.3,
        spike_warn_points=None,
        rise_factor=3.0,
        rise_warmup_factor=20.0,
        shift_min_rel=0.3,
        shift_abrupt=True,
        zero_is_plateau=True,
        frozen_min_points=30,
        sawtooth_min_rel=0.02,
    ),
    "logprob_mismatch": KindProfile(
        name="logprob_mismatch",
        drift_min_rel=1.5,
        drift_critical_rel=9.0,
        spike_min_rel=0.0,
        spike_severity=Level.WARNING,
        rise_factor=None,
        shift_min_rel=1.0,
        frozen_min_points=None,
        sawtooth_max_chance=0.05,
        abs_tolerance=0.05,
        abs_floor=1e-3,
    ),
    "throughput": _THROUGHPUT,
    # model FLOPs utilisation: a throughput measured as a share of the device's peak, judged as one
    "mfu": replace(_THROUGHPUT, name="mfu"),
    "step_time": KindProfile(
        name="step_time",
        drift_min_rel=0.08,
        drift_critical_rel=0.6,
        spike_min_rel=0.2,
        spike_warn_points=None,
        rise_factor=None,
        shift_min_rel=0.2,
        frozen_min_points=None,
        sawtooth_severity=Level.INFO,
        sawtooth_min_rel=0.05,
        sawtooth_max_chance=0.01,
    ),
    # the step's own work, without its wait for data (`holter.torch.watch_loader`'s holter/loader/compute_s)
    "compute_time": KindProfile(
        name="compute_time",
        spike_min_rel=0.2,
        rise_factor=None,
        shift_min_rel=0.2,
        frozen_min_points=None,
        sawtooth_severity=Level.INFO,
        sawtooth_min_rel=0.05,
    ),
    # the share of a step spent waiting for its batch: ≈0 when the loader keeps up; held above a
    # fifth of the step it is a stall. A slow first batch of each epoch (workers starting) is a
    # spike or a sawtooth of information only. Logged in percent, the ceiling is 20 (profile_for).
    "data_wait": KindProfile(
        name="data_wait",
        spike_min_rel=0.0,
        rise_factor=None,
        shift_min_rel=1.0,
        frozen_min_points=None,
        abs_tolerance=0.2,
        abs_floor=1e-3,
        sawtooth_severity=Level.INFO,
    ),
    # a rollout/trainer ratio whose healthy value is 1.0 (NeMo-RL token_mult_prob_error, importance ratios)
    "mismatch_ratio": KindProfile(
        name="mismatch_ratio",
        spike_min_rel=0.0,
        spike_severity=Level.WARNING,
        rise_factor=None,
        shift_min_rel=1.0,
        frozen_min_points=None,
        sawtooth_max_chance=0.05,
        abs_tolerance=1.05,
        abs_floor=1e-3,
        healthy_level=1.0,
    ),
    # RL policy/value/KL losses swing around zero: a NaN breaks training, an outlier is worth a note
    "policy_loss": KindProfile(
        name="policy_loss",
        spike_z=20.0,
        spike_min_rel=1.0,
        spike_warn_points=None,
        rise_factor=None,
        frozen_min_points=None,
        detectors=WATCH_DETECTORS,
        spike_early=False,
    ),
    # The RL policy's health (detect/rl_health.py): NaN/±Inf and extreme outliers at info, as for
    # any statistic (a reward function's mean is NaN on a step with no prompt it scores), and the
    # failure each signal has of its own, which may alarm.
    # a reward, score or accuracy: a collapse (down by half of what it had gained, and held) is bad
    "reward": KindProfile(
        name="reward",
        direction=-1,
        spike_z=20.0,
        spike_min_rel=1.0,
        spike_warn_points=None,
        rise_factor=None,
        frozen_min_points=None,
        collapse_share=0.5,
        detectors=(*WATCH_DETECTORS, "reward_collapse"),
        severity_cap=Level.INFO,
        spike_early=False,
    ),
    # the policy's KL divergence, up is bad. To the old policy per update (PPO's `approx_kl`):
    # against the band PPO fixes (`profile_for` gives those names their `band_ceiling`). To the
    # reference model (GRPO's and RLHF-PPO's `kl`): it grows from 0 by design, per token or summed
    # per sequence, so no band fits every run: NaN/±Inf and outliers only
    "kl": KindProfile(
        name="kl",
        spike_z=20.0,
        spike_min_rel=1.0,
        spike_warn_points=None,
        rise_factor=None,
        frozen_min_points=None,
        band_persist=3,
        detectors=(*WATCH_DETECTORS, "kl_band"),
        severity_cap=Level.INFO,
        spike_early=False,
    ),
    # a policy's entropy: falling to a quarter of its settled high and staying there is a collapse
    "entropy": KindProfile(
        name="entropy",
        direction=-1,
        spike_z=20.0,
        spike_min_rel=1.0,
        spike_warn_points=None,
        rise_factor=None,
        frozen_min_points=None,
        collapse_share=0.25,
        collapse_critical_share=0.1,
        detectors=(*WATCH_DETECTORS, "entropy_collapse"),
        severity_cap=Level.INFO,
        spike_early=False,
    ),
    # the share of samples or tokens whose probability ratio the PPO clip cut: held above 0.3 a
    # large part of each update's gradient is clipped away (a healthy PPO clips a tenth to a fifth)
    "clip_fraction": KindProfile(
        name="clip_fraction",
        spike_z=20.0,
        spike_min_rel=1.0,
        spike_warn_points=None,
        rise_factor=None,
        frozen_min_points=None,
        band_ceiling=0.3,
        detectors=(*WATCH_DETECTORS, "clip_saturation"),
        severity_cap=Level.INFO,
        spike_early=False,
    ),
    "statistic": KindProfile(
        name="statistic",
        spike_z=20.0,
        spike_min_rel=1.0,
        rise_factor=None,
        frozen_min_points=None,
        detectors=WATCH_DETECTORS,
        severity_cap=Level.INFO,
        spike_early=False,
    ),
    "schedule": KindProfile(name="schedule", rise_factor=None, frozen_min_points=None, detectors=()),
    # the machine's own vitals (CPU, memory, disk, network; a GPU's temperature, power, clocks):
    # drawn beside the run, read by no detector (the GPU's memory, utilisation and throttling are
    # SYSTEM_KINDS below)
    "system": KindProfile(name="system", rise_factor=None, frozen_min_points=None, detectors=()),
    # one rank's series of a distributed job: read across the ranks (services/ranks.py), not on its own
    "rank": KindProfile(name="rank", rise_factor=None, frozen_min_points=None, detectors=()),
    "unknown": KindProfile(
        name="unknown",
        spike_z=20.0,
        spike_min_rel=1.0,
        rise_factor=None,
        frozen_min_points=None,
        detectors=WATCH_DETECTORS,
        severity_cap=Level.INFO,
        spike_early=False,
    ),
}


@dataclass(frozen=True)
class SystemKind:
    """A system-vital kind read by its own detector (detect/system_vitals.py), not by the curve
    classifier: the event kind it raises and its thresholds (in samples, one every ~10 s)."""

    name: str
    event_kind: str
    severity: str = Level.WARNING
    # samples before the detector judges: the start of a job (loading, compiling, warming up) is not its rhythm
    warmup_points: int = 12
    # gpu_memory: a rise of at least `min_rise` of the memory over `window` samples, still climbing
    # in most of them and with no single jump making `max_jump_share` of it, that would reach
    # `limit` within `horizon` samples at its pace (or already has)
    window: int = 30
    min_rise: float = 0.05
    rising_share: float = 0.7
    max_jump_share: float = 0.5
    limit: float = 0.98
    horizon: int = 360
    critical_level: float = 0.95
    # gpu_utilization: below `idle_share` of the level before (and below `idle_ceiling`) for
    # `min_points` samples in a row, from a level of at least `busy_floor`
    idle_share: float = 0.3
    idle_ceiling: float = 20.0
    busy_floor: float = 50.0
    min_points: int = 3
    # gpu_throttle: consecutive flagged samples, and the gap that still joins two episodes
    merge_gap: int = 3


SYSTEM_KINDS: dict[str, SystemKind] = {
    "gpu_memory": SystemKind("gpu_memory", EventKind.GPU_MEMORY_LEAK),
    "gpu_utilization": SystemKind("gpu_utilization", EventKind.GPU_IDLE),
    "gpu_throttle": SystemKind("gpu_throttle", EventKind.GPU_THROTTLED, warmup_points=0, min_points=2),
}


# Tolerances (the healthy ceiling) of the mismatch statistics, by the end of the name: maxima
# and high percentiles of a per-token gap are naturally larger than its mean; the share of
# tokens above the per-token tolerance and the KL estimate are small numbers of their own.
_MISMATCH_TOLERANCE_BY_SUFFIX: tuple[tuple[str, float], ...] = (
    ("max", 0.5),
    ("p99", 0.3),
    ("p95", 0.2),
    ("std", 0.1),
    ("frac_above_tol", 0.02),
    ("kl_k3", 0.01),
)


# A critic's value loss (stable-baselines3 `train/value_loss`, verl `critic/vf_loss`, OpenRLHF
# `critic_loss`) is read with the RL losses, but unlike a PPO/GRPO surrogate it is a squared error:
# never negative, its level meaningful. A one-update jump there (a bad batch of returns: a PPO
# value loss of 0.0074 -> 0.091 -> 0.014 in tests/data/real_curves) is worth a note at a loss's
# outlier threshold; the surrogate, which crosses zero all the time, keeps the wide one. Spikes of
# RL losses stay info either way.
_VALUE_LOSS = re.compile(r"(^|[^a-z])(value_loss|vf_loss|critic_loss)([^a-z]|$)")


def is_percent(metric: str) -> bool:
    """Whether a share is logged in percent (`mfu(%)`, `data_loading_pct`) rather than as a fraction."""
    lowered = metric.lower()
    return "%" in lowered or bool(re.search(r"(^|[^a-z])(pct|percent)([^a-z]|$)", lowered))


def profile_for(metric: str, kind: str | None = None) -> KindProfile:
    """The thresholds for a series: of `kind`, or of what its name says it is (unknown names get
    the watch-only profile, never a loss's). A mismatch statistic's healthy ceiling comes from
    the rule that recognised its name, else from the end of its name; a share of the step spent
    waiting for data, logged in percent, has its ceiling in percent; a critic's value loss gets a
    loss's outlier threshold among the RL losses; a KL to the old policy per update gets the band
    its rule gives (`band_ceiling`), a KL to the reference none."""
    from holter_server.vocabulary.names import understand

    understood = understand(metric)
    chosen = kind or understood.kind
    if chosen not in KINDS:
        raise ValueError(f"unknown metric kind {chosen!r}; expected one of {', '.join([*KINDS, *SYSTEM_KINDS])}")
    profile = KINDS[chosen]
    if chosen == "policy_loss" and _VALUE_LOSS.search(metric.lower()):
        return replace(profile, spike_z=KINDS["loss"].spike_z)
    if chosen == "kl":
        # the KL to the old policy per update has a band its algorithm fixes (the rule that
        # recognised the name says so with a ceiling); the KL to the reference has none
        ceiling = understood.tolerance if understood.kind == chosen else None
        if ceiling is None:
            return profile
        critical = ceiling * KL_PER_UPDATE_CRITICAL / KL_PER_UPDATE_CEILING
        return replace(profile, band_ceiling=ceiling, band_critical=critical)
    if profile.abs_tolerance is None:
        return profile
    if chosen == "data_wait" and is_percent(metric):
        return replace(profile, abs_tolerance=100 * profile.abs_tolerance, abs_floor=0.1)
    tolerance = understood.tolerance if understood.kind == chosen else None
    if tolerance is None and chosen == "logprob_mismatch":
        lowered = metric.lower()
        tolerance = next((t for suffix, t in _MISMATCH_TOLERANCE_BY_SUFFIX if lowered.endswith(suffix)), None)
    return replace(profile, abs_tolerance=tolerance) if tolerance is not None else profile
