"""API types drawn from the vocabulary: every Literal of signal kinds, units and statuses the
schemas use is built here from `holter_server.vocabulary`, never spelled out again. Severities,
event kinds and statuses are the vocabulary's own `StrEnum`s (`Level`, `EventKind`, `RunStatus`,
`EventStatus`), which the schemas use as they are."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from holter_server.vocabulary.names import SOURCES, UNITS
from holter_server.vocabulary.signals import SIGNAL_KIND_NAMES
from holter_server.vocabulary.statuses import ENDING_STATUSES

KindName = Literal[SIGNAL_KIND_NAMES]  # type: ignore[valid-type]
# a subset of RunStatus: a Literal of the names, so a refusal lists them as words
EndingStatusName = Literal[ENDING_STATUSES]  # type: ignore[valid-type]
UnderstoodBy = Literal[tuple(SOURCES)]  # type: ignore[valid-type]
UnitName = Literal[UNITS]  # type: ignore[valid-type]
MAX_METRIC_NAME_LENGTH = 256
# Any printable text is a metric name (`mfu(%)`, `lm loss`, `train/loss@step#`): only control
# characters (C0, DEL, C1) and the line/paragraph separators are refused (lone surrogates too,
# by `schemas.points.metric_name_problem`; the pattern's regex engine cannot name them).
_PRINTABLE = "^[^\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029]+$"
MetricName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_METRIC_NAME_LENGTH,
        pattern=_PRINTABLE,
        description="any printable text of 1 to 256 characters; control characters are refused",
    ),
]
# A metric name, or a glob over names (`eval/*`): what a kind may be declared for.
MetricPattern = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_METRIC_NAME_LENGTH,
        pattern=_PRINTABLE,
        description="a metric name, or a glob over names (`eval/*`, `*loss*`)",
    ),
]
