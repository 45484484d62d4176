"""Throughput and step time: a drop with an unchanged loss is a systems bug, not a learning one.

`Run.log_throughput()` and `Run.timed_step()` use `ThroughputMeter`; the names they log are
read by the service as throughput (down is bad) and step time (up is bad).

On a GPU the host runs ahead of the device, so one step's wall time is only what it took to
queue the work; the time between consecutive steps (what `log_throughput` measures) still
averages to the device's pace because the host cannot run ahead by more than a bounded queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable

STEP_TIME = "step_time"
TOKENS_PER_S = "throughput/tokens_per_s"
SAMPLES_PER_S = "throughput/samples_per_s"


def rates(seconds: float, tokens: float | None = None, samples: float | None = None) -> dict[str, float]:
    """The metrics for one step of `seconds` that processed `tokens` and `samples` (either optional)."""
    metrics = {STEP_TIME: seconds}
    if seconds > 0:
        if tokens is not None:
            metrics[TOKENS_PER_S] = tokens / seconds
        if samples is not None:
            metrics[SAMPLES_PER_S] = samples / seconds
    return metrics


class ThroughputMeter:
    """Measures the wall time between consecutive `mark()` calls."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._last: float | None = None

    def mark(self, tokens: float | None = None, samples: float | None = None) -> dict[str, float] | None:
        """End a step here: its metrics since the previous mark, or None on the first mark.

        The first mark only starts the clock, because the time before it (loading a model,
        compiling) is not a training step and would read as a throughput drop.
        """
        now = self._clock()
        last, self._last = self._last, now
        if last is None:
            return None
        return rates(now - last, tokens, samples)

    def start(self) -> None:
        """Start the clock unless it runs: a step begins here, after whatever pause preceded it."""
        if self._last is None:
            self._last = self._clock()

    def restart(self) -> None:
        """Forget the previous mark, e.g. after a pause for evaluation or checkpointing."""
        self._last = None
