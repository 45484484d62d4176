"""`holter alerts ...`: manage chat channels and rules, send a test, see deliveries — through
the service's API, like the dashboard does."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import httpx

from holter_server.commands.service import auth_headers, service_url


def _client(args: argparse.Namespace) -> httpx.Client:
    return httpx.Client(base_url=f"{service_url(args.url)}/api/v1", timeout=30, headers=auth_headers())


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    if not rows:
        return "(none)"
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        with _client(args) as api:
            return _dispatch(api, args)
    except httpx.HTTPError as exc:
        print(f"holter alerts: cannot reach the service: {exc}", file=sys.stderr)
        return 2


def _answer(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        detail = (
            response.json().get("detail")
            if response.headers.get("content-type", "").startswith("application/json")
            else response.text
        )
        raise SystemExit(f"holter alerts: {response.status_code}: {detail}")
    return response.json() if response.content else None


def _dispatch(api: httpx.Client, args: argparse.Namespace) -> int:
    action = args.alerts_command
    if action == "channels":
        rows = _answer(api.get("/channels", params={"project": args.project} if args.project else None))
        print(_table(rows, ["id", "name", "kind", "project", "target", "signed", "enabled"]))
    elif action == "add-channel":
        body = {
            "name": args.name,
            "kind": args.kind,
            "target": args.target,
            "project": args.project,
            "signing_secret": args.secret,
            "default_rules": not args.no_default_rules,
        }
        channel = _answer(api.post("/channels", json=body))
        print(f"channel {channel['id']} added ({channel['kind']}, {channel['target']})")
    elif action == "remove-channel":
        _answer(api.delete(f"/channels/{args.channel_id}"))
        print(f"channel {args.channel_id} removed")
    elif action == "test":
        _answer(api.post(f"/channels/{args.channel_id}/test"))
        print(f"test message delivered to channel {args.channel_id}")
    elif action == "rules":
        rows = _answer(api.get("/rules", params={"channel_id": args.channel_id} if args.channel_id else None))
        print(
            _table(
                rows,
                [
                    "id",
                    "channel_id",
                    "name",
                    "project",
                    "run_tag",
                    "metric_pattern",
                    "kinds",
                    "min_severity",
                    "threshold_op",
                    "threshold_value",
                    "cooldown_s",
                    "enabled",
                ],
            )
        )
    elif action == "add-rule":
        body = {
            "channel_id": args.channel_id,
            "name": args.name,
            "project": args.project,
            "run_tag": args.tag,
            "metric_pattern": args.metric,
            "kinds": args.kind or None,
            "min_severity": args.min_severity,
            "threshold_op": args.threshold_op,
            "threshold_value": args.threshold_value,
            "cooldown_s": args.cooldown,
        }
        rule = _answer(
            api.post("/rules", json={k: v for k, v in body.items() if v is not None})
        )  # the service's defaults for the rest
        print(f"rule {rule['id']} added: {json.dumps({k: v for k, v in rule.items() if v is not None})}")
    elif action == "remove-rule":
        _answer(api.delete(f"/rules/{args.rule_id}"))
        print(f"rule {args.rule_id} removed")
    elif action == "deliveries":
        params = {
            k: v
            for k, v in {"status": args.status, "channel_id": args.channel_id, "limit": args.limit}.items()
            if v is not None
        }
        rows = _answer(api.get("/deliveries", params=params))
        print(
            _table(
                rows,
                ["id", "channel_id", "run_id", "purpose", "status", "attempts", "created_at", "last_error", "summary"],
            )
        )
    return 0
