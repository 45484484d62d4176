"""The run page's Ranks section, for the run of a distributed job (`job` in `GET /runs/{id}`): the
job's ranks side by side, as the service reads them.

* a rank × step heatmap of one metric across the ranks (`GET /runs/{id}/ranks/matrix`): a rank's
  own work (`holter/dist/compute_s`) by default, where a straggler is a stripe; its wait in the
  collectives, its whole step, or any metric of the run (every rank's `loss`);
* the ranks by host (`GET /runs/{id}/ranks`): where each stands, its medians over its last steps,
  the collective it is inside; a rank a standing event names is highlighted with that event;
* where the stopped ranks stand: the stack of each rank a standing hung or lost event names (its
  innermost frame first to the eye), and the other quiet ranks grouped by where they wait.

Closed until opened, like the System section: nothing is read for it before. Open, it is read
again every `TICK_MS` while the job is alive (a slower pace than the charts': ranks beat every
few seconds) and whenever the run's events change; the reader's pick of a rank (a link on an
event, a row, a heatmap row, `?rank=N`) outlines it in both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import dash_mantine_components as dmc
from dash import dcc, html
from holter_charts.marks import event_label
from holter_charts.ranks import SELECTED_COLOR, event_ranks, rank_heatmap, rank_label, ranks_named
from holter_charts.style import rgba
from holter_charts.vocabulary import Vocabulary

from holter_dashboard.components import age, error_alert, severity_badge, status_badge

SECTION = "ranks"  # the section's accordion value when open
TICK_MS = 5000
# The metric the heatmap opens on: a rank's own work before the collectives, where the straggler
# shows (in synchronous training every rank's whole step lasts the same; client/holter/ranks.py
# logs it). Not in the vocabulary the service serves, so named here; a run without it opens on
# its first rank series.
DEFAULT_METRIC = "holter/dist/compute_s"
MAX_BUCKETS = 200  # columns of the heatmap: about one per 4 px of its width
GRAPH_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["lasso2d", "toImage", "select2d"]}
SHOWN_FRAMES = 12  # of a stack, the innermost ones (the rest are folded)
PICKED_STYLE = {"outline": f"2px dotted {SELECTED_COLOR}", "outlineOffset": "-2px"}  # as on the heatmap


# -- the section as the page opens ---------------------------------------------------------------


def ranks_section(
    run: Mapping[str, Any], events: Sequence[Mapping[str, Any]], vocab: Vocabulary, selected: int | None
) -> Any:
    """The Ranks section of a job's run, closed unless the URL picked a rank (`?rank=N`). Its
    controls are there from the start; what it shows is drawn once opened. A run of no job has
    the section too (the page's callbacks listen to it), only never shown."""
    job = run.get("job")
    metrics = run.get("metrics") or []
    return html.Div(
        [
            dcc.Store(id="run-job", data=job),
            dcc.Store(id="run-rank", data=selected),
            dcc.Store(id="run-ranks-seen", data=rank_events_signature(events, vocab)),  # the events drawn
            dcc.Interval(id="run-ranks-tick", interval=TICK_MS, disabled=True),
            html.Div(id="run-rank-sink", hidden=True),
            dmc.Accordion(
                dmc.AccordionItem(
                    [
                        dmc.AccordionControl(html.Div(section_label(job, events, vocab), id="run-ranks-label")),
                        dmc.AccordionPanel(
                            [
                                dmc.Group(
                                    [
                                        dmc.Text("across the ranks:", size="xs", c="dimmed"),
                                        dmc.Select(
                                            id="run-ranks-metric",
                                            data=metric_choices(metrics, vocab),
                                            value=default_metric(metrics, vocab),
                                            searchable=True,
                                            allowDeselect=False,
                                            size="xs",
                                            w=300,
                                            comboboxProps={"withinPortal": True},
                                        ),
                                        dmc.Text(
                                            "a click on a row (or a rank on an event) picks that rank",
                                            size="xs",
                                            c="dimmed",
                                        ),
                                    ],
                                    gap="sm",
                                    mb=6,
                                ),
                                html.Div(id="run-ranks"),
                            ]
                        ),
                    ],
                    value=SECTION,
                ),
                id="run-ranks-open",
                value=SECTION if selected is not None and job else None,
                variant="contained",
                mt="sm",
                className="run-ranks",
            ),
        ],
        id="run-ranks-section",
        style=None if job else {"display": "none"},
    )


def section_label(job: Mapping[str, Any] | None, events: Sequence[Mapping[str, Any]], vocab: Vocabulary) -> Any:
    """The closed section's line: how many ranks on how many hosts, how many still run, and the
    standing events about them."""
    if not job:
        return dmc.Text("Ranks", fw=600, size="sm")
    world = job.get("world_size") or job.get("joined") or 0
    counts = [f"{job.get('joined', 0)} of {world} ranks joined" if job.get("joined") != world else f"{world} ranks"]
    counts += [f"{job[k]} {k}" for k in ("running", "finished", "crashed") if job.get(k)]
    if job.get("launcher"):
        counts.append(str(job["launcher"]))
    standing = [e for e in events if vocab.is_rank_event(e.get("kind")) and vocab.is_open(e.get("status"))]
    worst = max(standing, key=lambda e: vocab.severity_rank(e.get("severity")), default=None)
    return dmc.Group(
        [
            dmc.Text("Ranks", fw=600, size="sm"),
            dmc.Text(" · ".join(counts), size="xs", c="dimmed"),
            *(
                [
                    severity_badge(
                        ", ".join(dict.fromkeys(event_label(e, vocab) for e in standing)),
                        worst.get("severity"),
                        vocab,
                        size="xs",
                        className="ranks-events-badge",
                    )
                ]
                if worst is not None
                else []
            ),
        ],
        gap="sm",
    )


def rank_events_signature(events: Sequence[Mapping[str, Any]], vocab: Vocabulary) -> str:
    """What the section shows of the run's events: each standing event about ranks, the ranks it
    names and how bad it is. The run's other events, and these events' words and step ranges
    (rewritten at each pass of the ranks watch while they last), leave it as it was."""
    standing = sorted(
        (e.get("id"), e.get("kind"), e.get("severity"), tuple(event_ranks(e)))
        for e in events
        if vocab.is_rank_event(e.get("kind")) and vocab.is_open(e.get("status"))
    )
    return json.dumps(standing, default=str)


def buckets_for(metric: str, metrics: Sequence[Mapping[str, Any]]) -> int:
    """Columns to read `metric` in: MAX_BUCKETS, or fewer for a metric logged fewer times (the
    ranks' timings every few steps), so that each column holds a point and the heatmap has no
    empty stripes between them. An empty cell then says what the API means by one: no finite value."""
    listed = next((m for m in metrics if m.get("name") == metric), None)
    count = (listed or {}).get("count")
    return max(1, min(MAX_BUCKETS, count)) if isinstance(count, int) else MAX_BUCKETS


def metric_choices(metrics: Sequence[Mapping[str, Any]], vocab: Vocabulary) -> list[dict[str, Any]]:
    """The metrics the heatmap can show, as a grouped Select's data: the ranks' timings (rank 0's
    rank series among the run's metrics, each rank has its own), then the run's other metrics
    (every rank logs its own `loss`; a metric only rank 0 logged shows one row)."""
    timings = sorted(m["name"] for m in metrics if vocab.is_rank_kind(m.get("kind")))
    others = sorted(
        m["name"] for m in metrics if not vocab.is_rank_kind(m.get("kind")) and not vocab.is_system_kind(m.get("kind"))
    )
    groups = [("rank timings", timings), ("the run's metrics", others)]
    return [{"group": label, "items": names} for label, names in groups if names]


def default_metric(metrics: Sequence[Mapping[str, Any]], vocab: Vocabulary) -> str:
    """The metric the heatmap opens on: DEFAULT_METRIC, else the run's first rank series, else its first metric."""
    names = [m["name"] for m in metrics]
    if DEFAULT_METRIC in names:
        return DEFAULT_METRIC
    timings = sorted(m["name"] for m in metrics if vocab.is_rank_kind(m.get("kind")))
    return str((timings or sorted(names) or [DEFAULT_METRIC])[0])


# -- what the section shows once open ------------------------------------------------------------


def ranks_body(
    ranks: Mapping[str, Any],
    matrix: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
    vocab: Vocabulary,
    *,
    selected: int | None,
    problems: Sequence[str] = (),
) -> list[Any]:
    """The heatmap, the ranks by host, and where the stopped ranks stand."""
    hosts = {r["rank"]: r.get("host") for r in ranks.get("data") or []}
    body: list[Any] = [error_alert("; ".join(problems), "Some of the ranks could not be read")] if problems else []
    if matrix is not None:
        figure = rank_heatmap(matrix, hosts=hosts, vocab=vocab, events=events, selected=selected)
        body.append(
            dmc.Paper(
                dcc.Graph(id="run-ranks-heatmap", figure=figure, config=GRAPH_CONFIG, className="panel rank-heatmap"),
                withBorder=True,
                radius="md",
                p=4,
                className="chart-card",
            )
        )
    body.append(rank_table(ranks, events, vocab, selected=selected))
    stacks = rank_stacks(ranks, events, vocab, selected=selected)
    if stacks is not None:
        body.append(stacks)
    return body


COLUMNS = ("rank", "local", "status", "step", "last beat", "compute (median)", "wait (median)", "collective", "events")


def rank_table(
    ranks: Mapping[str, Any], events: Sequence[Mapping[str, Any]], vocab: Vocabulary, *, selected: int | None
) -> Any:
    """The ranks by host, a line per host then its ranks: status and life, the step and when it
    last moved, the last beat, the medians of its own work and of its wait over its last steps,
    the collective it is inside. A rank a standing event names is tinted in its colour and
    badged with it; the picked rank is outlined."""
    data = {r["rank"]: r for r in ranks.get("data") or []}
    if not data:
        return dmc.Text("No rank has joined yet.", size="xs", c="dimmed", className="no-ranks")
    named = ranks_named(events, vocab)
    rows: list[Any] = []
    for host, members in hosts_in_order(ranks):
        rows.append(
            dmc.TableTr(
                html.Td(  # Mantine's cell takes no colSpan
                    dmc.Text(
                        [dmc.Text(host, span=True, fw=600, ff="monospace"), f" · {ranks_text(members)}"],
                        size="xs",
                    ),
                    colSpan=len(COLUMNS),
                    style={"padding": "2px 8px"},
                ),
                className="rank-host",
                style={"background": "var(--mantine-color-gray-0)"},
                **{"data-host": host},
            )
        )
        rows += [rank_row(data[r], named.get(r, []), vocab, selected == r) for r in members if r in data]
    head = dmc.TableThead(dmc.TableTr([dmc.TableTh(dmc.Text(c, size="xs", c="dimmed")) for c in COLUMNS]))
    return dmc.TableScrollContainer(
        dmc.Table(
            [head, dmc.TableTbody(rows)], verticalSpacing=2, horizontalSpacing=8, fz="xs", className="rank-table"
        ),
        minWidth=720,
        maxHeight=480,
        type="scrollarea",
        mt=8,
    )


def rank_row(rank: Mapping[str, Any], named: Sequence[Mapping[str, Any]], vocab: Vocabulary, picked: bool) -> Any:
    """One rank's line of the table (see rank_table)."""
    timing = rank.get("timing") or {}
    style: dict[str, Any] = {}
    if named:
        color = vocab.color(named[0].get("severity"))
        style = {"background": rgba(color, 0.1), "boxShadow": f"inset 3px 0 0 {color}"}
    if picked:
        style.update(PICKED_STYLE)
    collective = rank.get("collective")
    cells = [
        dmc.Button(
            f"rank {rank['rank']}",
            size="compact-xs",
            variant="subtle",
            fw=700 if picked else 500,
            className="rank-pick",
            **{"data-pick-rank": str(rank["rank"])},  # picked in the browser (assets/run_page.js `pickRank`)
        ),
        rank.get("local_rank") if rank.get("local_rank") is not None else "—",
        dmc.Group(
            [
                status_badge(rank.get("status"), vocab),
                dmc.Badge("silent", color="red", variant="outline", size="xs", className="rank-silent")
                if vocab.is_live(rank.get("status")) and not rank.get("alive")
                else None,
            ],
            gap=4,
            wrap="nowrap",
        ),
        step_text(rank),
        age(rank.get("beat_at")),
        seconds_text(timing.get("compute_s")),
        seconds_text(timing.get("wait_s")),
        f"{collective} · {since_text(rank.get('collective_since'))}" if collective else "—",
        dmc.Group([severity_badge(event_label(e, vocab), e.get("severity"), vocab, size="xs") for e in named], gap=4)
        if named
        else "",
    ]
    return dmc.TableTr(
        [dmc.TableTd(cell) for cell in cells],
        className="rank-row" + (" rank-flagged" if named else "") + (" rank-selected" if picked else ""),
        style=style,
        **{"data-rank": str(rank["rank"])},
    )


def hosts_in_order(ranks: Mapping[str, Any]) -> list[tuple[str, list[int]]]:
    """Each host with its ranks, the host of the lowest rank first (`hosts` of `GET /runs/{id}/ranks`)."""
    hosts = {str(host): sorted(members) for host, members in (ranks.get("hosts") or {}).items()}
    return sorted(hosts.items(), key=lambda item: (item[1][0] if item[1] else 0, item[0]))


def ranks_text(ranks: Sequence[int]) -> str:
    """Ranks as a person reads them: "rank 2", "ranks 0 and 1", "ranks 0–7", "ranks 0, 2 and 5"."""
    ordered = sorted(set(ranks))
    if not ordered:
        return "no ranks"
    if len(ordered) == 1:
        return f"rank {ordered[0]}"
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"ranks {ordered[0]}–{ordered[-1]}"
    if len(ordered) > 8:
        return f"{len(ordered)} ranks ({', '.join(map(str, ordered[:6]))}, ... {ordered[-1]})"
    return "ranks " + ", ".join(map(str, ordered[:-1])) + f" and {ordered[-1]}"


def seconds_text(value: Any) -> str:
    """A duration as a person reads it: "850 µs", "12.0 ms", "1.25 s"; "—" when not known."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "—"
    magnitude = abs(value)
    if magnitude < 1e-3:
        return f"{value * 1e6:.0f} µs"
    if magnitude < 1:
        return f"{value * 1e3:.1f} ms"
    return f"{value:.3g} s"


def since_text(value: str | None) -> str:
    """How long since a moment ("35 s"), as `age` says it without its "ago"."""
    text = age(value)
    return text[: -len(" ago")] if text.endswith(" ago") else text


def step_text(rank: Mapping[str, Any]) -> str:
    """The rank's step and how long ago it last moved: "300 · 35 s ago"."""
    step = rank.get("step")
    if step is None:
        return "—"
    return f"{step:,}" + (f" · {age(rank['step_at'])}" if rank.get("step_at") else "")


# -- where the stopped ranks stand ---------------------------------------------------------------


def stopped_ranks(events: Sequence[Mapping[str, Any]], vocab: Vocabulary) -> dict[int, Mapping[str, Any]]:
    """The ranks a standing event of a stopped job names (a hung or lost rank: the events about
    ranks that carry their `details.stacks`), each with what that event read of it."""
    found: dict[int, Mapping[str, Any]] = {}
    for event in events:
        if not vocab.is_rank_event(event.get("kind")) or not vocab.is_open(event.get("status")):
            continue
        stacks = {s.get("rank"): s for s in (event.get("details") or {}).get("stacks") or [] if isinstance(s, Mapping)}
        if not stacks:
            continue
        for rank in (event.get("details") or {}).get("ranks") or []:
            found.setdefault(rank, {**(stacks.get(rank) or {}), "event": event})
    return found


def rank_stacks(
    ranks: Mapping[str, Any], events: Sequence[Mapping[str, Any]], vocab: Vocabulary, *, selected: int | None
) -> Any:
    """Where the stopped ranks stand: each rank a standing hung or lost event names with its
    stack (as its last beat sent it, else as the event read it), then the other ranks that sent
    a stack (a rank sends one once its step stops moving), grouped by where they are; None when
    no rank is stopped."""
    data = {r["rank"]: r for r in ranks.get("data") or []}
    stopped = stopped_ranks(events, vocab)
    cards: list[Any] = []
    for rank in sorted(stopped):
        seen = stopped[rank]
        now = data.get(rank) or {}
        stack = now.get("stack") or seen.get("stack") or []
        cards.append(stack_card(rank, now or seen, stack, seen["event"], vocab, picked=selected == rank))
    quiet: dict[tuple[Any, ...], list[int]] = {}
    for rank, row in sorted(data.items()):
        if rank in stopped or not row.get("stack"):
            continue
        inner = row["stack"][-1]
        quiet.setdefault(
            (row.get("collective"), inner.get("file"), inner.get("line"), inner.get("function")), []
        ).append(rank)
    others = [quiet_group(members, data[members[0]]) for members in quiet.values()]
    if not cards and not others:
        return None
    parts: list[Any] = [dmc.Text("Where the stopped ranks stand", fw=600, size="sm", mt="sm")]
    parts += cards
    if others:
        parts.append(dmc.Text("The other quiet ranks, by where they are", size="xs", c="dimmed", mt=6))
        parts += others
    return dmc.Stack(parts, gap=6, className="rank-stacks")


def stack_card(
    rank: int,
    where: Mapping[str, Any],
    stack: Sequence[Mapping[str, Any]],
    event: Mapping[str, Any],
    vocab: Vocabulary,
    *,
    picked: bool,
) -> Any:
    """One stopped rank: who it is, where it stands (step, collective), the event that names it,
    and its stack, outermost first, its innermost frame emphasised (where it is stuck)."""
    collective = where.get("collective")
    facts = [rank_label(rank, where.get("host"))]
    if where.get("step") is not None:
        facts.append(f"step {where['step']:,}")
    facts.append(f"in {collective}" if collective else "not in a collective")
    if where.get("step_at"):
        facts.append(f"step moved {age(where['step_at'])}")
    elif where.get("quiet_s") is not None:
        facts.append(f"quiet {where['quiet_s']:.0f} s")
    color = vocab.color(event.get("severity"))
    return dmc.Paper(
        [
            dmc.Group(
                [
                    dmc.Text(" · ".join(facts), size="xs", fw=600),
                    severity_badge(event_label(event, vocab), event.get("severity"), vocab, size="xs"),
                ],
                justify="space-between",
            ),
            stack_frames(stack),
        ],
        p="xs",
        withBorder=True,
        radius="sm",
        className="rank-stack" + (" rank-selected" if picked else ""),
        style={"borderLeft": f"3px solid {color}", **(PICKED_STYLE if picked else {})},
        **{"data-rank": str(rank)},
    )


def stack_frames(stack: Sequence[Mapping[str, Any]]) -> Any:
    """A stack outermost first, as a traceback reads; the innermost frame (where the thread is)
    last and emphasised: its function, file:line and line of code. Only the innermost
    SHOWN_FRAMES show; the outer ones are a click away."""
    if not stack:
        return dmc.Text("its stack was not sent", size="xs", c="dimmed")
    *outer, inner = stack
    hidden, shown = outer[: max(0, len(outer) - SHOWN_FRAMES + 1)], outer[max(0, len(outer) - SHOWN_FRAMES + 1) :]
    parts: list[Any] = []
    if hidden:
        parts.append(
            html.Details(
                [
                    html.Summary(f"{len(hidden)} outer frames", style={"cursor": "pointer", "fontSize": 11}),
                    *(frame_line(f) for f in hidden),
                ]
            )
        )
    parts += [frame_line(f) for f in shown]
    parts.append(
        dmc.Paper(
            [
                dmc.Group(
                    [
                        dmc.Text(
                            inner.get("function") or "?", ff="monospace", fw=700, size="sm", className="frame-function"
                        ),
                        dmc.Text(where_text(inner), ff="monospace", size="xs", c="dimmed", className="frame-where"),
                    ],
                    gap=8,
                ),
                dmc.Code(inner.get("code") or "", block=True, className="frame-code", style={"fontSize": 12})
                if inner.get("code")
                else None,
            ],
            p=6,
            radius="sm",
            bg="yellow.0",
            withBorder=True,
            className="frame frame-innermost",
        )
    )
    return dmc.Stack(parts, gap=2, mt=4)


def frame_line(frame: Mapping[str, Any]) -> Any:
    """An outer frame in a line: function, file:line, code."""
    return html.Div(
        [
            html.Span(frame.get("function") or "?", style={"fontWeight": 600}),
            html.Span(f"  {where_text(frame)}", style={"color": "var(--mantine-color-dimmed)"}),
            html.Span(f"  {frame['code']}" if frame.get("code") else ""),
        ],
        className="frame",
        style={
            "fontFamily": "monospace",
            "fontSize": 11,
            "whiteSpace": "pre",
            "overflow": "hidden",
            "textOverflow": "ellipsis",
        },
    )


def where_text(frame: Mapping[str, Any]) -> str:
    """A frame's file (its last part) and line: "train.py:88"."""
    file = str(frame.get("file") or "?").replace("\\", "/").rsplit("/", 1)[-1]
    return f"{file}:{frame.get('line')}"


def quiet_group(members: Sequence[int], example: Mapping[str, Any]) -> Any:
    """Ranks quiet at one place (their collective, their innermost frame), the stack of the first a click away."""
    stack = example.get("stack") or []
    inner = stack[-1] if stack else {}
    collective = example.get("collective")
    text = (
        f"{ranks_text(members)} · "
        + (f"in {collective} · " if collective else "")
        + f"at {inner.get('function')} ({where_text(inner)})"
    )
    return html.Details(
        [
            html.Summary(text, style={"cursor": "pointer", "fontSize": 12}),
            stack_frames(stack),
        ],
        className="rank-quiet-group",
        **{"data-ranks": ",".join(map(str, members))},
    )
