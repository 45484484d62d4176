"""What Holter can find: the one list of event kinds, grouped by where they come from."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# Where an event kind comes from.
GROUPS: dict[str, str] = {
    "metric": "the classifier, on one metric's curve",
    "finding": "a cross-signal rule, reading several metrics of a run together",
    "system": "a system-vital detector, on one GPU's samples (holter's system vitals)",
    "tripwire": "a report from the training job itself (holter.torch.watch(..., nan_tripwire=True))",
    "job": "an alert the training job raised itself (run.alert, wandb's wandb.alert)",
    "lifecycle": "the run's status (heartbeats, finish)",
    "threshold": "a threshold alert rule someone set",
    "reference": "the comparison with the project's reference run",
    "ranks": "the ranks of a distributed job, read side by side (their timings, beats and series)",
}


class EventKind(StrEnum):
    """The event kinds by name, for code that names one (`EventKind.SPIKE`); `EVENT_KINDS` says
    everything else about each. An `EventKind` is its name as a string, stored and sent as such."""

    SPIKE = "spike"
    DIVERGENCE = "divergence"
    PLATEAU = "plateau"
    SAWTOOTH = "sawtooth"
    TOO_GOOD = "too_good"
    LEVEL_SHIFT = "level_shift"
    ENTROPY_COLLAPSE = "entropy_collapse"
    GRAD_NORM_PRECURSOR = "grad_norm_precursor"
    NO_LEARNING_SIGNAL = "no_learning_signal"
    ACTIVATION_GROWTH = "activation_growth"
    LAYER_DOMINANCE = "layer_dominance"
    SYSTEMS_SLOWDOWN = "systems_slowdown"
    DRIFT_TOGETHER = "drift_together"
    NORM_GROWTH = "norm_growth"
    MISMATCH_OFF_ZERO = "mismatch_off_zero"
    INPUT_STALL = "input_stall"
    OVERFITTING = "overfitting"
    GPU_MEMORY_LEAK = "gpu_memory_leak"
    GPU_IDLE = "gpu_idle"
    GPU_THROTTLED = "gpu_throttled"
    FIRST_NONFINITE = "first_nonfinite"
    ALERT = "alert"
    RUN_STALLED = "run_stalled"
    RUN_RESUMED = "run_resumed"
    RUN_CRASHED = "run_crashed"
    THRESHOLD = "threshold"
    REFERENCE_DRIFT = "reference_drift"
    STRAGGLER = "straggler"
    RANK_HUNG = "rank_hung"
    RANK_LOST = "rank_lost"
    RANK_OUTLIER = "rank_outlier"


@dataclass(frozen=True)
class EventKindEntry:
    """One kind of event: its name (stored, filtered on), the label drawn on charts, its group.

    `summarised` says whether the post-mortem's written summary tells it (a level shift, a
    precursor already told with its divergence, a resumption or a threshold crossing is not).
    """

    name: EventKind
    label: str
    group: str
    description: str
    summarised: bool = True


EVENT_KINDS: tuple[EventKindEntry, ...] = (
    EventKindEntry(EventKind.SPIKE, "spike", "metric", "a sudden jump that recovers"),
    EventKindEntry(
        EventKind.DIVERGENCE,
        "divergence",
        "metric",
        "shoots up and does not come back, goes NaN/±Inf, or creeps the wrong way from its best (a drift)",
    ),
    EventKindEntry(
        EventKind.PLATEAU, "plateau", "metric", "stopped moving while it should move (or a gradient norm of exactly 0)"
    ),
    EventKindEntry(EventKind.SAWTOOTH, "sawtooth", "metric", "a regular zig-zag or periodic spikes, with its period"),
    EventKindEntry(EventKind.TOO_GOOD, "too good", "metric", "a loss far below what the task allows (a leak)"),
    EventKindEntry(
        EventKind.LEVEL_SHIFT, "level shift", "metric", "the level moved to a new one and stayed", summarised=False
    ),
    # A KL that leaves its band and a reward that collapses are divergences (their kind's bad way,
    # held: detect/rl_health.py names which in the summary and `details.cause`), alerted and grouped
    # into one incident with the run's other divergences. A policy's entropy falling toward 0 is a
    # name of its own: nothing runs away, the policy stops exploring, and the cure (the entropy
    # bonus, the temperature, the clip range) is not a divergence's.
    EventKindEntry(
        EventKind.ENTROPY_COLLAPSE,
        "entropy collapse",
        "metric",
        "a policy's entropy fell toward 0 and stayed there: it turned near-deterministic and stopped exploring",
    ),
    EventKindEntry(
        EventKind.GRAD_NORM_PRECURSOR,
        "grad-norm precursor",
        "finding",
        "a gradient-norm spike a few steps before a loss spike",
        summarised=False,
    ),
    EventKindEntry(
        EventKind.NO_LEARNING_SIGNAL,
        "no learning signal",
        "finding",
        "gradient norm exactly 0, or a loss flat from step zero",
    ),
    EventKindEntry(
        EventKind.ACTIVATION_GROWTH, "activation growth", "finding", "an activation norm that keeps growing"
    ),
    EventKindEntry(
        EventKind.LAYER_DOMINANCE, "layer dominance", "finding", "one layer's activation norm dwarfing the others"
    ),
    EventKindEntry(
        EventKind.SYSTEMS_SLOWDOWN,
        "systems slowdown",
        "finding",
        "throughput down (or step time up) while the loss carries on",
    ),
    EventKindEntry(
        EventKind.DRIFT_TOGETHER,
        "drifting together",
        "finding",
        "a loss drifting the wrong way, with the vital signs that moved with it and those that held",
        summarised=False,
    ),
    EventKindEntry(
        EventKind.NORM_GROWTH,
        "norm growth",
        "finding",
        "a gradient or activation norm that doubled since it settled, with no loss logged to tell it benign",
    ),
    EventKindEntry(
        EventKind.MISMATCH_OFF_ZERO,
        "mismatch off zero",
        "finding",
        "the rollout/trainer mismatch left its healthy value (≈0, or ≈1 for a ratio)",
    ),
    EventKindEntry(
        EventKind.INPUT_STALL,
        "input stall",
        "finding",
        "the step waits for data above a fifth of its time while its own work did not grow: the loader sets the pace",
    ),
    EventKindEntry(
        EventKind.OVERFITTING,
        "overfitting",
        "finding",
        "the eval loss turned up for good while the train loss kept falling",
    ),
    EventKindEntry(
        EventKind.GPU_MEMORY_LEAK,
        "GPU memory leak",
        "system",
        "a GPU's memory climbing sample after sample toward its limit",
    ),
    EventKindEntry(
        EventKind.GPU_IDLE,
        "GPU idle",
        "system",
        "a GPU's utilisation collapsed while steps went on (waiting for data or the host)",
    ),
    EventKindEntry(
        EventKind.GPU_THROTTLED,
        "GPU throttled",
        "system",
        "a GPU's clocks cut for heat or power for several samples in a row",
    ),
    EventKindEntry(
        EventKind.FIRST_NONFINITE,
        "first non-finite",
        "tripwire",
        "the module and gradient where NaN/±Inf first appeared, attached to the divergence it explains",
    ),
    EventKindEntry(
        EventKind.ALERT, "alert", "job", "the training job raised an alert itself (run.alert): its title and text"
    ),
    EventKindEntry(
        EventKind.RUN_STALLED, "stalled", "lifecycle", "no points or heartbeat for HOLTER_STALL_AFTER seconds"
    ),
    EventKindEntry(EventKind.RUN_RESUMED, "resumed", "lifecycle", "a stalled run logged again", summarised=False),
    EventKindEntry(EventKind.RUN_CRASHED, "crashed", "lifecycle", "the client marked the run crashed"),
    EventKindEntry(
        EventKind.THRESHOLD, "threshold", "threshold", "a metric crossed a threshold rule", summarised=False
    ),
    EventKindEntry(EventKind.REFERENCE_DRIFT, "reference drift", "reference", "a metric left the reference run's band"),
    EventKindEntry(
        EventKind.STRAGGLER,
        "straggler",
        "ranks",
        "one rank (or a node's ranks) computes longer before the collectives than the others: every rank waits for it",
    ),
    EventKindEntry(
        EventKind.RANK_HUNG,
        "rank hung",
        "ranks",
        "the job stopped moving: which ranks wait in which collective, and where the ones that never reached it are",
    ),
    EventKindEntry(
        EventKind.RANK_LOST,
        "rank lost",
        "ranks",
        "a rank went silent without finishing (its process gone) while the others waited or failed",
    ),
    EventKindEntry(
        EventKind.RANK_OUTLIER,
        "rank out of band",
        "ranks",
        "one rank's loss or gradient norm left its peers' band at the same steps (a bad shard, a faulty device)",
    ),
)

EVENT_KIND_NAMES: tuple[str, ...] = tuple(k.name.value for k in EVENT_KINDS)
BY_NAME: dict[str, EventKindEntry] = {k.name: k for k in EVENT_KINDS}


def kinds_in(group: str) -> tuple[str, ...]:
    """The event kinds of one group, in table order."""
    return tuple(k.name for k in EVENT_KINDS if k.group == group)


METRIC_EVENT_KINDS = kinds_in("metric")
# What the post-mortem summary tells, in table order.
SUMMARISED_KINDS: tuple[str, ...] = tuple(k.name for k in EVENT_KINDS if k.summarised)
LIFECYCLE_KINDS = kinds_in("lifecycle")


def label(kind: str | None) -> str:
    """The short label of an event kind; an unknown kind reads as its name with spaces."""
    known = BY_NAME.get(kind or "")
    return known.label if known else str(kind or "event").replace("_", " ")


@dataclass(frozen=True)
class AblationVerdict:
    """What a difference between two arms of an ablation is (holter_server.analysis.verdicts), with
    the colour it is drawn in and its badge's (a Mantine colour name)."""

    name: str
    description: str
    color: str
    badge: str


ABLATION_VERDICTS: tuple[AblationVerdict, ...] = (
    AblationVerdict(
        "real effect", "a test says a difference this large is unlikely by chance at these seeds", "#2f9e44", "green"
    ),
    AblationVerdict(
        "no detectable difference",
        "the test found none at this many seeds (not proof of none: the verdict says what more seeds would detect)",
        "#868e96",
        "gray",
    ),
    AblationVerdict(
        "unknown", "cannot be judged: one run per arm and no measured seed spread to stand in", "#f08c00", "yellow"
    ),
)
