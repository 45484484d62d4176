"""The `holter` command.

The parser lives here, in the standard-library-only client, so `holter --help` works everywhere.
Subcommands that need the service (serve, demo, db, analyze) import `holter_server` lazily and
say which extra to install when it is missing.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

SERVER_EXTRA_HINT = "this command needs the service: pip install 'holter[server]'"


def build_parser() -> argparse.ArgumentParser:
    """Return the parser for every `holter` subcommand."""
    parser = argparse.ArgumentParser(prog="holter", description="Training-health monitor for ML runs.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the Holter service (API on one port)")
    serve.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port to bind (default 8765)")
    serve.add_argument("--db", dest="database_url", default=None, help="database URL (default: an SQLite file under the user data directory)")
    serve.add_argument("--log-level", default="info")

    demo = commands.add_parser("demo", help="start the service if needed and stream a synthetic run into it")
    demo.add_argument("--url", default=None, help="service URL (default http://127.0.0.1:8765)")
    demo.add_argument("--db", dest="database_url", default=None, help="database URL for a service the demo starts")
    demo.add_argument("--steps", type=int, default=5000, help="steps to log (default 5000)")
    demo.add_argument("--rate", type=float, default=50.0, help="steps per second (default 50)")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `holter` console script."""
    args = build_parser().parse_args(argv)
    try:
        command = importlib.import_module(f"holter_server.commands.{args.command}")
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == "holter_server" or not exc.name.startswith("holter")):
            print(f"holter {args.command}: {SERVER_EXTRA_HINT} (missing module {exc.name!r})", file=sys.stderr)
            return 2
        raise
    return int(command.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
