"""The vocabulary is one consistent table that everything else reads."""

from __future__ import annotations

import contextlib
import importlib
import json
import re
from pathlib import Path

import holter_server
import pytest
from holter_server import vocabulary
from holter_server.alerts.formatters import discord, teams
from holter_server.alerts.message import Alert
from holter_server.alerts.rules import DEFAULT_RULES
from holter_server.detect.events import Event
from holter_server.detect.findings import SeriesSnapshot, cross_signal_findings
from holter_server.detect.system_vitals import DETECTORS as SYSTEM_DETECTORS
from holter_server.schemas.alerts import RuleCreate
from holter_server.vocabulary import events, severities, signals, statuses
from holter_server.vocabulary.frameworks import FRAMEWORK_RULES
from holter_server.vocabulary.profiles import KINDS, SYSTEM_KINDS
from pydantic import ValidationError


def test_every_signal_kind_has_detector_defaults_and_every_profile_a_kind():
    assert set(signals.SIGNAL_KIND_NAMES) == set(KINDS) | set(SYSTEM_KINDS) and not set(KINDS) & set(SYSTEM_KINDS)
    assert all(KINDS[name].name == name for name in KINDS) and all(
        SYSTEM_KINDS[name].name == name for name in SYSTEM_KINDS
    )


def test_every_gpu_vital_kind_has_its_detector_and_raises_a_vocabulary_event_kind():
    assert set(SYSTEM_DETECTORS) == set(SYSTEM_KINDS)
    assert {k.event_kind for k in SYSTEM_KINDS.values()} <= set(events.kinds_in("system"))


def test_every_framework_rule_names_a_known_kind_and_every_panel_exists():
    assert {rule.kind for rule in FRAMEWORK_RULES} <= set(signals.SIGNAL_KIND_NAMES)
    assert {k.panel for k in signals.SIGNAL_KINDS if k.panel} <= set(signals.PANEL_KEYS)


def test_severities_are_ordered_and_the_default_rule_pages():
    assert [s.rank for s in severities.SEVERITIES] == list(range(len(severities.SEVERITIES)))
    assert severities.severity(severities.DEFAULT_MIN_SEVERITY).alarm
    assert (
        severities.worst(["info", "critical", "warning"]) == "critical"
        and severities.capped("critical", "info") == "info"
    )


def test_the_served_vocabulary_is_plain_json():
    served = vocabulary.as_dict()
    assert json.loads(json.dumps(served, allow_nan=False)) == json.loads(json.dumps(served))


def test_every_cross_signal_finding_is_a_vocabulary_event_kind():
    spikes = [
        Event("spike", "grad_norm", 10, 10, "warning", 9.0, "", details={"peak": 9.0}),
        Event("spike", "loss", 12, 14, "warning", 9.0, ""),
        Event("plateau", "grad_norm", 0, 40, "critical", 1.0, "", details={"cause": "zero"}),
        Event("sawtooth", "vllm_kl", 100, 200, "warning", 5.0, "", period=12.0),
    ]
    found = cross_signal_findings(spikes, [SeriesSnapshot("loss", 2.0, kind="loss")])
    assert found and {f.kind for f in found} <= set(events.kinds_in("finding"))


def test_chat_messages_take_their_colours_from_the_severities():
    event = Event(
        kind="divergence", metric="loss", start_step=1, end_step=1, severity="critical", score=1.0, summary="s"
    )
    alert = Alert(event=event, project="p", run_id="r", run_name="r", time="2026-01-01T00:00:00Z").linked(
        link="", image_url=None
    )
    assert discord([alert], "alert")["embeds"][0]["color"] == severities.severity("critical").color_int
    assert (
        teams([alert], "alert")["attachments"][0]["content"]["body"][1]["color"]
        == severities.severity("critical").card_color
    )


def _spelled_out(roots: list[Path]) -> list[str]:
    """Event kinds, statuses and severities written as string literals where code compares or sets one
    (`e.kind == "spike"`, `Event(kind="divergence")`, `row.status != "open"`,
    `event.get("status") == "dismissed"`, `status in ("finished", "crashed")`, `severity="info"`):
    each should name the vocabulary's enum (`EventKind.SPIKE`, `EventStatus.OPEN`, `Level.INFO`)
    or, in the dashboard, ask the served vocabulary, so a renamed kind or status cannot leave a
    comparison behind."""
    import ast

    names = {
        "kind": set(events.EVENT_KIND_NAMES),
        "status": set(statuses.RUN_STATUS_NAMES) | set(statuses.EVENT_STATUS_NAMES),
        "severity": {s.name for s in severities.SEVERITIES},
    }

    def field(node: ast.AST) -> str | None:
        """Which of kind/status an expression reads: `x.kind`, `kind`, `e.get("status")`, `e["kind"]`."""
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            name = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else ""
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            name = node.slice.value
        else:
            return None
        return next((f for f in names if isinstance(name, str) and name.endswith(f)), None)

    def literals(node: ast.AST) -> list[str]:
        if isinstance(node, ast.IfExp):  # status="muted" if muted else "open"
            return literals(node.body) + literals(node.orelse)
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]

    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "vocabulary" in path.parts:
                continue  # the home itself, and the dashboard's reader of the served vocabulary
            for node in ast.walk(ast.parse(path.read_text())):
                pairs: list[tuple[str | None, ast.AST]] = []
                if isinstance(node, ast.Compare):
                    sides = [node.left, *node.comparators]
                    pairs = [(field(a), b) for a in sides for b in sides if a is not b]
                elif isinstance(node, ast.keyword) and node.arg in names:
                    pairs = [(node.arg, node.value)]
                elif isinstance(node, ast.Assign):
                    pairs = [(field(target), node.value) for target in node.targets]
                for which, other in pairs:
                    spelled = [v for v in literals(other) if which and v in names[which]]
                    if spelled:
                        found.append(f"{path}:{other.lineno}: {which} {', '.join(spelled)}")
    return found


def _our_packages() -> list[Path]:
    roots = [Path(holter_server.__file__).parent]
    for package in ("holter_dashboard", "holter_charts"):
        with contextlib.suppress(ImportError):
            roots.append(Path(importlib.import_module(package).__file__).parent)
    return roots


def test_code_names_event_kinds_statuses_and_severities_through_the_vocabulary_never_as_literals():
    assert _spelled_out(_our_packages()) == []


def test_a_kind_status_or_severity_spelled_as_a_literal_would_be_found(tmp_path):
    (tmp_path / "spelled.py").write_text(
        'if e.kind == "spike": pass\n'
        'Event(kind="divergence")\n'
        'rows = [r for r in rows if r.status != "open"]\n'
        'hidden = event.get("status") == "dismissed"\n'
        'ends = status in ("finished", "crashed")\n'
        'row.status = EventStatus.MUTED if muted else "open"\n'
        'replace(event, severity="info")\n'
        'fine = e.kind == EventKind.SPIKE and detector == "spike" and purpose == "alert"\n'
    )
    assert len(_spelled_out([tmp_path])) == 7


def test_each_enum_names_its_table_in_the_same_order():
    assert [k.name for k in events.EVENT_KINDS] == list(events.EventKind)
    assert [s.name for s in statuses.RUN_STATUSES] == list(statuses.RunStatus)
    assert [s.name for s in statuses.EVENT_STATUSES] == list(statuses.EventStatus)
    assert all(isinstance(name, str) for name in events.EVENT_KIND_NAMES + statuses.RUN_STATUS_NAMES)


def test_the_served_vocabulary_says_which_event_status_is_open_and_which_are_hidden():
    served = json.loads(json.dumps(vocabulary.as_dict()))
    assert served["open_event_status"] == "open"
    assert set(served["hidden_event_statuses"]) == {"dismissed", "withdrawn"}


def test_an_alert_rule_may_name_every_event_kind():
    rule = RuleCreate(channel_id=1, name="everything", kinds=list(events.EVENT_KIND_NAMES))
    assert rule.kinds == list(events.EVENT_KIND_NAMES)
    with pytest.raises(ValidationError, match="first_nonfinite"):
        RuleCreate(channel_id=1, name="typo", kinds=["first_nan"])


def test_the_default_rules_name_vocabulary_kinds_and_page_on_the_tripwire():
    named = {kind for rule in DEFAULT_RULES for kind in rule["kinds"]}
    assert named <= set(events.EVENT_KIND_NAMES) and "first_nonfinite" in named


def _vocabulary_copies(roots: list[Path]) -> list[str]:
    """Literal collections (tuples, lists, sets, dict keys, SQL CASE texts) outside the vocabulary
    that spell out a vocabulary list again: every severity, every run or event status, or more
    than half of the signal kinds, event kinds or panels. A selection (the kinds one finding
    reads) is fine; a copy is a second home that can drift from the first."""
    import ast

    lists = {
        "severities": set(severities.SEVERITY_NAMES)
        if hasattr(severities, "SEVERITY_NAMES")
        else {s.name for s in severities.SEVERITIES},
        "run statuses": set(statuses.RUN_STATUS_NAMES),
        "event statuses": set(statuses.EVENT_STATUS_NAMES),
    }
    large = {
        "signal kinds": set(signals.SIGNAL_KIND_NAMES),
        "event kinds": set(events.EVENT_KIND_NAMES),
        "panels": set(signals.PANEL_KEYS),
    }
    copies = []
    for root in roots:
        for path in root.rglob("*.py"):
            if "vocabulary" in path.parts:
                continue  # the home itself, and the dashboard's reader of the served vocabulary
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                    items = node.elts
                elif isinstance(node, ast.Dict):
                    items = [key for key in node.keys if key is not None]
                else:
                    continue
                words = {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}
                for name, members in lists.items():
                    if len(members) >= 3 and members <= words:
                        copies.append(f"{path}:{node.lineno}: every one of the {name}")
                for name, members in large.items():
                    if len(words & members) > len(members) / 2:
                        copies.append(f"{path}:{node.lineno}: {len(words & members)} of {len(members)} {name}")
            for text in re.findall(r"CASE\b.*?\bEND", path.read_text(), flags=re.S | re.I):
                if sum(f"'{s}'" in text for s in lists["severities"]) >= 2:
                    copies.append(f"{path}: a severity ranking in SQL")
    return copies


def test_no_code_outside_the_vocabulary_spells_out_a_vocabulary_list_again():
    assert _vocabulary_copies(_our_packages()) == []


def test_a_second_severity_ranking_would_be_found(tmp_path):
    (tmp_path / "ranking.py").write_text(
        'RANK = {"info": 0, "warning": 1, "critical": 2}\n'
        "ORDER = \"CASE severity WHEN 'critical' THEN 2 WHEN 'warning' THEN 1 ELSE 0 END\"\n"
    )
    assert len(_vocabulary_copies([tmp_path])) == 2
