"""Holter's vocabulary: the one home of signal kinds, event kinds, severities and statuses, and of
how a metric's name is understood. Pure data and functions; everything else derives from here
(schemas, the store's ordering, alert rules and messages, summaries and reports, the dashboard
through `GET /api/v1/vocabulary`).

* `signals` — what a metric can be (loss, grad_norm, ..., unknown), its panel and how it is watched;
* `profiles` — each kind's detector defaults;
* `names` and `frameworks/` — how a name is understood: declared, recognised, or unknown;
* `events` — what Holter can find; `severities` — how bad; `statuses` — where runs and events stand.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from holter_server.vocabulary import events, severities, signals, statuses
from holter_server.vocabulary.frameworks import FRAMEWORK_RULES, FRAMEWORK_SUFFIXES, FRAMEWORKS
from holter_server.vocabulary.names import SOURCES, Understanding, understand, understand_all

__all__ = ["Understanding", "as_dict", "understand", "understand_all"]


def _finite(value: Any) -> Any:
    # JSON has no infinity: an unbounded threshold reads as null ("never")
    return None if isinstance(value, float) and not math.isfinite(value) else value


def as_dict() -> dict[str, Any]:
    """The whole vocabulary as JSON-ready data (what `GET /api/v1/vocabulary` serves)."""
    return {
        "severities": [{**asdict(s), "color_int": s.color_int} for s in severities.SEVERITIES],
        "healthy": {"name": severities.HEALTHY, "color": severities.HEALTHY_COLOR, "badge": severities.HEALTHY_BADGE},
        "default_min_severity": severities.DEFAULT_MIN_SEVERITY,
        "verdicts": list(severities.VERDICTS),
        "run_statuses": [asdict(s) for s in statuses.RUN_STATUSES],
        "live_run_status": statuses.LIVE_RUN_STATUS,
        "event_statuses": [asdict(s) for s in statuses.EVENT_STATUSES],
        "handled_event_statuses": list(statuses.HANDLED_EVENT_STATUSES),
        "open_event_status": statuses.EventStatus.OPEN,
        "hidden_event_statuses": list(statuses.HIDDEN_EVENT_STATUSES),
        "event_groups": events.GROUPS,
        "event_kinds": [asdict(k) for k in events.EVENT_KINDS],
        "panels": [asdict(p) for p in signals.PANELS],
        "reference_kinds": list(signals.REFERENCE_KINDS),
        "signal_kinds": [
            {
                **asdict(k),
                "analysed": k.analysed,
                "system": k.system,
                "profile": {name: _finite(value) for name, value in asdict(k.profile).items()},
            }
            for k in signals.SIGNAL_KINDS
        ],
        "understood_by": SOURCES,
        "ablation_verdicts": [asdict(v) for v in events.ABLATION_VERDICTS],
        "frameworks": [
            {
                "name": name,
                "rules": [
                    {
                        "pattern": r.pattern,
                        "kind": r.kind,
                        "note": r.note,
                        "marker": r.marker,
                        "tolerance": r.tolerance,
                        "unit": r.unit,
                        "compute_only": r.compute_only,
                    }
                    for r in FRAMEWORK_RULES
                    if r.framework == name
                ],
                "suffixes": [{"pattern": s.pattern, "note": s.note} for s in FRAMEWORK_SUFFIXES if s.framework == name],
            }
            for name in FRAMEWORKS
        ],
    }
