"""Where a run and an event stand: the one list of run statuses and event statuses."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class RunStatus(StrEnum):
    """Where a run stands, by name, for code that names one (`RunStatus.RUNNING`); `RUN_STATUSES`
    says how each is shown. A `RunStatus` is its name as a string, stored and sent as such."""

    RUNNING = "running"
    FINISHED = "finished"
    CRASHED = "crashed"
    STALLED = "stalled"


class EventStatus(StrEnum):
    """Where an event stands, by name (`EventStatus.OPEN`); `EVENT_STATUSES` says how each is shown."""

    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    DISMISSED = "dismissed"
    MUTED = "muted"
    WITHDRAWN = "withdrawn"


@dataclass(frozen=True)
class Status:
    """A status, how it is shown (`badge`: the dashboard's named colour) and what it means."""

    name: RunStatus | EventStatus
    label: str
    badge: str
    description: str
    ending: str = ""  # how a run's post-mortem summary says it ended ("and finished")


RUN_STATUSES: tuple[Status, ...] = (
    Status(RunStatus.RUNNING, "running", "blue", "logging now (points or heartbeats arrive)", "and is still running"),
    Status(RunStatus.FINISHED, "finished", "gray", "the client finished it", "and finished"),
    Status(RunStatus.CRASHED, "crashed", "red", "the client saw an exception, or said so", "and crashed"),
    Status(
        RunStatus.STALLED, "stalled", "orange", "nothing heard for longer than HOLTER_STALL_AFTER", "and went silent"
    ),
)
RUN_STATUS_NAMES: tuple[str, ...] = tuple(s.name.value for s in RUN_STATUSES)
# The status of a run that is logging now (shown live).
LIVE_RUN_STATUS = RunStatus.RUNNING
# What a client may end a run with.
ENDING_STATUSES: tuple[str, ...] = (RunStatus.FINISHED.value, RunStatus.CRASHED.value)

EVENT_STATUSES: tuple[Status, ...] = (
    Status(EventStatus.OPEN, "open", "red", "found and not yet handled"),
    Status(EventStatus.ACKNOWLEDGED, "acknowledged", "teal", "someone is on it"),
    Status(EventStatus.DISMISSED, "dismissed", "gray", "someone judged it not a problem"),
    Status(EventStatus.MUTED, "muted", "gray", "found while its kind is muted on its metric"),
    Status(EventStatus.WITHDRAWN, "withdrawn", "gray", "later evidence explained it better (kept, hidden by default)"),
)
EVENT_STATUS_NAMES: tuple[str, ...] = tuple(s.name.value for s in EVENT_STATUSES)
# Decided by a person: drawn quiet, never re-opened by the detector.
HANDLED_EVENT_STATUSES: tuple[EventStatus, ...] = (EventStatus.ACKNOWLEDGED, EventStatus.DISMISSED, EventStatus.MUTED)
# Left out of what a person reads (the post-mortem's summary and timeline).
HIDDEN_EVENT_STATUSES: tuple[EventStatus, ...] = (EventStatus.WITHDRAWN, EventStatus.DISMISSED)
