"""The one answer to "what kind is this metric": its run's declaration first, else its name.

Services compute a run's `MetricKinds` once (`services/kinds.run_metric_kinds`, from the store's
names and declarations) and pass it down to the pure rules (`detect/findings`,
`analysis/incidents`, `postmortem/summary`); a metric the mapping does not hold (an event's metric
stored before the names were read) is still read with the run's declarations, never by its name
alone, so a declared kind wins everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from holter_server.vocabulary.names import declared_kind, recognise


def kind_of(metric: str, declarations: Mapping[str, Any] | None = None) -> str:
    """The kind `metric` is declared as in `declarations` (a run's `metric_definitions`), else
    the kind its name is recognised as ("unknown" when neither says)."""
    declared = declared_kind(metric, declarations)
    return declared[0] if declared is not None else recognise(metric).kind


class MetricKinds(Mapping[str, str]):
    """What each metric of one run is, by name: the kinds read once for the run's metrics
    (`known`, declared or recognised with the run's other names as context), and for any other
    name `kind_of` it with the run's `declarations`. Looking a name up never raises."""

    def __init__(self, known: Mapping[str, str] | None = None, declarations: Mapping[str, Any] | None = None):
        self._known = dict(known or {})
        self._declarations = dict(declarations or {})

    @classmethod
    def of(cls, kinds: Mapping[str, str] | None) -> MetricKinds:
        """`kinds` itself when it is a `MetricKinds`, else one that falls back to the name rule."""
        return kinds if isinstance(kinds, MetricKinds) else cls(kinds)

    def __getitem__(self, metric: str) -> str:
        known = self._known.get(metric)
        if known:
            return known
        return kind_of(metric, self._declarations)

    def __contains__(self, metric: object) -> bool:
        return isinstance(metric, str)

    def __iter__(self) -> Iterator[str]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)

    def __repr__(self) -> str:
        return f"MetricKinds({self._known!r}, declarations={self._declarations!r})"
