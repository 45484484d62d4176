"""Where a run and an event stand: the one list of run statuses and event statuses."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Status:
    """A status, how it is shown (`badge`: the dashboard's named colour) and what it means."""

    name: str
    label: str
    badge: str
    description: str
    ending: str = ""  # how a run's post-mortem summary says it ended ("and finished")


RUN_STATUSES: tuple[Status, ...] = (
    Status("running", "running", "blue", "logging now (points or heartbeats arrive)", "and is still running"),
    Status("finished", "finished", "gray", "the client finished it", "and finished"),
    Status("crashed", "crashed", "red", "the client saw an exception, or said so", "and crashed"),
    Status("stalled", "stalled", "orange", "nothing heard for longer than HOLTER_STALL_AFTER", "and went silent"),
)
RUN_STATUS_NAMES: tuple[str, ...] = tuple(s.name for s in RUN_STATUSES)
# The status of a run that is logging now (shown live).
LIVE_RUN_STATUS = "running"
# The status of a run that ran to its end (a seed sibling only counts with it: a crashed or
# running one does not show where its config ends).
FINISHED_RUN_STATUS = "finished"
# What a client may end a run with.
ENDING_STATUSES: tuple[str, ...] = ("finished", "crashed")

EVENT_STATUSES: tuple[Status, ...] = (
    Status("open", "open", "red", "found and not yet handled"),
    Status("acknowledged", "acknowledged", "teal", "someone is on it"),
    Status("dismissed", "dismissed", "gray", "someone judged it not a problem"),
    Status("muted", "muted", "gray", "found while its kind is muted on its metric"),
    Status("withdrawn", "withdrawn", "gray", "later evidence explained it better (kept, hidden by default)"),
)
EVENT_STATUS_NAMES: tuple[str, ...] = tuple(s.name for s in EVENT_STATUSES)
# Decided by a person: drawn quiet, never re-opened by the detector.
HANDLED_EVENT_STATUSES: tuple[str, ...] = ("acknowledged", "dismissed", "muted")
# Left out of what a person reads (the post-mortem's summary and timeline).
HIDDEN_EVENT_STATUSES: tuple[str, ...] = ("withdrawn", "dismissed")
