"""What Holter can find: the one list of event kinds, grouped by where they come from."""

from __future__ import annotations

from dataclasses import dataclass

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
}


@dataclass(frozen=True)
class EventKind:
    """One kind of event: its name (stored, filtered on), the label drawn on charts, its group.

    `summarised` says whether the post-mortem's written summary tells it (a level shift, a
    precursor already told with its divergence, a resumption or a threshold crossing is not).
    """

    name: str
    label: str
    group: str
    description: str
    summarised: bool = True


EVENT_KINDS: tuple[EventKind, ...] = (
    EventKind("spike", "spike", "metric", "a sudden jump that recovers"),
    EventKind(
        "divergence",
        "divergence",
        "metric",
        "shoots up and does not come back, goes NaN/±Inf, or creeps the wrong way from its best (a drift)",
    ),
    EventKind("plateau", "plateau", "metric", "stopped moving while it should move (or a gradient norm of exactly 0)"),
    EventKind("sawtooth", "sawtooth", "metric", "a regular zig-zag or periodic spikes, with its period"),
    EventKind("too_good", "too good", "metric", "a loss far below what the task allows (a leak)"),
    EventKind("level_shift", "level shift", "metric", "the level moved to a new one and stayed", summarised=False),
    EventKind(
        "grad_norm_precursor",
        "grad-norm precursor",
        "finding",
        "a gradient-norm spike a few steps before a loss spike",
        summarised=False,
    ),
    EventKind(
        "no_learning_signal", "no learning signal", "finding", "gradient norm exactly 0, or a loss flat from step zero"
    ),
    EventKind("activation_growth", "activation growth", "finding", "an activation norm that keeps growing"),
    EventKind("layer_dominance", "layer dominance", "finding", "one layer's activation norm dwarfing the others"),
    EventKind(
        "systems_slowdown", "systems slowdown", "finding", "throughput down (or step time up) while the loss carries on"
    ),
    EventKind(
        "drift_together",
        "drifting together",
        "finding",
        "a loss drifting the wrong way, with the vital signs that moved with it and those that held",
        summarised=False,
    ),
    EventKind(
        "norm_growth",
        "norm growth",
        "finding",
        "a gradient or activation norm that doubled since it settled, with no loss logged to tell it benign",
    ),
    EventKind(
        "mismatch_off_zero",
        "mismatch off zero",
        "finding",
        "the rollout/trainer mismatch left its healthy value (≈0, or ≈1 for a ratio)",
    ),
    EventKind(
        "input_stall",
        "input stall",
        "finding",
        "the step waits for data above a fifth of its time while its own work did not grow: the loader sets the pace",
    ),
    EventKind(
        "overfitting", "overfitting", "finding", "the eval loss turned up for good while the train loss kept falling"
    ),
    EventKind(
        "gpu_memory_leak", "GPU memory leak", "system", "a GPU's memory climbing sample after sample toward its limit"
    ),
    EventKind(
        "gpu_idle",
        "GPU idle",
        "system",
        "a GPU's utilisation collapsed while steps went on (waiting for data or the host)",
    ),
    EventKind(
        "gpu_throttled", "GPU throttled", "system", "a GPU's clocks cut for heat or power for several samples in a row"
    ),
    EventKind(
        "first_nonfinite",
        "first non-finite",
        "tripwire",
        "the module and gradient where NaN/±Inf first appeared, attached to the divergence it explains",
    ),
    EventKind("alert", "alert", "job", "the training job raised an alert itself (run.alert): its title and text"),
    EventKind("run_stalled", "stalled", "lifecycle", "no points or heartbeat for HOLTER_STALL_AFTER seconds"),
    EventKind("run_resumed", "resumed", "lifecycle", "a stalled run logged again", summarised=False),
    EventKind("run_crashed", "crashed", "lifecycle", "the client marked the run crashed"),
    EventKind("threshold", "threshold", "threshold", "a metric crossed a threshold rule", summarised=False),
    EventKind("reference_drift", "reference drift", "reference", "a metric left the reference run's band"),
)

EVENT_KIND_NAMES: tuple[str, ...] = tuple(k.name for k in EVENT_KINDS)
BY_NAME: dict[str, EventKind] = {k.name: k for k in EVENT_KINDS}


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
