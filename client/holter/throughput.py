"""Throughput and step time: a drop with an unchanged loss is a systems bug, not a learning one.

`Run.timed_step()` and `Run.log_throughput()` use this module; the names they log are read by the
service as throughput (down is bad), MFU (down is bad, on a chart of its own: a share, not a rate)
and step time (up is bad). They live under `holter/`, so a framework's own `step_time` (TRL logs
one) is never mixed with Holter's.

Two clocks, because a step that waits for its data is a slow step: the chapter's first suspect
for low throughput is "the GPU idle while the CPU fetches the next batch", and a rate measured
inside the step alone never shows it.

* **the whole step** (`STEP_TIME`, `TOKENS_PER_S`, `SAMPLES_PER_S`, `MFU`): from the end of the
  previous step to the end of this one: the wait for the batch, the step's work, and anything
  else the loop does between steps (logging, an evaluation). This is what the run achieves;
* **the step's own work** (`COMPUTE_TIME`, `COMPUTE_TOKENS_PER_S`, `COMPUTE_SAMPLES_PER_S`,
  `COMPUTE_MFU`): the block `timed_step` wraps. Compute steady while the whole step falls is an
  input-pipeline (or host) stall; both falling is the step itself.

Given the model's FLOPs per token (`holter.torch.flops_per_token`) and the device's peak
(`PEAK_FLOPS`, by GPU name), they also log MFU, model FLOPs utilisation: the share of the device's
peak that the model's own arithmetic achieves, 0.3-0.5 for a well-tuned large run.

On a GPU the host runs ahead of the device, so one step's wall time is only what it took to
queue the work; the time between consecutive steps (the whole step) still averages to the
device's pace because the host cannot run ahead by more than a bounded queue.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

STEP_TIME = "holter/step_time"
TOKENS_PER_S = "holter/throughput/tokens_per_s"
SAMPLES_PER_S = "holter/throughput/samples_per_s"
MFU = "holter/throughput/mfu"
COMPUTE_TIME = "holter/compute_time"
COMPUTE_TOKENS_PER_S = "holter/throughput/compute_tokens_per_s"
COMPUTE_SAMPLES_PER_S = "holter/throughput/compute_samples_per_s"
COMPUTE_MFU = "holter/throughput/compute_mfu"
WHOLE_STEP = (STEP_TIME, TOKENS_PER_S, SAMPLES_PER_S, MFU)
COMPUTE_ONLY = (COMPUTE_TIME, COMPUTE_TOKENS_PER_S, COMPUTE_SAMPLES_PER_S, COMPUTE_MFU)

# Peak dense (no sparsity) tensor FLOP/s in bf16 with float32 accumulation, from the vendors'
# spec sheets, which print the sparse figure first: half of it is the dense one. Matched against
# the words of a device name as `torch.cuda.get_device_name` or nvidia-smi print it ("NVIDIA
# H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "AMD Instinct MI300X"), most specific entry first.
PEAK_FLOPS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("b200",), 2250e12),  # HGX B200 sheet: 4.5 PFLOPS sparse per GPU
    (("h200", "nvl"), 835e12),  # H200 NVL: 1,671 TFLOPS sparse
    (("h200",), 989e12),  # H200 SXM: 1,979 TFLOPS sparse
    (("h100", "nvl"), 835e12),  # H100 NVL: 1,671 TFLOPS sparse
    (("h100", "pcie"), 756e12),  # H100 PCIe: 1,513 TFLOPS sparse
    (("gh200",), 989e12),  # GH200: the H100 SXM's tensor cores
    (("h100",), 989e12),  # H100 SXM ("H100 80GB HBM3"): 1,979 TFLOPS sparse
    (("a100",), 312e12),  # A100 SXM and PCIe: 624 TFLOPS sparse
    (("a10g",), 125e12),  # A10G, AWS's A10 with no NVIDIA sheet of its own: the A10's figure
    (("a10",), 125e12),  # A10: 250 TFLOPS sparse
    (("l40s",), 362e12),  # L40S: 733 TFLOPS sparse
    (("l4",), 121e12),  # L4: 242 TFLOPS sparse
    (("rtx", "4090"), 165.2e12),  # Ada whitepaper, RTX 4090: 330.3 sparse (bf16 accumulates in fp32)
    (("rtx", "3090"), 71e12),  # Ampere GA102 whitepaper, RTX 3090: 142 sparse
    (("v100", "pcie"), 112e12),  # V100 PCIe: no bf16; fp16 tensor cores, no sparsity
    (("v100",), 125e12),  # V100 SXM2: fp16
    (("t4",), 65e12),  # T4: fp16 (no bf16)
    (("mi325x",), 1307.4e12),  # AMD Instinct MI325X: 2,614.9 TFLOPS sparse
    (("mi300x",), 1307.4e12),  # AMD Instinct MI300X: 2,614.9 TFLOPS sparse
)


def peak_flops_for(device_name: str) -> float:
    """The peak dense bf16 FLOP/s of a GPU named like `torch.cuda.get_device_name` names it.

    Raises ValueError for a device not in `PEAK_FLOPS`: MFU against a guessed peak would be
    reported as a fact, so give the number instead.
    """
    words = set(re.split(r"[^a-z0-9]+", device_name.lower()))
    for needed, flops in PEAK_FLOPS:
        if words.issuperset(needed):
            return flops
    known = ", ".join(" ".join(n).upper() for n, _ in PEAK_FLOPS)
    raise ValueError(f"no peak FLOP/s known for {device_name!r} (known: {known}); give peak_flops as a number")


def mfu_peak(tokens: float | None, flops_per_token: float | None, peak_flops: float | str | None) -> float | None:
    """The peak FLOP/s to compute MFU against, None when no MFU is asked for (no `flops_per_token`).

    `peak_flops` is a number of FLOP/s or a GPU's name to look up; a ValueError says what is
    missing or unknown.
    """
    if flops_per_token is None:
        return None
    if tokens is None or peak_flops is None:
        raise ValueError(
            "MFU needs tokens= and peak_flops= (FLOP/s, or a GPU name such as 'H100') beside flops_per_token="
        )
    if isinstance(peak_flops, str):
        return peak_flops_for(peak_flops)
    if not peak_flops > 0:
        raise ValueError(f"peak_flops must be a positive number of FLOP/s, not {peak_flops!r}")
    return float(peak_flops)


def rates(
    seconds: float,
    tokens: float | None = None,
    samples: float | None = None,
    *,
    flops_per_token: float | None = None,
    peak_flops: float | str | None = None,
    names: tuple[str, str, str, str] = WHOLE_STEP,
) -> dict[str, float]:
    """The metrics for one step of `seconds` that processed `tokens` and `samples` (either optional);
    with `flops_per_token` and `peak_flops` (FLOP/s, or a GPU name) also MFU, tokens x
    flops_per_token / seconds / peak FLOP/s. `names`: the time, tokens/s, samples/s and MFU names
    (the whole step's by default, `COMPUTE_ONLY` for the step's own work)."""
    time_name, tokens_name, samples_name, mfu_name = names
    peak = mfu_peak(tokens, flops_per_token, peak_flops)
    metrics = {time_name: seconds}
    if seconds > 0:
        if tokens is not None:
            metrics[tokens_name] = tokens / seconds
            if flops_per_token is not None and peak is not None:
                metrics[mfu_name] = tokens * flops_per_token / seconds / peak
        if samples is not None:
            metrics[samples_name] = samples / seconds
    return metrics


class StepClock:
    """Times `Run.timed_step`'s steps both ways (see the module doc): the block, and the whole step
    from the end of the previous one. The first step has no previous end: its whole step is its
    block plus the wait for its batch when a loader watch noted one (`note_wait`), else unknown
    (only the compute series is logged for it)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._last_end: float | None = None
        self._wait: float | None = None

    def now(self) -> float:
        return self._clock()

    def note_wait(self, seconds: float) -> None:
        """The wait for the next step's batch (from `holter.loader.watch_loader`)."""
        self._wait = seconds

    def step(
        self,
        started: float,
        tokens: float | None = None,
        samples: float | None = None,
        *,
        flops_per_token: float | None = None,
        peak_flops: float | None = None,
    ) -> dict[str, float]:
        """End a step whose block began at `started`: its compute-only metrics, and the whole
        step's when its length is known."""
        end = self._clock()
        compute = end - started
        whole = end - self._last_end if self._last_end is not None else None
        if whole is None and self._wait is not None:
            whole = compute + self._wait
        self._last_end, self._wait = end, None
        kw = {"flops_per_token": flops_per_token, "peak_flops": peak_flops}
        metrics = rates(compute, tokens, samples, names=COMPUTE_ONLY, **kw)
        if whole is not None:
            metrics.update(rates(whole, tokens, samples, **kw))
        return metrics

    def restart(self) -> None:
        """Forget the previous step's end, e.g. after a pause the whole step should not count (a
        long evaluation, a checkpoint) or a step that failed."""
        self._last_end = self._wait = None


class ThroughputMeter:
    """Measures the wall time between consecutive `mark()` calls."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._last: float | None = None

    def mark(
        self,
        tokens: float | None = None,
        samples: float | None = None,
        *,
        flops_per_token: float | None = None,
        peak_flops: float | str | None = None,
    ) -> dict[str, float] | None:
        """End a step here: its metrics since the previous mark, or None on the first mark.

        The first mark only starts the clock, because the time before it (loading a model,
        compiling) is not a training step and would read as a throughput drop.
        """
        now = self._clock()
        last, self._last = self._last, now
        if last is None:
            return None
        return rates(now - last, tokens, samples, flops_per_token=flops_per_token, peak_flops=peak_flops)

    def start(self) -> None:
        """Start the clock unless it runs: a step begins here, after whatever pause preceded it."""
        if self._last is None:
            self._last = self._clock()

    def restart(self) -> None:
        """Forget the previous mark, e.g. after a pause for evaluation or checkpointing."""
        self._last = None
