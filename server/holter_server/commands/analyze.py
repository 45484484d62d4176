"""`holter analyze PATH`: name what is wrong with the curves in a file, offline.

Exit status: 0 when every series is healthy (info-only findings such as recovered one-step
spikes included), 1 when something needs attention, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from holter_server.detect import KINDS, classify_series, is_alarm, is_vital_sign, profile_for, verdict
from holter_server.detect.events import format_step
from holter_server.importers import ImportFormatError, Series, read_series

EXIT_HEALTHY = 0
EXIT_FOUND = 1
EXIT_BAD_INPUT = 2


def run(args: argparse.Namespace) -> int:
    """Analyse every vital-sign series in `args.path` (or the `--metric` ones) and print a report."""
    if args.kind is not None and args.kind not in KINDS:
        return _bad_input(f"unknown --kind {args.kind!r}; expected one of: {', '.join(KINDS)}")
    try:
        series = read_series(args.path)
    except (ImportFormatError, OSError, UnicodeDecodeError) as exc:
        return _bad_input(str(exc) if isinstance(exc, ImportFormatError) else f"{args.path}: {exc}")
    try:
        selected = _select(series, args.metric)
    except ImportFormatError as exc:
        return _bad_input(str(exc))
    reports = [_analyze(s, kind=args.kind, expected_floor=args.expected_floor) for s in selected]
    if args.format == "json":
        print(json.dumps({"series": reports}, indent=2))
    else:
        print(_text_report(str(args.path), reports))
    return EXIT_FOUND if any(is_alarm(r["verdict"]) for r in reports) else EXIT_HEALTHY


def _select(series: dict[str, Series], wanted: list[str] | None) -> list[Series]:
    if wanted:
        missing = [m for m in wanted if m not in series]
        if missing:
            raise ImportFormatError(
                f"no metric named {', '.join(repr(m) for m in missing)}; the file has: {', '.join(series)}"
            )
        return [series[m] for m in wanted]
    chosen = [s for name, s in series.items() if is_vital_sign(name)]
    if not chosen:
        raise ImportFormatError(f"no vital-sign metric to analyse (found only: {', '.join(series)}); name one with --metric")
    return chosen


def _analyze(series: Series, *, kind: str | None, expected_floor: float | None) -> dict[str, Any]:
    events = classify_series(series.steps, series.values, metric=series.metric, kind=kind, expected_floor=expected_floor)
    return {
        "metric": series.metric,
        "kind": profile_for(series.metric, kind).name,
        "verdict": verdict(events),
        "points": len(series),
        "events": [e.to_dict() for e in events],
    }


def _text_report(path: str, reports: list[dict[str, Any]]) -> str:
    lines = [f"{path}: {len(reports)} series"]
    for report in reports:
        lines.append("")
        lines.append(f"{report['metric']} ({report['kind']}, {report['points']:,} points): {report['verdict']}")
        if not report["events"]:
            lines.append("  nothing to report")
        for event in report["events"]:
            span = f"step {format_step(event['start_step'])}"
            if event["end_step"] != event["start_step"]:
                span = f"steps {format_step(event['start_step'])}–{format_step(event['end_step'])}"
            lines.append(f"  [{event['severity']}] {event['kind']} at {span}: {event['summary']}")
    return "\n".join(lines)


def _bad_input(message: str) -> int:
    print(f"holter analyze: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
