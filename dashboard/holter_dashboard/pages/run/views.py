"""The run page's pieces that show what was read: header, run info, the metrics with their kinds,
events and notes lists."""

from __future__ import annotations

import json
from typing import Any

import dash_mantine_components as dmc
from dash import html
from holter_charts.style import visible
from holter_charts.vocabulary import Vocabulary

from holter_dashboard.components import age, empty_state, health_badge, link, status_badge
from holter_dashboard.pages.run.details import code_stat, preflight_badge

AUTO_KIND = "auto"  # the kind control's choice for "as its name says" (the service forgets a declaration)


def run_header(run: dict[str, Any], vocab: Vocabulary) -> dmc.Group:
    live = vocab.is_live(run.get("status"))
    return dmc.Group(
        [
            dmc.Stack(
                [
                    dmc.Group(
                        [
                            dmc.Anchor("Runs", href="/", size="sm", c="dimmed"),
                            dmc.Text("/", c="dimmed", size="sm"),
                            dmc.Text(run.get("project"), size="sm", c="dimmed"),
                        ],
                        gap=6,
                    ),
                    dmc.Group(
                        [
                            dmc.Title(visible(run.get("name") or run["id"]), order=2, id="run-title"),
                            status_badge(run.get("status"), vocab),
                            health_badge(run.get("health"), vocab, run.get("open_events"), run.get("problems")),
                            dmc.Badge("● live", color="green", variant="transparent", className="live-badge")
                            if live
                            else None,
                            dmc.Badge("archived", color="gray", variant="outline", className="archived-badge")
                            if run.get("archived_at")
                            else None,
                            preflight_badge(run),
                        ],
                        gap="sm",
                    ),
                ],
                gap=2,
            ),
            dmc.Group(
                [
                    stat("run id", run["id"]),
                    stat(
                        "last step",
                        f"{run['last_step']:,}" if run.get("last_step") is not None else "—",
                        "run-last-step",
                    ),
                    stat("code", code_stat(run)),
                    stat("last heard", age(run.get("heartbeat_at"))),
                    stat("started", age(run.get("created_at"))),
                    dmc.Group(
                        [
                            dmc.Anchor(
                                dmc.Button("Post-mortem", size="xs", variant="light"),
                                href=f"/runs/{run['id']}/postmortem",
                                id="run-postmortem-link",
                            ),
                            dmc.Button(
                                "Unarchive" if run.get("archived_at") else "Archive",
                                id="run-archive",
                                size="xs",
                                variant="subtle",
                                color="gray",
                            ),
                            dmc.Button("Delete…", id="run-delete", size="xs", variant="subtle", color="red"),
                        ],
                        gap=4,
                    ),
                ],
                gap="xl",
            ),
        ],
        justify="space-between",
        mb="sm",
        align="flex-end",
    )


def stat(label: str, value: Any, id: str | None = None) -> dmc.Stack:
    text = (
        dmc.Text(value, fw=600, size="sm", ff="monospace", id=id)
        if id
        else dmc.Text(value, fw=600, size="sm", ff="monospace")
    )
    return dmc.Stack([dmc.Text(label, size="xs", c="dimmed"), text], gap=0)


def run_info(run: dict[str, Any], can_edit: bool) -> list[Any]:
    config = json.dumps(run.get("config") or {}, indent=2, sort_keys=True, default=str)
    parts: list[Any] = [
        dmc.Text("Tags", size="xs", c="dimmed"),
        dmc.TagsInput(
            id="run-tags", value=list(run.get("tags") or []), size="xs", disabled=not can_edit, placeholder="add a tag"
        ),
        dmc.Text("Notes", size="xs", c="dimmed", mt=6),
        dmc.Textarea(
            id="run-notes-text",
            value=run.get("notes") or "",
            autosize=True,
            minRows=2,
            size="xs",
            disabled=not can_edit,
            placeholder="notes about this run",
        ),
        dmc.Button("Save tags and notes", id="run-save", size="xs", variant="light", mt=6, disabled=not can_edit),
        html.Div(id="run-save-message"),
    ]
    summary = run.get("summary") or {}
    if summary:
        # what the job said sums the run up (wandb's `run.summary`), as it said it
        parts += [
            dmc.Text("Summary", size="xs", c="dimmed", mt=8),
            html.Table(
                [
                    html.Tr([html.Td(key, style={"paddingRight": 8}), html.Td(summary_text(summary[key]))])
                    for key in sorted(summary)
                ],
                className="run-summary",
                style={"fontSize": 11, "fontFamily": "monospace"},
            ),
        ]
    parts += [
        dmc.Text("Config", size="xs", c="dimmed", mt=8),
        dmc.Code(config, block=True, style={"maxHeight": 260, "overflow": "auto", "fontSize": 11}),
    ]
    return parts


def summary_text(value: Any) -> str:
    """One summary value: numbers to 6 significant digits, anything else as JSON."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def kinds_signature(run: dict[str, Any]) -> str:
    """What the metrics list shows: each metric's kind and how it was understood."""
    return json.dumps(
        [(m["name"], m.get("kind"), m.get("understood")) for m in run.get("metrics") or []], sort_keys=True
    )


def metrics_list(run: dict[str, Any], vocab: Vocabulary) -> Any:
    """Each metric with what it is and how the service knows (declared, recognised by which
    framework's names, or unknown), and a control to say what it is."""
    metrics = sorted(run.get("metrics") or [], key=lambda m: m["name"])
    if not metrics:
        return dmc.Text("No metrics yet.", size="xs", c="dimmed")
    options = [{"value": AUTO_KIND, "label": "as its name says"}] + [
        {"value": k["name"], "label": f"{k['name']} — {k['label']}"} for k in vocab.signal_kinds
    ]
    rows = []
    for m in metrics:
        understood = m.get("understood") or {}
        rows.append(
            dmc.Stack(
                [
                    dmc.Group(
                        [
                            dmc.Text(visible(m["name"]), size="xs", ff="monospace", className="metric-name"),
                            # the note (what the name is) on hover
                            html.Span(
                                vocab.understood_text(understood),
                                title=understood.get("note") or vocab.signal_description(m.get("kind")),
                                className=f"understood understood-{understood.get('source')}",
                                style={"fontSize": 11, "color": "var(--mantine-color-dimmed)"},
                            ),
                        ],
                        justify="space-between",
                        gap=4,
                        wrap="nowrap",
                    ),
                    dmc.Select(
                        id={"type": "metric-kind", "metric": m["name"]},
                        data=options,
                        value=m.get("kind"),
                        size="xs",
                        allowDeselect=False,
                        searchable=True,
                        className="metric-kind",
                        comboboxProps={"withinPortal": True},
                    ),
                ],
                gap=2,
                className="metric-item",
            )
        )
    return dmc.ScrollArea(dmc.Stack(rows, gap=6), mah=320, type="auto")


def notes_list(notes: list[dict[str, Any]], me: str | None) -> Any:
    """The run's notes, oldest first; `me` (who this page signs as) may delete their own."""
    if not notes:
        return dmc.Text("No notes yet.", size="xs", c="dimmed", className="no-notes")
    items = []
    for n in sorted(notes, key=lambda n: n.get("created_at") or ""):
        where = (
            ""
            if n.get("start_step") is None
            else (
                f"step {n['start_step']:,}"
                if n.get("end_step") in (None, n["start_step"])
                else f"steps {n['start_step']:,}–{n['end_step']:,}"
            )
        )
        items.append(
            dmc.Paper(
                [
                    dmc.Text(n.get("text"), size="sm", className="note-text"),
                    dmc.Group(
                        [
                            dmc.Text(
                                f"{n.get('author')} · {where}" + (f" · {n['metric']}" if n.get("metric") else ""),
                                size="xs",
                                c="dimmed",
                            ),
                            dmc.Button(
                                "delete",
                                id={"type": "note-delete", "id": n["id"]},
                                size="compact-xs",
                                variant="subtle",
                                color="red",
                            )
                            if me and me == n.get("author")
                            else None,
                        ],
                        justify="space-between",
                    ),
                ],
                p="xs",
                withBorder=True,
                radius="sm",
                className="note-item",
            )
        )
    return dmc.Stack(items, gap=6)


def message(text: str, ok: bool = True) -> dmc.Text:
    return dmc.Text(text, size="xs", c="teal" if ok else "red", mt=4)


def no_such_run(run_id: str) -> Any:
    """The page of a run the service does not have: what happened and the way back, no controls."""
    return dmc.Stack(
        [
            empty_state(
                "No such run",
                f"There is no run {run_id!r} here: it may have been deleted, or the link is mistyped.",
            ),
            dmc.Group([link("Back to the runs", "/", id="no-run-back")], justify="center"),
        ],
        gap="sm",
        className="no-such-run",
    )
