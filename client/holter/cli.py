"""The `holter` command.

The parser lives here, in the standard-library-only client, so `holter --help`, `holter
--version` and `holter runs` work everywhere. Subcommands that need the service (serve, db,
analyze, import, ...) are found by name in the `holter.commands` entry points the service's
package declares (pyproject.toml), so the client never imports the service; when the service's
dependencies are missing they say which extra to install. `holter demo` is the client's own: it
starts `holter serve` as a process and streams into it like any training job.

The options that say where things are (`--url` for the service, `--db` for the database) are
accepted before or after the subcommand: `holter --url U runs` and `holter runs --url U` mean
the same, and so do `holter keys --db D list` and `holter keys list --db D`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import holter
from holter import __version__

SERVER_EXTRA_HINT = "this command needs the service: pip install 'holter[server]'"
# The oldest Python the service runs on (holter_server.MIN_PYTHON; the client runs on 3.9+).
SERVICE_PYTHON = (3, 11)
# The entry-point group where the service's package lists its subcommands (each a `run(args) -> int`).
SERVICE_COMMANDS_GROUP = "holter.commands"
# The service's subcommands that send a run through this client: it passes itself in (`client=`),
# so the service's package never imports the client.
SENDING_COMMANDS = ("import",)
# The kinds themselves live in the service's vocabulary (`holter kinds` prints them), so the
# parser never holds a second list of them; the service refuses an unknown one with the list.
KIND_HELP = (
    "what a metric is, overriding what its name suggests: NAME=KIND (NAME may be a glob: 'eval/*=eval_loss'), "
    "or KIND alone for every metric; repeatable; `holter kinds` lists the kinds"
)
# The demo scenarios of `holter demo --real` (holter.demo.real.SCENARIOS; that module needs torch).
REAL_SCENARIOS = (
    "healthy",
    "lr_too_high",
    "unshuffled",
    "leaky_mask",
    "frozen",
    "rl_mismatch",
    "nan_layer",
    "slow_loader",
)
URL_HELP = "service URL (default $HOLTER_URL or http://127.0.0.1:8765)"
DB_HELP = "database URL (default: $HOLTER_DATABASE_URL, else an SQLite file under the user data directory)"
# Which commands take which place-naming option (a command's actions inherit it).
URL_COMMANDS = ("demo", "import", "report", "alerts", "runs", "sync", "follow")
DB_COMMANDS = ("serve", "demo", "db", "worker", "keys")
# What `holter runs` does besides listing.
RUN_ACTIONS = ("list", "delete", "archive", "unarchive")
# Commands served by the client itself, with no service package needed.
CLIENT_COMMANDS = ("runs", "sync", "follow")
# The file formats `holter follow` reads (holter_readers.files.READER_FORMATS) and the text log
# formats (holter_readers.textlog.FORMATS), named here so the parser needs no import.
FOLLOW_FORMATS = ("tensorboard", "trainer_state", "csv", "jsonl", "textlog")
LOG_FORMATS = ("auto", "nanogpt", "llmc", "megatron", "nemo", "torchtitan", "hf", "keyvalue")


def _place_options(parser: argparse.ArgumentParser, *, url: bool = False, db: bool = False) -> None:
    """Add `--url` / `--db` with no default of their own, so a value given before the
    subcommand is not overwritten by the subcommand's parser (argparse fills defaults per level)."""
    if url:
        parser.add_argument("--url", default=argparse.SUPPRESS, help=URL_HELP)
    if db:
        parser.add_argument("--db", dest="database_url", default=argparse.SUPPRESS, help=DB_HELP)


def build_parser() -> argparse.ArgumentParser:
    """Return the parser for every `holter` subcommand."""
    parser = argparse.ArgumentParser(prog="holter", description="Training-health monitor for ML runs.")
    parser.add_argument("--version", action="version", version=f"holter {__version__}")
    _place_options(parser, url=True, db=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the Holter service (API on one port)")
    serve.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port to bind (default 8765)")
    _place_options(serve, db=True)
    serve.add_argument("--log-level", default="info")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="API processes sharing the port (one pre-bound socket); background work stays in one worker process",
    )
    serve.add_argument(
        "--socket-fd", type=int, default=None, help=argparse.SUPPRESS
    )  # set by --workers for its API processes
    serve.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)

    demo = commands.add_parser("demo", help="start the service if needed and stream demo runs into it")
    _place_options(demo, url=True, db=True)
    mode = demo.add_mutually_exclusive_group()
    mode.add_argument(
        "--real",
        dest="mode",
        action="store_const",
        const="real",
        help="train a tiny transformer on CPU eight ways, one diagnosis each (default when torch is installed)",
    )
    mode.add_argument(
        "--synthetic",
        dest="mode",
        action="store_const",
        const="synthetic",
        help="stream one generated run with planted problems (default without torch)",
    )
    demo.add_argument(
        "--scenario",
        action="append",
        choices=REAL_SCENARIOS,
        default=None,
        help="with --real: only this scenario (repeatable)",
    )
    demo.add_argument("--steps", type=int, default=5000, help="with --synthetic: steps to log (default 5000)")
    demo.add_argument("--rate", type=float, default=50.0, help="with --synthetic: steps per second (default 50)")
    demo.add_argument("--project", default="demo")

    db = commands.add_parser("db", help="database maintenance")
    _place_options(db, db=True)
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = db_commands.add_parser("upgrade", help="apply the schema migrations")
    _place_options(upgrade, db=True)
    upgrade.add_argument(
        "--distribute",
        action="store_true",
        help="on a Citus coordinator: then distribute the run-keyed tables by run, colocated with runs, "
        "and make the small ones reference tables (see docs/scale-out.md)",
    )
    upgrade.add_argument(
        "--shard-count",
        type=int,
        default=None,
        metavar="N",
        help="with --distribute: shards per distributed table when first distributed (default: citus.shard_count)",
    )
    upgrade.add_argument(
        "--partition-points",
        type=int,
        default=None,
        metavar="N",
        help="Postgres: hash-partition points, rollups and detector states by run into N partitions, "
        "copying an existing store's rows (default: HOLTER_PARTITION_POINTS; 0: leave them as they are)",
    )

    analyze = commands.add_parser("analyze", help="name what is wrong with the curves in a file")
    analyze.add_argument("path", help="CSV, JSONL, trainer_state.json, or a TensorBoard event file or folder")
    analyze.add_argument("--metric", action="append", default=None, help="only this metric (repeatable)")
    analyze.add_argument("--kind", action="append", default=None, metavar="[NAME=]KIND", help=KIND_HELP)
    analyze.add_argument(
        "--expected-floor", type=float, default=None, help="lowest loss the task allows (for too_good)"
    )
    analyze.add_argument("--format", choices=["text", "json"], default="text")
    imported = commands.add_parser(
        "import", help="stream a run logged elsewhere into the service, then name what is wrong"
    )
    imported.add_argument(
        "path",
        help="CSV, JSONL, trainer_state.json, a TensorBoard event file or folder, an MLflow store "
        "(mlflow.db or mlruns/) or a W&B offline run folder (wandb/offline-run-*)",
    )
    imported.add_argument("--project", required=True)
    imported.add_argument("--name", default=None, help="the run's name (default: its name there, else the file's)")
    imported.add_argument("--run-id", default=None, help="the run's id (default: a new one; an existing id appends)")
    imported.add_argument(
        "--step-column",
        default=None,
        help="the column (CSV) or key (JSONL, W&B) holding the training step; W&B's _step counts log calls",
    )
    imported.add_argument("--source-run", default=None, help="MLflow: which run of a store holding several")
    imported.add_argument("--kind", action="append", default=None, metavar="[NAME=]KIND", help=KIND_HELP)
    _place_options(imported, url=True)

    _add_follow_parser(commands)

    commands.add_parser(
        "kinds", help="list the metric kinds (what --kind and define_metric accept) and whose names are recognised"
    )

    report = commands.add_parser("report", help="write a run's self-contained HTML post-mortem")
    report.add_argument("run_id", help="the run's id (see `holter runs`)")
    report.add_argument("-o", "--output", default=None, help="file to write (default holter-<run id>.html)")
    _place_options(report, url=True)

    listed = commands.add_parser(
        "runs",
        help="list runs with their ids, newest first; or delete, archive or unarchive runs",
        description="`holter runs` lists runs; `holter runs delete ID...` deletes runs with every point, "
        "event and note of them (asks first, unless --yes; needs an admin key with auth on); "
        "`holter runs archive ID...` hides runs from the list and keeps them, `unarchive` brings them back.",
    )
    listed.add_argument("action", nargs="?", choices=RUN_ACTIONS, default="list", help="default: list")
    listed.add_argument("run_ids", nargs="*", metavar="ID", help="the runs to delete, archive or unarchive")
    listed.add_argument("--yes", action="store_true", help="delete without asking")
    listed.add_argument("--archived", action="store_true", help="list archived runs too")
    listed.add_argument("--project", default=None)
    # the statuses live in the service's vocabulary; it refuses an unknown one with the list
    listed.add_argument("--status", default=None, help="only runs with this status (running, finished, ...)")
    listed.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    listed.add_argument("--format", choices=["text", "json"], default="text")
    _place_options(listed, url=True)

    synced = commands.add_parser(
        "sync", help="send offline runs (init(mode='offline')) and leftover spools to the service"
    )
    synced.add_argument(
        "targets",
        nargs="*",
        metavar="PATH|RUN",
        help="a run's spool folder, a folder of them (init(dir=D): D/holter-spool), or a run id; "
        "default: every run in the spool root ($HOLTER_SPOOL_DIR or ~/.cache/holter/spool)",
    )
    _place_options(synced, url=True)

    worker = commands.add_parser("worker", help="run live detection, alert dispatch and the stall watch (no HTTP)")
    _place_options(worker, db=True)
    worker.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)

    keys = commands.add_parser("keys", help="API keys (directly in the database: how the first key is made)")
    _place_options(keys, db=True)
    key_actions = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = key_actions.add_parser("create", help="create a key; it is printed once")
    create.add_argument("name")
    create.add_argument("--scope", choices=["ingest", "read", "admin"], required=True)
    create.add_argument("--project", default=None, help="only this project (default: every project)")
    _place_options(create, db=True)
    _place_options(key_actions.add_parser("list", help="list keys (never their secrets)"), db=True)
    revoke = key_actions.add_parser("revoke", help="revoke a key")
    revoke.add_argument("key_id", type=int)
    _place_options(revoke, db=True)

    _add_alerts_parser(commands)
    return parser


def _add_follow_parser(commands: Any) -> None:
    """`holter follow PATH`: stream what a running job writes into a live run."""
    follow = commands.add_parser(
        "follow",
        help="watch a running job's TensorBoard logdir, trainer_state.json, CSV, JSONL or text log; stream it live",
        description="Stream what a running job writes into a live run, without touching the job: a TensorBoard "
        "logdir (new event files and runs as they appear), a trainer_state.json (or a Trainer output folder of "
        "checkpoints), a growing CSV or JSONL, or a text log (nanoGPT, llm.c, Megatron-LM, NeMo, torchtitan, the HF "
        "Trainer's printed dicts, 'step N | name value' lines, or --pattern). Stopped and started again, it goes on "
        "where it stopped, into the same run.",
    )
    follow.add_argument("path", help="the logdir, file or folder to follow (it may not exist yet)")
    follow.add_argument("--project", default=None, help="the run's project (default $HOLTER_PROJECT or 'default')")
    follow.add_argument("--name", default=None, help="the run's name (default: the file's or folder's name)")
    follow.add_argument("--run-id", default=None, help="the run's id (default: the one this path was followed into)")
    follow.add_argument("--new-run", action="store_true", help="start a new run and read the path from its start")
    follow.add_argument(
        "--format", choices=FOLLOW_FORMATS, default=None, help="the file's format (default: from the path)"
    )
    follow.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="auto",
        help="a text log's line format (default auto: the first format that reads a line)",
    )
    follow.add_argument(
        "--pattern",
        default=None,
        metavar="REGEX",
        help="a text log's lines as a regular expression: the named group 'step' is the step, every other named group "
        r"a metric ('__' in a name stands for '/'), e.g. 'it (?P<step>\d+) loss=(?P<train__loss>\S+)'",
    )
    follow.add_argument("--step-column", default=None, help="CSV, JSONL, trainer_state.json: the step's column or key")
    follow.add_argument("--kind", action="append", default=None, metavar="[NAME=]KIND", help=KIND_HELP)
    follow.add_argument("--tag", action="append", default=None, help="a tag for the run (repeatable)")
    follow.add_argument(
        "--idle",
        type=float,
        default=None,
        metavar="SECONDS",
        help="end the run when nothing is written for this long (default: follow until stopped or --pid exits)",
    )
    follow.add_argument(
        "--pid",
        type=int,
        default=None,
        help="end the run when this process exits (crashed if the log ends in a traceback)",
    )
    follow.add_argument("--poll", type=float, default=1.0, metavar="SECONDS", help="how often to look (default 1)")
    follow.add_argument(
        "--state",
        default=None,
        metavar="FILE",
        help="where to keep how far it has read (default: under the spool root)",
    )
    _place_options(follow, url=True)


def _add_alerts_parser(commands: Any) -> None:
    """`holter alerts ...`: channels, rules and deliveries, through the service's API."""
    alerts = commands.add_parser("alerts", help="chat channels, alert rules and deliveries")
    _place_options(alerts, url=True)
    actions = alerts.add_subparsers(dest="alerts_command", required=True, metavar="ACTION")
    channels = actions.add_parser("channels", help="list channels (secrets masked)")
    channels.add_argument("--project")
    add = actions.add_parser("add-channel", help="add a Slack, Discord, Teams, webhook or Apprise channel")
    add.add_argument("name")
    add.add_argument("kind", choices=["slack", "discord", "teams", "webhook", "apprise"])
    add.add_argument("target", help="the webhook URL (an Apprise URL for apprise)")
    add.add_argument("--project", help="only this project's alerts")
    add.add_argument("--secret", help="webhook: HMAC-SHA256 signing key (16+ characters)")
    add.add_argument(
        "--no-default-rules", action="store_true", help="do not add the default divergence/stall/mismatch rules"
    )
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
    rule.add_argument(
        "--min-severity", default=None, help="lowest severity that notifies (default: the service's, warning)"
    )
    rule.add_argument("--threshold-op", choices=["above", "below", "nonfinite"])
    rule.add_argument("--threshold-value", type=float)
    rule.add_argument("--cooldown", type=float, default=300.0, help="seconds (default 300)")
    remove_rule = actions.add_parser("remove-rule", help="remove a rule")
    remove_rule.add_argument("rule_id", type=int)
    deliveries = actions.add_parser("deliveries", help="recent deliveries and failures")
    deliveries.add_argument("--status", choices=["pending", "delivered", "failed"])
    deliveries.add_argument("--channel-id", type=int)
    deliveries.add_argument("--limit", type=int, default=50)
    for action in (channels, add, remove, test, rules, rule, remove_rule, deliveries):
        _place_options(action, url=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse a command line; `--url` and `--db` given where the command has no use for them are an error."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for dest, option, users in (("url", "--url", URL_COMMANDS), ("database_url", "--db", DB_COMMANDS)):
        if hasattr(args, dest) and args.command not in users:
            parser.error(f"holter {args.command} takes no {option}")
        if not hasattr(args, dest):
            setattr(args, dest, None)
    return args


def list_runs(args: argparse.Namespace) -> int:
    """`holter runs`: the service's runs, newest first, with the ids other commands take."""
    from urllib.parse import urlencode

    from holter.run import DEFAULT_URL
    from holter.transport import RejectedError, Transport, TransportError

    url = (args.url or os.environ.get("HOLTER_URL") or DEFAULT_URL).rstrip("/")
    pairs = (("project", args.project), ("status", args.status), ("limit", args.limit))
    query = urlencode({k: v for k, v in pairs if v is not None} | ({"archived": "include"} if args.archived else {}))
    try:
        answer = Transport(url, os.environ.get("HOLTER_API_KEY")).request("GET", f"/api/v1/runs?{query}")
    except (TransportError, RejectedError) as exc:
        print(f"holter runs: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(answer, indent=2))
        return 0
    runs = answer["data"]
    if not runs:
        print("no runs yet" + (f" in project {args.project}" if args.project else ""))
        return 0
    rows = [("ID", "PROJECT", "NAME", "STATUS", "HEALTH", "LAST STEP", "STARTED")]
    for run in runs:
        step = run.get("last_step")
        rows.append(
            (
                run["id"],
                run["project"],
                run.get("name") or "",
                run["status"],
                run.get("health") or "",
                f"{step:,}" if step is not None else "",
                run["created_at"][:19].replace("T", " "),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    shown, total = len(runs), answer.get("count", len(runs))
    if total > shown:
        print(f"({shown} of {total}; --limit for more)")
    print(f"open one: {url}/runs/<ID>   report: holter report <ID>")
    return 0


def change_runs(args: argparse.Namespace) -> int:
    """`holter runs delete|archive|unarchive ID...`: 0 when every run was changed, 1 when the
    person said no, 2 when the service refused one (an unknown run, a key that may not)."""
    from urllib.parse import quote

    from holter.run import DEFAULT_URL
    from holter.transport import RejectedError, Transport, TransportError

    if not args.run_ids:
        print(f"holter runs {args.action}: name the runs (holter runs {args.action} ID...)", file=sys.stderr)
        return 2
    url = (args.url or os.environ.get("HOLTER_URL") or DEFAULT_URL).rstrip("/")
    transport = Transport(url, os.environ.get("HOLTER_API_KEY"))
    failed = False
    for run_id in args.run_ids:
        path = f"/api/v1/runs/{quote(run_id, safe='')}"
        try:
            if args.action == "delete":
                run = transport.request("GET", path)
                if not args.yes:
                    name = run.get("name") or run_id
                    last = run.get("last_step")
                    print(
                        f"delete run {run_id} ({name}, project {run['project']}, last step {last}) with every point, "
                        "event and note of it? This cannot be undone. [y/N] ",
                        end="",
                        flush=True,
                    )
                    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
                        print("left as it was")
                        return 1
                answer = transport.request("DELETE", path)
                points = answer.get("deleted", {}).get("points", 0)
                print(f"deleted run {run_id} ({points:,} points)")
            else:
                transport.request("POST", f"{path}/{args.action}")
                print(f"{args.action}d run {run_id}")
        except (TransportError, RejectedError) as exc:
            print(f"holter runs {args.action} {run_id}: {exc}", file=sys.stderr)
            failed = True
    return 2 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `holter` console script."""
    args = parse_args(argv)
    if args.command == "runs":
        return list_runs(args) if args.action == "list" else change_runs(args)
    if args.command == "follow":
        from holter.follow import run_command

        return run_command(args)
    if args.command == "sync":
        from holter import sync
        from holter.run import DEFAULT_URL

        return sync.run(
            args.targets, args.url or os.environ.get("HOLTER_URL") or DEFAULT_URL, os.environ.get("HOLTER_API_KEY")
        )
    if args.command == "demo":
        from holter import demo

        return demo.run(args)
    try:
        command = service_command(args.command)
    except LookupError:
        if sys.version_info < SERVICE_PYTHON:  # installing the extra would not help here
            print(
                f"holter {args.command}: the Holter service needs Python {'.'.join(map(str, SERVICE_PYTHON))} or "
                f"newer; this is {sys.version.split()[0]}. The client works here: point it at a service running "
                "elsewhere (HOLTER_URL).",
                file=sys.stderr,
            )
            return 2
        print(f"holter {args.command}: {SERVER_EXTRA_HINT} (no such command installed)", file=sys.stderr)
        return 2
    except ImportError as exc:
        if sys.version_info < (3, 11) and not isinstance(exc, ModuleNotFoundError):  # the service's package refuses it
            print(f"holter {args.command}: {exc}", file=sys.stderr)
            return 2
        if exc.name and exc.name.split(".")[0] != "holter":  # the service's package or one of its dependencies
            print(f"holter {args.command}: {SERVER_EXTRA_HINT} (missing module {exc.name!r})", file=sys.stderr)
            return 2
        raise
    if args.command in SENDING_COMMANDS:
        return int(command(args, client=holter) or 0)
    return int(command(args) or 0)


def service_command(name: str) -> Any:
    """The service's `run(args)` for subcommand `name`, from its package's entry points; LookupError
    when no installed package declares it, ImportError when its dependencies are missing."""
    points = importlib.metadata.entry_points()
    if hasattr(points, "select"):  # Python 3.10+
        found = points.select(group=SERVICE_COMMANDS_GROUP, name=name)
    else:  # Python 3.9: a dict of groups
        found = [point for point in points.get(SERVICE_COMMANDS_GROUP, ()) if point.name == name]
    for point in found:
        return point.load()
    raise LookupError(name)


if __name__ == "__main__":
    sys.exit(main())
