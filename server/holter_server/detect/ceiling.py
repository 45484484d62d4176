"""The healthy ceiling of a signal that should sit at ≈0 (the rollout-vs-trainer logprob mismatch).

It is the kind's tolerance, unless the series shows a numerical floor of its own from its first
`FLOOR_POINTS` points (an inference route whose kernels differ from the trainer's: a mean gap of
0.03 at every step) that is still under the tolerance: then the ceiling is `FLOOR_FACTOR` times
that floor. Sitting at its floor is the route; leaving it (a rise, periodic spikes) is the bug.
A series that starts above the tolerance keeps the tolerance: it is off zero from step one.
For a ratio healthy at 1.0 (the kind's `healthy_level`) the floor is measured from 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

FLOOR_POINTS = 20
FLOOR_FACTOR = 3.0


class HealthyCeiling:
    """Per point: the level above which the signal has left ≈0."""

    def __init__(self, tolerance: float, healthy: float = 0.0) -> None:
        self.tolerance = tolerance
        self.healthy = healthy
        self.floor: float | None = None

    def update(self, values: np.ndarray, new_from: int, first_index: int) -> np.ndarray:
        """The ceiling for each new point (series-wide index `first_index + position`)."""
        if self.floor is None and first_index == 0 and len(values) >= FLOOR_POINTS:
            self.floor = float(np.median(values[:FLOOR_POINTS]))
        index = first_index + np.arange(new_from, len(values))
        return np.where(index >= FLOOR_POINTS, self.ceiling, self.tolerance)

    @property
    def ceiling(self) -> float:
        """The ceiling once the floor is known (the tolerance before)."""
        if self.floor is None or self.floor >= self.tolerance:
            return self.tolerance
        return max(self.tolerance, self.healthy + FLOOR_FACTOR * (self.floor - self.healthy))

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {"floor": self.floor}

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.floor = state["floor"]
