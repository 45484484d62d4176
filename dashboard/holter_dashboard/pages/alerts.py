"""Alerts page: chat channels (targets masked), their rules, a test message, and recent deliveries.

Every change goes through the API and then bumps a version store, which re-reads the lists; the
deliveries also refresh on a timer, so a retry or a new alert shows up without reloading.

A little over 400 lines, kept as one module: the layout, the views and the callbacks share the
page's component ids and version store, and its two sections (views, callbacks) read in one go.
"""

from __future__ import annotations

import asyncio
from typing import Any

import dash_mantine_components as dmc
from dash import ALL, MATCH, Dash, Input, Output, State, ctx, dcc, html, no_update
from holter_charts.vocabulary import Vocabulary

from holter_dashboard.api import ApiError, HolterAPI
from holter_dashboard.components import UNCLIPPED, age, empty_state, error_alert, section

CHANNEL_KINDS = {
    "slack": ("Slack", "https://hooks.slack.com/services/…"),
    "discord": ("Discord", "https://discord.com/api/webhooks/…"),
    "teams": ("Microsoft Teams", "https://….logic.azure.com/workflows/…"),
    "webhook": ("Webhook (signed JSON)", "https://example.com/holter-hook"),
    "apprise": ("Apprise URL", "tgram://bot-token/chat-id"),
}
DELIVERY_COLORS = {"pending": "blue", "delivered": "teal", "failed": "red"}
TICK_MS = 3000


def layout(**_: Any) -> html.Div:
    kinds = [{"value": k, "label": label} for k, (label, _) in CHANNEL_KINDS.items()]
    add_channel = section(
        "Add a channel",
        dmc.Stack(
            [
                dmc.TextInput(id="ch-name", label="Name", placeholder="e.g. #training-alerts", size="xs"),
                dmc.Select(id="ch-kind", label="Kind", data=kinds, value="slack", size="xs", allowDeselect=False),
                dmc.TextInput(
                    id="ch-target",
                    label="Webhook URL",
                    placeholder=CHANNEL_KINDS["slack"][1],
                    size="xs",
                    description="stored once, never shown again in full",
                ),
                dmc.PasswordInput(
                    id="ch-secret",
                    label="Signing secret (webhook only)",
                    placeholder="16 characters or more",
                    size="xs",
                    disabled=True,
                ),
                dmc.TextInput(id="ch-project", label="Project", placeholder="every project", size="xs"),
                dmc.Checkbox(
                    id="ch-defaults",
                    label="Start with the default rules (divergence and NaN, a policy's KL blow-up and reward "
                    "collapse among them; stalled or crashed; logprob mismatch off zero; entropy collapse; a "
                    "distributed job's ranks; the job's own alerts)",
                    checked=True,
                    size="xs",
                ),
                dmc.Button("Add channel", id="ch-add", size="xs"),
                html.Div(id="ch-message"),
            ],
            gap=6,
        ),
    )
    add_rule = section(
        "Add a rule",
        dmc.Stack(
            [
                dmc.Select(id="rule-channel", label="Channel", data=[], placeholder="add a channel first", size="xs"),
                dmc.TextInput(id="rule-name", label="Name", placeholder="e.g. loss spikes in prod", size="xs"),
                dmc.Group(
                    [
                        dmc.TextInput(id="rule-project", label="Project", placeholder="any", size="xs", w="48%"),
                        dmc.TextInput(id="rule-tag", label="Run tag", placeholder="any", size="xs", w="48%"),
                    ],
                    gap="xs",
                ),
                dmc.TextInput(
                    id="rule-metric", label="Metric pattern", placeholder="any, or a glob: loss*, act_norm/*", size="xs"
                ),
                # event kinds and severities are the service's vocabulary's (filled in with the channels)
                dmc.TagsInput(
                    id="rule-kinds", label="Event kinds", placeholder="any kind", data=[], size="xs", clearable=True
                ),
                dmc.Group(
                    [
                        dmc.Select(
                            id="rule-severity",
                            label="At least",
                            data=[],
                            value=None,
                            size="xs",
                            w=110,
                            allowDeselect=False,
                        ),
                        dmc.NumberInput(
                            id="rule-cooldown", label="Cooldown (s)", value=300, min=0, max=86_400, size="xs", w=110
                        ),
                    ],
                    gap="xs",
                ),
                dmc.Group(
                    [
                        dmc.Select(
                            id="rule-op",
                            label="Or a threshold",
                            data=["above", "below", "nonfinite"],
                            placeholder="none",
                            clearable=True,
                            size="xs",
                            w=130,
                        ),
                        dmc.NumberInput(id="rule-value", label="Value", placeholder="e.g. 10", size="xs", w=110),
                    ],
                    gap="xs",
                ),
                dmc.Button("Add rule", id="rule-add", size="xs", variant="light"),
                html.Div(id="rule-message"),
            ],
            gap=6,
        ),
    )
    return html.Div(
        [
            dmc.Title("Alerts", order=2),
            dmc.Text(
                "Holter posts to chat when a rule matches an event: one message per event, retried through outages.",
                size="sm",
                c="dimmed",
                mb="sm",
            ),
            dcc.Store(id="alerts-version", data=0),
            dcc.Store(id="deliveries-version", data=0),
            dcc.Interval(id="alerts-tick", interval=TICK_MS),
            dmc.Grid(
                [
                    dmc.GridCol(dmc.Stack([add_channel, add_rule], gap="sm"), span={"base": 12, "lg": 4}),
                    dmc.GridCol(
                        dmc.Stack(
                            [
                                section(
                                    "Channels",
                                    html.Div(id="alerts-list-message"),
                                    html.Div(id="alerts-channels", children=dmc.Skeleton(h=120)),
                                ),
                                section(
                                    "Recent deliveries",
                                    html.Div(id="deliveries-message"),
                                    html.Div(id="alerts-deliveries", children=dmc.Skeleton(h=120)),
                                ),
                            ],
                            gap="sm",
                        ),
                        span={"base": 12, "lg": 8},
                    ),
                ],
                gutter="md",
            ),
        ]
    )


# ---------------------------------------------------------------------------------- views


def rule_filters(rule: dict[str, Any], vocab: Vocabulary) -> str:
    """What a rule listens for, in a line: 'project gpt2 · tag prod · loss* · spike, divergence · warning or worse'."""
    parts: list[str] = []
    if rule.get("project"):
        parts.append(f"project {rule['project']}")
    if rule.get("run_tag"):
        parts.append(f"tag {rule['run_tag']}")
    if rule.get("threshold_op"):
        metric = rule.get("metric_pattern") or "any metric"
        if rule["threshold_op"] == "nonfinite":
            parts.append(f"{metric} is NaN or ±Inf")
        else:
            parts.append(f"{metric} {rule['threshold_op']} {rule.get('threshold_value'):g}")
    else:
        if rule.get("metric_pattern"):
            parts.append(rule["metric_pattern"])
        kinds = rule.get("kinds") or []
        parts.append(", ".join(vocab.event_kind_label(k) for k in kinds) if kinds else "any event")
        least = rule.get("min_severity") or vocab.default_min_severity
        parts.append(f"{least} only" if least == vocab.severity_names[-1] else f"{least} or worse")
    cooldown = float(rule.get("cooldown_s") or 0)
    if cooldown:
        parts.append(f"cooldown {cooldown / 60:g} min" if cooldown >= 60 else f"cooldown {cooldown:g} s")
    return " · ".join(parts)


def rules_table(rules: list[dict[str, Any]], vocab: Vocabulary) -> Any:
    if not rules:
        return dmc.Text(
            "No rules: this channel gets nothing but test messages. Add a rule on the left.",
            size="xs",
            c="dimmed",
            className="no-rules",
        )
    rows = []
    for rule in sorted(rules, key=lambda r: r["id"]):
        enabled = bool(rule.get("enabled"))
        rows.append(
            dmc.TableTr(
                [
                    dmc.TableTd(dmc.Text(rule["name"], size="sm", fw=500, c="dark" if enabled else "dimmed")),
                    dmc.TableTd(dmc.Text(rule_filters(rule, vocab), size="xs", c="dimmed")),
                    dmc.TableTd(
                        dmc.Badge(
                            "on" if enabled else "off", color="teal" if enabled else "gray", variant="light", size="sm"
                        )
                    ),
                    dmc.TableTd(
                        dmc.Group(
                            [
                                dmc.Button(
                                    "Disable" if enabled else "Enable",
                                    id={"type": "rule-toggle", "id": rule["id"]},
                                    size="compact-xs",
                                    variant="subtle",
                                    color="gray" if enabled else "teal",
                                ),
                                dmc.Button(
                                    "Delete",
                                    id={"type": "rule-delete", "id": rule["id"]},
                                    size="compact-xs",
                                    variant="subtle",
                                    color="red",
                                ),
                            ],
                            gap=2,
                            justify="flex-end",
                        )
                    ),
                ],
                className="rule-row" + ("" if enabled else " rule-disabled"),
            )
        )
    return dmc.Table(dmc.TableTbody(rows), verticalSpacing=4, fz="sm")


def channel_card(channel: dict[str, Any], rules: list[dict[str, Any]], vocab: Vocabulary) -> dmc.Paper:
    label = CHANNEL_KINDS.get(channel["kind"], (channel["kind"], ""))[0]
    badges = [
        dmc.Badge(label, variant="light", size="sm"),
        dmc.Badge(
            "enabled" if channel.get("enabled") else "disabled",
            color="teal" if channel.get("enabled") else "gray",
            variant="dot",
            size="sm",
        ),
    ]
    if channel.get("signed"):
        badges.append(dmc.Badge("signed", color="grape", variant="light", size="sm"))
    return dmc.Paper(
        [
            dmc.Group(
                [
                    dmc.Stack(
                        [
                            dmc.Group([dmc.Text(channel["name"], fw=600, className="channel-name"), *badges], gap=6),
                            dmc.Group(
                                [
                                    dmc.Code(channel["target"], className="channel-target"),
                                    dmc.Text(
                                        f"project {channel['project']}" if channel.get("project") else "every project",
                                        size="xs",
                                        c="dimmed",
                                    ),
                                ],
                                gap="sm",
                            ),
                        ],
                        gap=4,
                    ),
                    dmc.Group(
                        [
                            dmc.Button(
                                "Send test",
                                id={"type": "channel-test", "id": channel["id"]},
                                size="xs",
                                variant="light",
                            ),
                            dmc.Button(
                                "Delete",
                                id={"type": "channel-delete", "id": channel["id"]},
                                size="xs",
                                variant="subtle",
                                color="red",
                            ),
                        ],
                        gap=4,
                    ),
                ],
                justify="space-between",
                align="flex-start",
            ),
            html.Div(id={"type": "channel-test-result", "id": channel["id"]}),
            dmc.Text("Rules", size="xs", c="dimmed", mt=6),
            rules_table(rules, vocab),
        ],
        p="sm",
        withBorder=True,
        radius="md",
        className="channel-item",
    )


def deliveries_table(deliveries: list[dict[str, Any]], channel_names: dict[int, str]) -> Any:
    if not deliveries:
        return empty_state(
            "No deliveries yet",
            "Alerts appear here when a rule matches an event. Press “Send test” on a channel to check it reaches you.",
        )
    head = dmc.TableThead(dmc.TableTr([dmc.TableTh(h) for h in ("When", "Channel", "Status", "Attempts", "Alert", "")]))
    rows = []
    for d in deliveries:
        failed = d.get("status") == "failed"
        alert: list[Any] = [dmc.Text(d.get("summary") or d.get("purpose") or "—", size="sm")]
        if d.get("purpose") in ("test", "resolved"):  # not an alert: say what it was
            alert.insert(0, dmc.Badge(d["purpose"], size="xs", variant="outline", color="gray", className="purpose"))
        if d.get("run_id"):
            alert.append(dmc.Anchor(d["run_id"], href=f"/runs/{d['run_id']}", size="xs", ff="monospace"))
        if d.get("last_error"):
            alert.append(dmc.Text(d["last_error"], size="xs", c="red", className="delivery-error"))
        rows.append(
            dmc.TableTr(
                [
                    dmc.TableTd(
                        dmc.Text(age(d.get("created_at")), size="xs", c="dimmed"), style={"whiteSpace": "nowrap"}
                    ),
                    dmc.TableTd(channel_names.get(d.get("channel_id"), f"#{d.get('channel_id')}")),
                    dmc.TableTd(
                        dmc.Badge(
                            d.get("status"),
                            color=DELIVERY_COLORS.get(d.get("status"), "gray"),
                            variant="filled" if failed else "light",
                            size="sm",
                            styles=UNCLIPPED,
                        )
                    ),
                    dmc.TableTd(str(d.get("attempts", 0)), style={"fontVariantNumeric": "tabular-nums"}),
                    dmc.TableTd(dmc.Stack(alert, gap=2)),
                    dmc.TableTd(
                        dmc.Button(
                            "Retry",
                            id={"type": "delivery-retry", "id": d["id"]},
                            size="compact-xs",
                            variant="light",
                            color="red",
                        )
                        if failed
                        else None
                    ),
                ],
                className=f"delivery-row delivery-{d.get('status')}",
                style={"backgroundColor": "#fff5f5" if failed else "transparent"},
            )
        )
    return dmc.Table([head, dmc.TableTbody(rows)], verticalSpacing="xs", fz="sm")


def message(text: str, ok: bool = True, class_name: str = "") -> dmc.Text:
    return dmc.Text(text, size="xs", c="teal" if ok else "red", mt=4, className=class_name)


def _clicked() -> dict | None:
    """The pattern-matched button that was really clicked (not one that just appeared in the layout)."""
    trigger = ctx.triggered_id
    if not isinstance(trigger, dict) or not ctx.triggered or not ctx.triggered[0]["value"]:
        return None
    return trigger


# ---------------------------------------------------------------------------------- callbacks


def register(app: Dash, api: HolterAPI) -> None:
    @app.callback(
        Output("alerts-channels", "children"),
        Output("rule-channel", "data"),
        Output("rule-channel", "value"),
        Output("rule-kinds", "data"),
        Output("rule-severity", "data"),
        Output("rule-severity", "value"),
        Input("alerts-version", "data"),
        State("rule-channel", "value"),
        State("rule-severity", "value"),
    )
    async def channels_view(_version: int, chosen: Any, severity: str | None) -> tuple:
        try:
            channels, rules, vocab = await asyncio.gather(api.channels(), api.rules(), api.vocabulary())
        except ApiError as exc:
            return error_alert(exc.message, "Could not read the channels"), [], None, no_update, no_update, no_update
        choices = ([k["name"] for k in vocab.event_kinds], vocab.severity_names, severity or vocab.default_min_severity)
        if not channels:
            return (
                empty_state(
                    "No channels yet",
                    "Add a Slack, Discord, Teams or webhook URL on the left; Holter then posts "
                    "divergences, NaNs, stalled or crashed runs and a drifting logprob mismatch there.",
                ),
                [],
                None,
                *choices,
            )
        by_channel: dict[int, list[dict]] = {}
        for rule in rules:
            by_channel.setdefault(rule["channel_id"], []).append(rule)
        options = [{"value": str(c["id"]), "label": c["name"]} for c in channels]
        if chosen not in {o["value"] for o in options}:
            chosen = options[0]["value"]
        return (
            dmc.Stack([channel_card(c, by_channel.get(c["id"], []), vocab) for c in channels], gap="sm"),
            options,
            chosen,
            *choices,
        )

    @app.callback(
        Output("ch-secret", "disabled"),
        Output("ch-target", "placeholder"),
        Output("ch-target", "label"),
        Input("ch-kind", "value"),
    )
    async def kind_changed(kind: str | None) -> tuple:
        _, placeholder = CHANNEL_KINDS.get(kind or "slack", CHANNEL_KINDS["slack"])
        return kind != "webhook", placeholder, "Apprise URL" if kind == "apprise" else "Webhook URL"

    @app.callback(
        Output("ch-message", "children"),
        Output("ch-target", "value"),
        Output("ch-secret", "value"),
        Output("alerts-version", "data", allow_duplicate=True),
        Input("ch-add", "n_clicks"),
        State("ch-name", "value"),
        State("ch-kind", "value"),
        State("ch-target", "value"),
        State("ch-secret", "value"),
        State("ch-project", "value"),
        State("ch-defaults", "checked"),
        State("alerts-version", "data"),
        prevent_initial_call=True,
    )
    async def add_channel(
        _n: int | None,
        name: str | None,
        kind: str | None,
        target: str | None,
        secret: str | None,
        project: str | None,
        defaults: bool | None,
        version: int,
    ) -> tuple:
        if not (name or "").strip() or not (target or "").strip():
            return message("Give the channel a name and its URL.", ok=False), no_update, no_update, no_update
        try:
            created = await api.add_channel(
                name=name.strip(),
                kind=kind or "slack",
                target=target.strip(),
                signing_secret=(secret or None) if kind == "webhook" else None,
                project=(project or "").strip() or None,
                default_rules=bool(defaults),
            )
        except ApiError as exc:
            return message(exc.message, ok=False, class_name="channel-error"), no_update, no_update, no_update
        return message(f"Added {created['name']}. Press “Send test” to check it."), "", "", (version or 0) + 1

    @app.callback(
        Output({"type": "channel-test-result", "id": MATCH}, "children"),
        Input({"type": "channel-test", "id": MATCH}, "n_clicks"),
        prevent_initial_call=True,
    )
    async def send_test(n_clicks: int | None) -> Any:
        if not n_clicks:
            return no_update
        try:
            await api.test_channel(ctx.triggered_id["id"])
        except ApiError as exc:
            return dmc.Alert(exc.message, color="red", variant="light", p="xs", mt=6, className="test-failed")
        return dmc.Alert(
            "Test message delivered: check the channel.",
            color="teal",
            variant="light",
            p="xs",
            mt=6,
            className="test-delivered",
        )

    @app.callback(
        Output("alerts-list-message", "children"),
        Output("alerts-version", "data", allow_duplicate=True),
        Input({"type": "channel-delete", "id": ALL}, "n_clicks"),
        Input({"type": "rule-toggle", "id": ALL}, "n_clicks"),
        Input({"type": "rule-delete", "id": ALL}, "n_clicks"),
        State({"type": "rule-toggle", "id": ALL}, "children"),
        State("alerts-version", "data"),
        prevent_initial_call=True,
    )
    async def change_list(_deletes: list, _toggles: list, _rule_deletes: list, _labels: list, version: int) -> tuple:
        trigger = _clicked()
        if trigger is None:
            return no_update, no_update
        try:
            if trigger["type"] == "channel-delete":
                await api.delete_channel(trigger["id"])
                done = "Channel deleted with its rules."
            elif trigger["type"] == "rule-delete":
                await api.delete_rule(trigger["id"])
                done = "Rule deleted."
            else:
                # the button says what it does: "Enable" on a disabled rule, "Disable" on an enabled one
                labels = {s["id"]["id"]: s.get("value") for s in ctx.states_list[0]}
                rule = await api.set_rule_enabled(trigger["id"], labels.get(trigger["id"]) == "Enable")
                done = f"Rule {rule['name']!r} {'enabled' if rule['enabled'] else 'disabled'}."
        except ApiError as exc:
            return message(exc.message, ok=False), no_update
        return message(done), (version or 0) + 1

    @app.callback(
        Output("rule-message", "children"),
        Output("rule-name", "value"),
        Output("alerts-version", "data", allow_duplicate=True),
        Input("rule-add", "n_clicks"),
        State("rule-channel", "value"),
        State("rule-name", "value"),
        State("rule-project", "value"),
        State("rule-tag", "value"),
        State("rule-metric", "value"),
        State("rule-kinds", "value"),
        State("rule-severity", "value"),
        State("rule-cooldown", "value"),
        State("rule-op", "value"),
        State("rule-value", "value"),
        State("alerts-version", "data"),
        prevent_initial_call=True,
    )
    async def add_rule(
        _n: int | None,
        channel: str | None,
        name: str | None,
        project: str | None,
        tag: str | None,
        metric: str | None,
        kinds: list[str] | None,
        severity: str | None,
        cooldown: Any,
        op: str | None,
        value: Any,
        version: int,
    ) -> tuple:
        if not channel:
            return message("Add a channel first, then choose it here.", ok=False), no_update, no_update
        if not (name or "").strip():
            return message("Give the rule a name.", ok=False), no_update, no_update
        try:
            await api.add_rule(
                channel_id=int(channel),
                name=name.strip(),
                project=(project or "").strip() or None,
                run_tag=(tag or "").strip() or None,
                metric_pattern=(metric or "").strip() or None,
                kinds=kinds or None,
                min_severity=severity or None,
                threshold_op=op or None,
                threshold_value=float(value) if op in ("above", "below") and value not in (None, "") else None,
                cooldown_s=float(cooldown) if cooldown not in (None, "") else 300.0,
            )
        except (ApiError, ValueError) as exc:
            return message(getattr(exc, "message", str(exc)), ok=False), no_update, no_update
        return message("Rule added."), "", (version or 0) + 1

    @app.callback(
        Output("alerts-deliveries", "children"),
        Input("alerts-tick", "n_intervals"),
        Input("deliveries-version", "data"),
        Input("alerts-version", "data"),
    )
    async def deliveries_view(_n: int | None, _dv: int, _av: int) -> Any:
        try:
            deliveries, channels = await asyncio.gather(api.deliveries(limit=50), api.channels())
        except ApiError as exc:
            return error_alert(exc.message, "Could not read the deliveries")
        return deliveries_table(deliveries, {c["id"]: c["name"] for c in channels})

    @app.callback(
        Output("deliveries-message", "children"),
        Output("deliveries-version", "data"),
        Input({"type": "delivery-retry", "id": ALL}, "n_clicks"),
        State("deliveries-version", "data"),
        prevent_initial_call=True,
    )
    async def retry(_clicks: list, version: int) -> tuple:
        trigger = _clicked()
        if trigger is None:
            return no_update, no_update
        try:
            await api.retry_delivery(trigger["id"])
        except ApiError as exc:
            return message(exc.message, ok=False), no_update
        return message("Queued again: the dispatcher retries it within seconds."), (version or 0) + 1
