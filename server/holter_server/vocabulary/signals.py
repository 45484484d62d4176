"""What a metric can be: the one list of signal kinds, each with the chart it is drawn on, how
it is watched, and its detector defaults (`profiles.KINDS`, or `profiles.SYSTEM_KINDS` for the
GPU vitals, which have detectors of their own)."""

from __future__ import annotations

from dataclasses import dataclass

from holter_server.vocabulary.profiles import KINDS, SYSTEM_KINDS, KindProfile, SystemKind


@dataclass(frozen=True)
class Panel:
    """A chart of the run page that gathers the metrics of some kinds (train and eval loss share one).
    `share`: its metrics are shares (of the device's peak, of the step), drawn on a percentage axis
    whether a metric is logged as a fraction (0.41) or in percent (41): the unit its name or
    framework says (`understood.unit`), else its values tell."""

    key: str
    title: str
    share: bool = False


# In the order the run page, the post-mortem and the report draw them.
PANELS: tuple[Panel, ...] = (
    Panel("loss", "Loss"),
    Panel("grad_norm", "Gradient norm"),
    Panel("activation_norm", "Activation norm"),
    Panel("logprob_mismatch", "Logprob mismatch (rollout vs trainer)"),
    Panel("mismatch_ratio", "Rollout/trainer ratio (healthy at 1)"),
    Panel("throughput", "Throughput"),
    Panel("mfu", "Model FLOPs utilisation (share of the device's peak)", share=True),
    Panel("step_time", "Step time"),
    Panel("data_wait", "Waiting for data (share of the step)", share=True),
    Panel("policy_loss", "Policy loss"),
    Panel("reward", "Reward"),
    Panel("kl", "KL divergence (policy vs old policy or reference)"),
    Panel("entropy", "Policy entropy"),
    Panel("clip_fraction", "Clip fraction (share of ratios clipped)", share=True),
    Panel("gpu_memory", "GPU memory (share used)"),
    Panel("gpu_utilization", "GPU utilisation (%)"),
    Panel("gpu_throttle", "GPU clocks cut (1: throttled)"),
)
PANEL_KEYS: tuple[str, ...] = tuple(p.key for p in PANELS)


@dataclass(frozen=True)
class SignalKind:
    """One kind of metric.

    `panel` is the chart it shares (None: a chart of its own). `watch` says how closely it is
    read: "vital" (every detector its profile lists, alarms included; a GPU vital by its own
    detector), "quiet" (NaN/±Inf and extreme outliers at info; alarms only where the profile
    lists a detector of its own: an RL policy's KL, entropy, clip fraction and reward, read by
    detect/rl_health.py) or "none" (drawn, never analysed).
    """

    name: str
    label: str
    panel: str | None
    watch: str
    description: str

    @property
    def profile(self) -> KindProfile | SystemKind:
        """Its detector defaults: the curve classifier's, or a GPU vital detector's."""
        return SYSTEM_KINDS[self.name] if self.name in SYSTEM_KINDS else KINDS[self.name]

    @property
    def system(self) -> bool:
        """Whether a system-vital detector (detect/system_vitals.py) reads it, not the curve classifier."""
        return self.name in SYSTEM_KINDS

    @property
    def analysed(self) -> bool:
        """Whether any detector reads this kind (`holter analyze` skips the others)."""
        profile = self.profile
        return isinstance(profile, SystemKind) or bool(profile.detectors)


SIGNAL_KINDS: tuple[SignalKind, ...] = (
    SignalKind("loss", "training loss", "loss", "vital", "a language-model or task loss: falls, then flattens"),
    SignalKind("eval_loss", "eval loss", "loss", "vital", "a held-out loss, logged every so often"),
    SignalKind("grad_norm", "gradient norm", "grad_norm", "vital", "total or per-layer gradient norm"),
    SignalKind("activation_norm", "activation norm", "activation_norm", "vital", "per-layer activation RMS or norm"),
    SignalKind(
        "logprob_mismatch",
        "logprob mismatch",
        "logprob_mismatch",
        "vital",
        "rollout engine vs trainer on the same tokens: healthy ≈0",
    ),
    SignalKind(
        "mismatch_ratio",
        "mismatch ratio",
        "mismatch_ratio",
        "vital",
        "rollout engine vs trainer as a ratio: healthy ≈1.0 (token_mult_prob_error, importance-sampling ratio)",
    ),
    SignalKind("throughput", "throughput", "throughput", "vital", "tokens or samples per second, TFLOP/s: down is bad"),
    SignalKind(
        "mfu",
        "MFU",
        "mfu",
        "vital",
        "model FLOPs utilisation, the share of the device's peak the model's arithmetic achieves: down is bad "
        "(a share, 0-1, on an axis of its own: beside tokens/s it would read as flat at 0)",
    ),
    SignalKind("step_time", "step time", "step_time", "vital", "time per step or phase: up is bad"),
    SignalKind(
        "compute_time",
        "compute time",
        "step_time",
        "vital",
        "the step's own work without its wait for data (holter.torch.watch_loader's holter/loader/compute_s)",
    ),
    SignalKind(
        "data_wait",
        "data wait",
        "data_wait",
        "vital",
        "the share of a step spent waiting for its batch (fraction or %): healthy ≈0, held above a fifth is a stall",
    ),
    SignalKind(
        "policy_loss",
        "policy loss",
        "policy_loss",
        "quiet",
        "an RL policy, value or KL loss: swings around zero; NaN/±Inf critical, outliers info",
    ),
    SignalKind(
        "reward",
        "reward",
        "reward",
        "quiet",
        "a reward, score or accuracy: higher is better; a collapse (down by half of what it had gained, and held) "
        "is named, NaN and outliers at info",
    ),
    SignalKind(
        "kl",
        "KL divergence",
        "kl",
        "quiet",
        "an RL policy's KL to the old policy per update (PPO's approx_kl: its band is ≈0.01-0.02, held above 0.1 it "
        "left it) or to the reference model (grows by design: watched for NaN and outliers only); up is bad",
    ),
    SignalKind(
        "entropy",
        "policy entropy",
        "entropy",
        "quiet",
        "an RL policy's entropy: falling to a quarter of its settled high and staying there is a collapse",
    ),
    SignalKind(
        "clip_fraction",
        "clip fraction",
        "clip_fraction",
        "quiet",
        "the share of probability ratios the PPO clip cut: held above 0.3 it has saturated",
    ),
    SignalKind(
        "statistic",
        "statistic",
        None,
        "quiet",
        "a recognised statistic that is not a vital sign (a metric's spread or extremes, lengths, memory, "
        "an SFT model's token entropy)",
    ),
    SignalKind(
        "schedule",
        "schedule",
        None,
        "none",
        "a schedule or counter (learning rate, epoch, step, batch size): drawn only",
    ),
    SignalKind(
        "gpu_memory",
        "GPU memory",
        "gpu_memory",
        "vital",
        "a GPU's share of memory in use (holter/system/gpu.<i>.memory_used_frac): a climb that goes on is a leak",
    ),
    SignalKind(
        "gpu_utilization",
        "GPU utilisation",
        "gpu_utilization",
        "vital",
        "a GPU's utilisation in % (holter/system/gpu.<i>.utilization): a collapse while steps go on is the GPU idling",
    ),
    SignalKind(
        "gpu_throttle",
        "GPU throttling",
        "gpu_throttle",
        "vital",
        "1 while a GPU's clocks are cut for heat or power (holter/system/gpu.<i>.throttle.*)",
    ),
    SignalKind(
        "system",
        "system vital",
        None,
        "none",
        "the machine's CPU, memory, disk and network, a GPU's temperature, power and clocks: drawn only",
    ),
    SignalKind(
        "rank",
        "rank series",
        None,
        "none",
        "one rank's copy of a metric, or its timings (holter/rank/<r>/..., holter/dist/...): "
        "read across the ranks of the job, drawn in the Ranks section",
    ),
    SignalKind(
        "unknown",
        "unknown",
        None,
        "quiet",
        "a name Holter does not recognise: NaN/±Inf and extreme outliers, info only",
    ),
)

SIGNAL_KIND_NAMES: tuple[str, ...] = tuple(k.name for k in SIGNAL_KINDS)
BY_NAME: dict[str, SignalKind] = {k.name: k for k in SIGNAL_KINDS}
# Kinds whose curves are read as losses (the post-mortem's loss spikes, the reference band).
LOSS_KINDS: tuple[str, ...] = ("loss", "eval_loss")
# Kinds a comparison with the reference run starts on, in order of preference (an eval loss
# drifting while the train loss matches is the signature of a silent bug).
REFERENCE_KINDS: tuple[str, ...] = ("eval_loss", "loss")
# Kinds a rollout/trainer mismatch is measured in, and the value each is healthy at.
MISMATCH_HEALTHY: dict[str, float] = {
    kind: KINDS[kind].healthy_level for kind in ("logprob_mismatch", "mismatch_ratio")
}


def signal(kind: str) -> SignalKind:
    """The signal kind called `kind` (ValueError naming the known ones otherwise)."""
    try:
        return BY_NAME[kind]
    except KeyError:
        raise ValueError(f"unknown metric kind {kind!r}; expected one of {', '.join(SIGNAL_KIND_NAMES)}") from None


def panel_of(kind: str) -> str | None:
    """The panel a kind is drawn on, or None for a chart of its own."""
    return BY_NAME[kind].panel if kind in BY_NAME else None
