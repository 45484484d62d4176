"""How bad an event is: the one list of severities, with their rank, label and how each surface shows them.

Everything that orders, filters, colours or words a severity (the store's ordering, alert rules,
chat messages, the post-mortem, the dashboard) reads this table, so adding or recolouring one
is a change here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Level(StrEnum):
    """The severities by name, for code that names one (`Level.CRITICAL`); the table below says
    everything else about each. A `Level` is its name as a string, stored and sent as such."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True)
class Severity:
    """One severity level.

    `rank` orders them (higher is worse); `verdict` is what a series whose worst event has this
    severity is called (`holter analyze`); `alarm` says whether it pages someone. `color` is the
    hex colour every chart, report and chat embed uses; `badge` the dashboard's named colour;
    `emoji` leads a chat title; `card_color` is the Adaptive Card (Teams) text colour.
    """

    name: str
    rank: int
    label: str
    description: str
    verdict: str
    alarm: bool
    color: str
    badge: str
    emoji: str
    card_color: str

    @property
    def color_int(self) -> int:
        """The colour as an integer (Discord embeds)."""
        return int(self.color.lstrip("#"), 16)

    def rgba(self, alpha: float) -> str:
        """The colour with transparency, for shaded spans."""
        value = self.color_int
        return f"rgba({value >> 16},{(value >> 8) & 0xFF},{value & 0xFF},{alpha})"


SEVERITIES: tuple[Severity, ...] = (
    Severity(
        Level.INFO,
        0,
        "info",
        "worth knowing; nobody is paged (a recovered one-step spike, an unknown metric's outlier)",
        verdict="notice",
        alarm=False,
        color="#2e90fa",
        badge="blue",
        emoji="🔵",
        card_color="Default",
    ),
    Severity(
        Level.WARNING,
        1,
        "warning",
        "needs a look: the run may be going wrong",
        verdict="warning",
        alarm=True,
        color="#f79009",
        badge="orange",
        emoji="🟠",
        card_color="Warning",
    ),
    Severity(
        Level.CRITICAL,
        2,
        "critical",
        "the run is broken or about to be (divergence, NaN, no learning signal)",
        verdict="critical",
        alarm=True,
        color="#d92d20",
        badge="red",
        emoji="🔴",
        card_color="Attention",
    ),
)

SEVERITY_NAMES: tuple[str, ...] = tuple(s.name for s in SEVERITIES)
assert tuple(Level) == SEVERITY_NAMES, "every Level has its row in SEVERITIES, in rank order"
BY_NAME: dict[str, Severity] = {s.name: s for s in SEVERITIES}
LOWEST = SEVERITIES[0]
WORST = SEVERITIES[-1]
# What a new alert rule asks for unless told otherwise: the lowest severity that pages someone.
DEFAULT_MIN_SEVERITY: str = next(s.name for s in SEVERITIES if s.alarm)
# A run with no open event.
HEALTHY = "healthy"
HEALTHY_COLOR = "#12b76a"
HEALTHY_BADGE = "teal"
# What `holter analyze` calls a series: healthy, or the verdict of its worst event.
VERDICTS: tuple[str, ...] = (HEALTHY, *(s.verdict for s in SEVERITIES))


def severity(name: str | None) -> Severity:
    """The severity called `name`; an unknown name counts as the lowest (never louder than asked)."""
    return BY_NAME.get(name or "", LOWEST)


def rank(name: str | None) -> int:
    """Order of a severity, higher is worse; unknown names rank lowest."""
    return severity(name).rank


def worst(names: Iterable[str | None]) -> str | None:
    """The worst of some severities, or None when there are none."""
    found = [n for n in names if n is not None]
    return max(found, key=rank) if found else None


def capped(name: str, cap: str | None) -> str:
    """`name`, lowered to `cap` when it is worse."""
    return cap if cap is not None and rank(name) > rank(cap) else name


def verdict_of(names: Iterable[str]) -> str:
    """'healthy' when there is nothing, else the verdict of the worst severity."""
    found = worst(names)
    return HEALTHY if found is None else BY_NAME[found].verdict


def is_alarm_verdict(verdict: str) -> bool:
    """Whether a verdict pages someone (and makes `holter analyze` exit 1)."""
    return any(s.alarm and s.verdict == verdict for s in SEVERITIES)


def verdict_rank(verdict: str) -> int:
    """Order of a verdict: healthy first, then by severity."""
    return VERDICTS.index(verdict) if verdict in VERDICTS else 0
