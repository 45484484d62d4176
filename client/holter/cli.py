"""The `holter` command.

The parser lives here, in the standard-library-only client, so `holter --help` works everywhere.
Subcommands that need the service (serve, demo, db, analyze, import) import `holter_server`
lazily and say which extra to install when it is missing.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

SERVER_EXTRA_HINT = "this command needs the service: pip install 'holter[server]'"
# Subcommands whose module name differs from the command (`import` is a Python keyword).
COMMAND_MODULES = {"import": "import_run"}
# The demo scenarios of `holter demo --real` (holter_server.demo.real.SCENARIOS).
REAL_SCENARIOS = ("healthy", "lr_too_high", "unshuffled", "leaky_mask", "frozen", "rl_mismatch")


def build_parser() -> argparse.ArgumentParser:
    """Return the parser for every `holter` subcommand."""
    parser = argparse.ArgumentParser(prog="holter", description="Training-health monitor for ML runs.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the Holter service (API on one port)")
    serve.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port to bind (default 8765)")
    serve.add_argument("--db", dest="database_url", default=None, help="database URL (default: an SQLite file under the user data directory)")
    serve.add_argument("--log-level", default="info")

    demo = commands.add_parser("demo", help="start the service if needed and stream demo runs into it")
    demo.add_argument("--url", default=None, help="service URL (default http://127.0.0.1:8765)")
    demo.add_argument("--db", dest="database_url", default=None, help="database URL for a service the demo starts")
    mode = demo.add_mutually_exclusive_group()
    mode.add_argument("--real", dest="mode", action="store_const", const="real",
                      help="train a tiny transformer on CPU six ways, one diagnosis each (default when torch is installed)")
    mode.add_argument("--synthetic", dest="mode", action="store_const", const="synthetic",
                      help="stream one generated run with planted problems (default without torch)")
    demo.add_argument("--scenario", action="append", choices=REAL_SCENARIOS, default=None,
                      help="with --real: only this scenario (repeatable)")
    demo.add_argument("--steps", type=int, default=5000, help="with --synthetic: steps to log (default 5000)")
    demo.add_argument("--rate", type=float, default=50.0, help="with --synthetic: steps per second (default 50)")
    demo.add_argument("--project", default="demo")

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = db_commands.add_parser("upgrade", help="apply the schema migrations")
    upgrade.add_argument("--db", dest="database_url", default=None, help="database URL (default: the configured one)")

    analyze = commands.add_parser("analyze", help="name what is wrong with the curves in a file")
    analyze.add_argument("path", help="CSV, JSONL, trainer_state.json, or a TensorBoard event file or folder")
    analyze.add_argument("--metric", action="append", default=None, help="only this metric (repeatable)")
    analyze.add_argument("--kind", default=None, help="metric kind: loss, grad_norm, activation_norm, logprob_mismatch, throughput")
    analyze.add_argument("--expected-floor", type=float, default=None, help="lowest loss the task allows (for too_good)")
    analyze.add_argument("--format", choices=["text", "json"], default="text")
    imported = commands.add_parser("import", help="stream a run logged elsewhere into the service, then name what is wrong")
    imported.add_argument("path", help="CSV, JSONL, trainer_state.json, or a TensorBoard event file or folder")
    imported.add_argument("--project", required=True)
    imported.add_argument("--name", required=True, help="the run's name")
    imported.add_argument("--run-id", default=None, help="the run's id (default: a new one; an existing id appends)")
    imported.add_argument("--url", default=None, help="service URL (default $HOLTER_URL or http://127.0.0.1:8765)")

    report = commands.add_parser("report", help="write a run's self-contained HTML post-mortem")
    report.add_argument("run_id")
    report.add_argument("-o", "--output", default=None, help="file to write (default holter-<run id>.html)")
    report.add_argument("--url", default=None, help="service URL (default $HOLTER_URL or http://127.0.0.1:8765)")

    worker = commands.add_parser("worker", help="run live detection, alert dispatch and the stall watch (no HTTP)")
    worker.add_argument("--db", dest="database_url", default=None, help="database URL (default: the configured one)")
    worker.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)

    keys = commands.add_parser("keys", help="API keys (directly in the database: how the first key is made)")
    keys.add_argument("--db", dest="database_url", default=None, help="database URL (default: the configured one)")
    key_actions = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = key_actions.add_parser("create", help="create a key; it is printed once")
    create.add_argument("name")
    create.add_argument("--scope", choices=["ingest", "read", "admin"], required=True)
    create.add_argument("--project", default=None, help="only this project (default: every project)")
    key_actions.add_parser("list", help="list keys (never their secrets)")
    revoke = key_actions.add_parser("revoke", help="revoke a key")
    revoke.add_argument("key_id", type=int)

    _add_alerts_parser(commands)
    return parser


def _add_alerts_parser(commands: Any) -> None:
    """`holter alerts ...`: channels, rules and deliveries, through the service's API."""
    alerts = commands.add_parser("alerts", help="chat channels, alert rules and deliveries")
    alerts.add_argument("--url", default=None, help="service URL (default $HOLTER_URL or http://127.0.0.1:8765)")
    actions = alerts.add_subparsers(dest="alerts_command", required=True, metavar="ACTION")
    channels = actions.add_parser("channels", help="list channels (secrets masked)")
    channels.add_argument("--project")
    add = actions.add_parser("add-channel", help="add a Slack, Discord, Teams, webhook or Apprise channel")
    add.add_argument("name")
    add.add_argument("kind", choices=["slack", "discord", "teams", "webhook", "apprise"])
    add.add_argument("target", help="the webhook URL (an Apprise URL for apprise)")
    add.add_argument("--project", help="only this project's alerts")
    add.add_argument("--secret", help="webhook: HMAC-SHA256 signing key (16+ characters)")
    add.add_argument("--no-default-rules", action="store_true", help="do not add the default divergence/stall/mismatch rules")
    remove = actions.add_parser("remove-channel", help="remove a channel and its rules")
    remove.add_argument("channel_id", type=int)
    test = actions.add_parser("test", help="send a test message to a channel now")
    test.add_argument("channel_id", type=int)
    rules = actions.add_parser("rules", help="list rules")
    rules.add_argument("--channel-id", type=int)
    rule = actions.add_parser("add-rule", help="add a rule: which events (or thresholds) notify a channel")
    rule.add_argument("channel_id", type=int)
    rule.add_argument("name")
    rule.add_argument("--project")
    rule.add_argument("--tag", help="only runs with this tag")
    rule.add_argument("--metric", help="metric name pattern (glob)")
    rule.add_argument("--kind", action="append", help="event kind (repeatable; any when omitted)")
    rule.add_argument("--min-severity", choices=["info", "warning", "critical"], default="warning")
    rule.add_argument("--threshold-op", choices=["above", "below", "nonfinite"])
    rule.add_argument("--threshold-value", type=float)
    rule.add_argument("--cooldown", type=float, default=300.0, help="seconds (default 300)")
    remove_rule = actions.add_parser("remove-rule", help="remove a rule")
    remove_rule.add_argument("rule_id", type=int)
    deliveries = actions.add_parser("deliveries", help="recent deliveries and failures")
    deliveries.add_argument("--status", choices=["pending", "delivered", "failed"])
    deliveries.add_argument("--channel-id", type=int)
    deliveries.add_argument("--limit", type=int, default=50)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `holter` console script."""
    args = build_parser().parse_args(argv)
    try:
        command = importlib.import_module(f"holter_server.commands.{COMMAND_MODULES.get(args.command, args.command)}")
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == "holter_server" or not exc.name.startswith("holter")):
            print(f"holter {args.command}: {SERVER_EXTRA_HINT} (missing module {exc.name!r})", file=sys.stderr)
            return 2
        raise
    return int(command.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
