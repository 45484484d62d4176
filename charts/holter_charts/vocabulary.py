"""The service's vocabulary as the dashboard reads it (`GET /api/v1/vocabulary`): severities with
their colours, statuses, event-kind labels, signal kinds and the panels they share.

The dashboard keeps no list of its own: every colour, label, order and kind list on a page comes
from here, so a service that adds a kind or recolours a severity changes the dashboard with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NEUTRAL = "gray"  # a badge for a name the vocabulary does not know (an older or newer service)
# The names the vocabulary gives a distributed job's ranks: the signal kind of a rank's series and
# timings, and the group of the events about ranks (as it names the kind `system` of a machine reading).
RANK_KIND = "rank"
RANKS_GROUP = "ranks"


@dataclass(frozen=True)
class Vocabulary:
    """What the service's vocabulary says, shaped for drawing."""

    data: Mapping[str, Any]

    @classmethod
    def from_api(cls, payload: Mapping[str, Any]) -> Vocabulary:
        return cls(payload)

    # -- severities
    @property
    def severities(self) -> list[dict[str, Any]]:
        """Lowest first."""
        return sorted(self.data.get("severities") or [], key=lambda s: s["rank"])

    def _severity(self, name: str | None) -> dict[str, Any] | None:
        return next((s for s in self.severities if s["name"] == name), None)

    @property
    def severity_names(self) -> list[str]:
        return [s["name"] for s in self.severities]

    @property
    def worst_color(self) -> str:
        """The colour of the worst severity (NaN/±Inf marks, the worst layer)."""
        return str(self.severities[-1]["color"])

    def color(self, severity: str | None) -> str:
        """A severity's colour; an unknown one gets the lowest's."""
        return str((self._severity(severity) or self.severities[0])["color"])

    def severity_badge(self, severity: str | None) -> str:
        found = self._severity(severity)
        return found["badge"] if found else NEUTRAL

    def severity_rank(self, severity: str | None) -> int:
        """Higher is worse; unknown names rank below every known one."""
        found = self._severity(severity)
        return found["rank"] if found else -1

    @property
    def default_min_severity(self) -> str:
        return str(
            self.data.get("default_min_severity") or (self.severity_names[1] if len(self.severity_names) > 1 else "")
        )

    # -- health: "healthy" or the worst open event's severity
    @property
    def healthy(self) -> str:
        return str((self.data.get("healthy") or {}).get("name") or "healthy")

    def health_badge(self, health: str | None) -> str:
        if health == self.healthy:
            return str((self.data.get("healthy") or {}).get("badge") or NEUTRAL)
        return self.severity_badge(health)

    def health_rank(self, health: str | None) -> int:
        """Worst first when sorted ascending: critical, warning, info, healthy, unknown."""
        if health == self.healthy:
            return len(self.severities)
        found = self._severity(health)
        return len(self.severities) - 1 - found["rank"] if found else len(self.severities) + 1

    def is_loudest(self, health: str | None) -> bool:
        return bool(self.severities) and health == self.severities[-1]["name"]

    # -- statuses
    def run_status_badge(self, status: str | None) -> str:
        found = next((s for s in self.data.get("run_statuses") or [] if s["name"] == status), None)
        return found["badge"] if found else NEUTRAL

    @property
    def run_status_names(self) -> list[str]:
        return [s["name"] for s in self.data.get("run_statuses") or []]

    def is_live(self, status: str | None) -> bool:
        """Whether a run with this status is logging now."""
        return status == self.data.get("live_run_status")

    @property
    def handled_statuses(self) -> tuple[str, ...]:
        """Event statuses a person decided (drawn quiet)."""
        return tuple(self.data.get("handled_event_statuses") or ())

    def is_open(self, status: str | None) -> bool:
        """Whether an event with this status is found and not yet handled."""
        return bool(status) and status == self.open_event_status

    def is_hidden(self, status: str | None) -> bool:
        """Whether an event with this status is left out of what a person reads (dismissed,
        withdrawn): not drawn on charts, greyed in lists."""
        return status in (self.data.get("hidden_event_statuses") or ())

    @property
    def open_event_status(self) -> str:
        return str(self.data.get("open_event_status") or "")

    def event_status_rank(self, status: str | None) -> int:
        """Open first, then in the vocabulary's order."""
        names = [s["name"] for s in self.data.get("event_statuses") or []]
        return names.index(status) if status in names else len(names)

    # -- event kinds
    @property
    def event_kinds(self) -> list[dict[str, Any]]:
        return list(self.data.get("event_kinds") or [])

    def event_kind_label(self, kind: str | None) -> str:
        found = next((k for k in self.event_kinds if k["name"] == kind), None)
        return found["label"] if found else str(kind or "event").replace("_", " ")

    def event_group(self, kind: str | None) -> str | None:
        """The group of an event kind (who finds it: `metric`, `lifecycle`, `ranks`, ...)."""
        found = next((k for k in self.event_kinds if k["name"] == kind), None)
        return found.get("group") if found else None

    def is_rank_event(self, kind: str | None) -> bool:
        """Whether an event of this kind is about the ranks of a distributed job (a straggler, a
        hung or lost rank, a rank out of its peers' band): its `details.ranks` name the ranks, and
        the run page links it to them in its Ranks section. The vocabulary groups these kinds `ranks`."""
        return self.event_group(kind) == RANKS_GROUP

    # -- signal kinds and panels
    @property
    def signal_kinds(self) -> list[dict[str, Any]]:
        return list(self.data.get("signal_kinds") or [])

    def signal_label(self, kind: str | None) -> str:
        found = next((k for k in self.signal_kinds if k["name"] == kind), None)
        return found["label"] if found else str(kind or "")

    def is_system_kind(self, kind: str | None) -> bool:
        """Whether a metric of this kind is a system vital (the machine, not the model): drawn in
        the run page's System section. The vocabulary marks the GPU vitals' kinds `system`, and
        names the kind of every other machine reading `system`."""
        found = next((k for k in self.signal_kinds if k["name"] == kind), None)
        return found is not None and (bool(found.get("system")) or found["name"] == "system")

    def is_rank_kind(self, kind: str | None) -> bool:
        """Whether a metric of this kind is one rank's copy of a metric or a rank's timings (rank
        0's `holter/dist/...` among the run's own metrics): read across the job's ranks in the run
        page's Ranks section, never a chart of its own. The vocabulary names that kind `rank`."""
        found = next((k for k in self.signal_kinds if k["name"] == kind), None)
        return found is not None and found["name"] == RANK_KIND

    def signal_description(self, kind: str | None) -> str:
        found = next((k for k in self.signal_kinds if k["name"] == kind), None)
        return found["description"] if found else ""

    @property
    def panels(self) -> list[dict[str, Any]]:
        """The shared charts, in drawing order."""
        return list(self.data.get("panels") or [])

    def panel_title(self, key: str) -> str:
        found = next((p for p in self.panels if p["key"] == key), None)
        return found["title"] if found else key

    def is_share_panel(self, key: str) -> bool:
        """Whether a panel's metrics are shares (MFU, the wait for data), drawn on a percentage axis."""
        found = next((p for p in self.panels if p["key"] == key), None)
        return bool(found and found.get("share"))

    def panel_order(self, key: str) -> int:
        keys = [p["key"] for p in self.panels]
        return keys.index(key) if key in keys else len(keys)

    def kind_order(self, kind: str | None) -> int:
        """Order of signal kinds as the vocabulary lists them (a train loss before an eval loss)."""
        names = [k["name"] for k in self.signal_kinds]
        return names.index(kind) if kind in names else len(names)

    # -- ablation verdicts (GET /compare)
    def _verdict(self, name: str | None) -> Mapping[str, Any] | None:
        return next((v for v in self.data.get("ablation_verdicts") or [] if v["name"] == name), None)

    def verdict_color(self, name: str | None) -> str:
        """The colour a verdict is drawn in (an unknown name: grey)."""
        found = self._verdict(name)
        return str(found["color"]) if found else "#868e96"

    def verdict_badge(self, name: str | None) -> str:
        found = self._verdict(name)
        return str(found["badge"]) if found else NEUTRAL

    def verdict_description(self, name: str | None) -> str:
        """What a verdict means, in a line."""
        found = self._verdict(name)
        return str(found["description"]) if found else ""

    def understood_text(self, understood: Mapping[str, Any] | None) -> str:
        """How the service knows what a metric is, in a few words."""
        if not understood:
            return ""
        source = understood.get("source")
        if source == "declared":
            return f"declared ({understood.get('rule')})"
        if source == "recognised":
            framework = understood.get("framework")
            return "recognised" + (f" ({framework})" if framework and framework != "generic" else "")
        return "unknown: watched for NaN/±Inf and outliers only"
