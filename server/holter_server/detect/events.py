"""What the classifier reports: one `Event` per named anomaly on a metric series.

`Event` is the one shape of an event from the detector to chat: the store keeps it
(`store.events.upsert_event`, `event_of`) and an alert carries it (`alerts.message.Alert`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Event:
    """A named anomaly on one metric series, with the evidence a person needs to trust it; or,
    without a metric, an event of the whole run (stalled, crashed, the job's own alert, a
    finding no metric could be named for), whose steps may be unknown.

    `event_id` is stable while an event grows (its end moves, its peak rises): the live service
    stores events by it and updates them in place rather than adding duplicates.
    """

    kind: str
    metric: str | None  # None (or "" from a rule that found no metric to name): the whole run
    start_step: int | None  # None only for an event of the whole run at no known step
    end_step: int | None
    severity: str
    score: float
    summary: str
    peak_step: int | None = None
    period: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def event_id(self) -> str:
        """Identity that survives updates: the metric, the kind and where it began."""
        return f"{self.metric}:{self.kind}@{self.start_step}"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (the shape `holter analyze --format json` prints)."""
        # by hand rather than dataclasses.asdict: the live detector snapshots its events after
        # every batch, and asdict's deep copy was a fifth of the cost of a small batch
        return {
            "kind": self.kind,
            "metric": self.metric,
            "start_step": self.start_step,
            "end_step": self.end_step,
            "severity": self.severity,
            "score": self.score,
            "summary": self.summary,
            "peak_step": self.peak_step,
            "period": self.period,
            "details": _copied(self.details),
            "event_id": self.event_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        """Rebuild an event from `to_dict()` output."""
        fields = {k: v for k, v in data.items() if k != "event_id"}
        return cls(**fields)


def _copied(value: Any) -> Any:
    """A copy of JSON-like data (dicts and lists copied, everything else shared)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


def format_step(step: int) -> str:
    """Steps are printed with thousands separators: 'step 1,204'."""
    return f"{int(step):,}"


def format_value(value: float) -> str:
    """Values are printed with four significant digits: enough to read, few enough to scan."""
    if value != value:  # NaN
        return "NaN"
    if 1e4 <= abs(value) < 1e9:
        return f"{value:,.0f}"  # throughput reads better as 51,840 than as 5.184e+04
    if abs(value) >= 1e9 or (value != 0 and abs(value) < 1e-3):
        return f"{value:.3g}"
    return f"{value:.4g}"


def format_z(z: float, cap: float = 1000.0) -> str:
    """A size in robust σ; at the cap, where the noise measured was only a floor, 'over N'."""
    if z >= cap:
        return f"over {cap:,.0f} robust σ"
    return f"{z:.1f} robust σ"
