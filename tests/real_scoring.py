"""Holter's classifier read over the real corpus (tests/real_curves.py), and what counts as
finding a label: shared by the detector tests (tests/unit/server/detect/test_real_corpus.py) and
the classifier benchmark (bench/classifier/run.py), so both score the same way.

A run is read as `holter analyze` reads a whole run file: every vital-sign series by its own
detector, then the run-level findings over all of them (train vs eval loss, a loss stuck at 0
beside its gradient norm). A series' events are its own plus the findings that name it.

Two readings: `read_corpus()` gives each series the kind its label says (the classifier scored on
its own), and `read_corpus(by_name=True)` reads the kind as `holter import` / `holter analyze`
do, from the vocabulary's understanding of the logged name among the run's other names
(`understand_all`), analysing only the kinds a detector reads; the run-level findings then see
every series with the kind it was read as (`commands.analyze.run_findings`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from holter_server.commands.analyze import run_findings
from holter_server.detect import IncrementalDetector
from holter_server.detect.classify import Detector, new_detector
from holter_server.detect.events import Event
from holter_server.detect.findings import SeriesSnapshot, cross_signal_findings
from holter_server.importers import Series
from holter_server.vocabulary.names import understand_all
from holter_server.vocabulary.signals import signal

from tests.real_curves import LABEL_KINDS, Label, RealSeries, load_corpus, runs

# Event kinds that count as finding each label: the classifier's own kind, and the run-level
# finding that names the same thing (an eval loss turning up while train falls is `overfitting`).
FOUND_AS: dict[str, frozenset[str]] = {
    label: frozenset({kind} | ({"overfitting"} if label == "divergence_overfitting" else set()))
    for label, kind in LABEL_KINDS.items()
    if kind is not None
}
PERIOD_TOLERANCE = 0.05
# Series the name path (`read_corpus(by_name=True)`) reads otherwise than their label, on purpose:
# the kind the vocabulary reads, and why. Anything else is read as its labelled kind (see
# tests/unit/server/vocabulary/test_real_corpus_names.py).
READ_OTHERWISE: dict[str, str] = {
    # a derived series: the corpus took per-step milliseconds as the differences of modded-nanogpt's
    # cumulative `train_time` (train_gpt.py: `train_time:{training_time_ms:.0f}ms`), a clock that no
    # reader should take for a step time (the vocabulary reads it as a clock beside `step_avg`, which
    # this run's series leave out); the name does not say what the file holds, so the name path
    # cannot find its shard-load period and counts it as a miss
    "mng124m_valueembed_step_time_ms.csv": "unknown",
}
# an event this many logging intervals outside a label's window still matches it
STEP_SLACK_INTERVALS = 2


@dataclass(frozen=True)
class SeriesReading:
    """One real series with what Holter said about it (None: a kind Holter does not read)."""

    series: RealSeries
    events: tuple[Event, ...] | None

    @property
    def alarms(self) -> list[Event]:
        """The events that would page someone (warning or critical)."""
        return [e for e in self.events or () if e.severity != "info"]


def read_run(members: tuple[RealSeries, ...]) -> list[SeriesReading]:
    """Classify every series of one run and read them together."""
    detectors: dict[str, IncrementalDetector] = {}
    snapshots: list[SeriesSnapshot] = []
    for series in members:
        steps, values = series.arrays()
        if series.kind == "other":
            finite = values[np.isfinite(values)]
            snapshots.append(
                SeriesSnapshot(
                    series.metric_name, float(finite[-1]) if len(finite) else None, int(steps[0]), int(steps[-1])
                )
            )
            continue
        detector = IncrementalDetector(series.metric_name, kind=series.kind)
        detector.add(steps, values)
        detectors[series.file] = detector
        snapshots.append(detector.snapshot())
    findings = cross_signal_findings([e for d in detectors.values() for e in d.events], snapshots)
    readings = []
    for series in members:
        detector = detectors.get(series.file)
        if detector is None:
            readings.append(SeriesReading(series, None))
            continue
        own = [f for f in findings if f.metric == series.metric_name]
        readings.append(SeriesReading(series, tuple(detector.events + own)))
    return readings


def read_run_by_name(members: tuple[RealSeries, ...]) -> list[SeriesReading]:
    """Classify one run as `holter analyze` would a file holding its series under their logged
    names: each kind is what the vocabulary understands the name to be among the run's names;
    a series of a kind no detector reads (schedules, system counters) gets no events."""
    understood = understand_all([s.metric_name for s in members])
    series: dict[str, Series] = {}
    detectors: dict[str, Detector] = {}
    for member in members:
        steps, values = member.arrays()
        series[member.metric_name] = Series(member.metric_name, steps, values)
        kind = understood[member.metric_name].kind
        if signal(kind).analysed:
            detector = new_detector(member.metric_name, kind=kind)
            detector.add(steps, values)
            detectors[member.metric_name] = detector
    findings = run_findings(series, detectors, understood)
    readings = []
    for member in members:
        detector = detectors.get(member.metric_name)
        own = [f for f in findings if f.metric == member.metric_name]
        readings.append(SeriesReading(member, None if detector is None else tuple(detector.events + own)))
    return readings


def read_corpus(*, by_name: bool = False) -> list[SeriesReading]:
    """Every series of the corpus, read run by run, in the corpus' file order: with its labelled
    kind, or (`by_name`) with the kind its logged name is understood as."""
    reader = read_run_by_name if by_name else read_run
    by_file = {r.series.file: r for members in runs().values() for r in reader(members)}
    return [by_file[s.file] for s in load_corpus()]


def events_to_find(series: RealSeries) -> list[Label]:
    """The labels of a series that name something the classifier should report."""
    return [label for label in series.labels if label.kind in FOUND_AS]


def in_the_data(series: RealSeries, label: Label) -> bool:
    """False for the labels the logged values cannot show (marked `in_data: false` in the corpus,
    with the reason: CPM-Bee's intra-day NaNs in series of end-of-day values)."""
    return label.in_data


def match(reading: SeriesReading, label: Label) -> Event | None:
    """The event that finds `label` (the right kind, overlapping its window give or take two
    logging intervals; for a periodic label, a period within 5%), or None."""
    return match_events(reading.series, label, reading.events or ())


def match_events(series: RealSeries, label: Label, events: tuple[Event, ...] | list[Event]) -> Event | None:
    """`match` over any events said about `series` (a peer's, mapped onto Holter's kinds)."""
    steps, _ = series.arrays()
    interval = float(np.median(np.diff(steps))) if len(steps) > 1 else 1.0
    slack = STEP_SLACK_INTERVALS * interval
    for event in events:
        if event.kind not in FOUND_AS[label.kind]:
            continue
        if event.end_step < label.start_step - slack or event.start_step > label.end_step + slack:
            continue
        if label.period is not None and (
            event.period is None or abs(event.period - label.period) > PERIOD_TOLERANCE * label.period
        ):
            continue
        return event
    return None
