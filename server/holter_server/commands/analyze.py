"""`holter analyze PATH`: name what is wrong with the curves in a file, offline.

Each series is read as the kind it is declared (`--kind NAME=KIND`) or recognised as; a name
Holter does not recognise is watched only for NaN/±Inf and extreme outliers, at info level, and
schedules (learning rate, epoch) are not analysed. Then the run's series are read together (the
run-level findings: a train loss against its eval loss, a loss stuck at exactly 0 beside a zero
gradient norm, a gradient-norm spike ahead of a loss spike), as the live service does.

The report leads with the problems, one incident each (the events that share a cause grouped
under their root: `analysis.incidents`, as the run page and chat show them), then each series'
events. Exit status: 0 when no incident needs attention (info-only ones, such as recovered
one-step spikes, included), 1 when one does, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from holter_server.analysis.incidents import Incident, group_incidents
from holter_server.commands.kinds import parse_kind_options
from holter_server.detect import is_alarm, verdict
from holter_server.detect.classify import Detector, new_detector
from holter_server.detect.events import Event, format_step
from holter_server.detect.findings import SeriesSnapshot, cross_signal_findings
from holter_server.importers import ImportFormatError, Series, read_series
from holter_server.vocabulary import severities
from holter_server.vocabulary.names import Understanding, understand_all
from holter_server.vocabulary.signals import signal

EXIT_HEALTHY = 0
EXIT_FOUND = 1
EXIT_BAD_INPUT = 2


def run(args: argparse.Namespace) -> int:
    """Analyse every series in `args.path` that a detector reads (or the `--metric` ones) and print a report."""
    try:
        declarations = parse_kind_options(args.kind)
    except ValueError as exc:
        return _bad_input(str(exc))
    try:
        series = read_series(args.path)
    except (ImportFormatError, OSError, UnicodeDecodeError) as exc:
        return _bad_input(str(exc) if isinstance(exc, ImportFormatError) else f"{args.path}: {exc}")
    understood = understand_all(list(series), declarations=declarations)
    try:
        selected = _select(series, understood, args.metric)
    except ImportFormatError as exc:
        return _bad_input(str(exc))
    detectors = {s.metric: _detect(s, understood[s.metric], expected_floor=args.expected_floor) for s in selected}
    reports = [_report(s, understood[s.metric], detectors[s.metric]) for s in selected]
    findings = run_findings(series, detectors, understood)
    events = [e for d in detectors.values() for e in d.events] + findings
    incidents = group_incidents(events, {name: u.kind for name, u in understood.items()})
    told = [_incident(i, events) for i in incidents]
    if args.format == "json":
        print(json.dumps({"incidents": told, "series": reports, "findings": [f.to_dict() for f in findings]}, indent=2))
    else:
        print(_text_report(str(args.path), told, reports, findings))
    alarm = any(is_alarm(severities.verdict_of([i["severity"]])) for i in told)
    return EXIT_FOUND if alarm else EXIT_HEALTHY


def _incident(incident: Incident, events: list[Event]) -> dict[str, Any]:
    lead = events[incident.leader]
    return {
        "severity": incident.severity,
        "title": incident.title,
        "cause": incident.cause,
        "start_step": incident.start_step,
        "end_step": incident.end_step,
        "metric": lead.metric,
        "kind": lead.kind,
        "folded": [{"kind": events[i].kind, "metric": events[i].metric} for i in incident.folded],
    }


def run_findings(
    series: dict[str, Series], detectors: dict[str, Detector], understood: dict[str, Understanding] | None = None
) -> list[Event]:
    """The run-level findings over every series of the file (those not analysed still tell,
    say, that a gradient norm is logged), each read as the kind it is understood as."""
    kinds = {name: u.kind for name, u in (understood or {}).items()}
    events = [e for d in detectors.values() for e in d.events]
    snapshots = [
        detectors[name].snapshot()
        if name in detectors
        else SeriesSnapshot(
            name,
            float(s.values[-1]) if len(s) else None,
            int(s.steps[0]) if len(s) else None,
            int(s.steps[-1]) if len(s) else None,
            kind=kinds.get(name),
        )
        for name, s in series.items()
    ]
    return cross_signal_findings(events, snapshots, kinds)


def _select(series: dict[str, Series], understood: dict[str, Understanding], wanted: list[str] | None) -> list[Series]:
    if wanted:
        missing = [m for m in wanted if m not in series]
        if missing:
            raise ImportFormatError(
                f"no metric named {', '.join(repr(m) for m in missing)}; the file has: {', '.join(series)}"
            )
        return [series[m] for m in wanted]
    chosen = [s for name, s in series.items() if signal(understood[name].kind).analysed]
    if not chosen:
        raise ImportFormatError(
            f"nothing to analyse: only schedules and counters (found: {', '.join(series)}); name one with --metric"
        )
    return chosen


def _detect(series: Series, understood: Understanding, *, expected_floor: float | None) -> Detector:
    detector = new_detector(series.metric, kind=understood.kind, expected_floor=expected_floor)
    detector.add(series.steps, series.values)
    return detector


def _report(series: Series, understood: Understanding, detector: Detector) -> dict[str, Any]:
    events = detector.events
    return {
        "metric": series.metric,
        "kind": understood.kind,
        "understood": understood.to_dict(),
        "verdict": verdict(events),
        "points": len(series),
        "events": [e.to_dict() for e in events],
    }


def how_understood(kind: str, understood: dict[str, Any]) -> str:
    """'loss', 'logprob_mismatch as verl logs it', 'loss, declared as train/*', 'unknown: ...'."""
    if understood["source"] == "declared":
        return f"{kind}, declared as {understood['rule']}"
    if understood["source"] == "recognised":
        return kind if understood["framework"] == "generic" else f"{kind} as {understood['framework']} logs it"
    return "unknown: watched only for NaN/±Inf and extreme outliers"


def _text_report(
    path: str, incidents: list[dict[str, Any]], reports: list[dict[str, Any]], findings: list[Event]
) -> str:
    problems = [i for i in incidents if is_alarm(severities.verdict_of([i["severity"]]))]
    notes = len(incidents) - len(problems)
    lines = [f"{path}: {len(reports)} series, {len(problems)} problem{'' if len(problems) == 1 else 's'}"]
    for incident in problems:
        span = f"step {format_step(incident['start_step'])}" if incident["start_step"] is not None else "the run"
        if incident["end_step"] not in (None, incident["start_step"]):
            span = f"steps {format_step(incident['start_step'])}–{format_step(incident['end_step'])}"
        folded = f" (+ {len(incident['folded'])} events folded)" if incident["folded"] else ""
        lines.append(f"  [{incident['severity']}] {incident['title']} — {span}{folded}: {incident['cause']}")
    if notes:
        lines.append(f"  and {notes} note{'' if notes == 1 else 's'} (info: a dip that recovered, and the like)")
    lines.append("")
    lines.append("by series:")
    for report in reports:
        lines.append("")
        lines.append(
            f"{report['metric']} ({how_understood(report['kind'], report['understood'])}, {report['points']:,} "
            f"points): {report['verdict']}"
        )
        if not report["events"]:
            lines.append("  nothing to report")
        for event in report["events"]:
            span = f"step {format_step(event['start_step'])}"
            if event["end_step"] != event["start_step"]:
                span = f"steps {format_step(event['start_step'])}–{format_step(event['end_step'])}"
            lines.append(f"  [{event['severity']}] {event['kind']} at {span}: {event['summary']}")
    if findings:
        lines.append("")
        lines.append(f"the run, its series read together: {verdict(findings)}")
        for finding in findings:
            span = f"step {format_step(finding.start_step)}"
            if finding.end_step != finding.start_step:
                span = f"steps {format_step(finding.start_step)}–{format_step(finding.end_step)}"
            lines.append(f"  [{finding.severity}] {finding.kind} at {span}: {finding.summary}")
    return "\n".join(lines)


def _bad_input(message: str) -> int:
    print(f"holter analyze: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
