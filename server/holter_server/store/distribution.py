"""Citus: spread what belongs to a run over the worker nodes by run, copy the small tables to every node.

`holter db upgrade --distribute` runs the migrations on a Citus coordinator and then lays the
tables out as below, idempotently (a table already laid out as planned is left alone):

* `runs` is distributed by its `id`; every table that belongs to a run is distributed by its
  `run_id` and colocated with `runs`, so a run's rows of every table sit in shards on the same
  node and a query naming one run (every hot query does) goes to that node alone, joins and
  foreign keys included;
* the small tables that are no run's (projects' settings, API keys, channels, rules, service
  secrets) become reference tables: a copy on every node, so a run's shard can join them and
  hold foreign keys to them;
* Alembic's version table and the alert outbox (`deliveries`, the channels' history, with rows
  that belong to no run) stay on the coordinator alone.

Which table goes where is named here table by table, and a unit test checks that every table of
the models is named, so a new table cannot be left out without a decision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from holter_server.store.database import make_engine, upgrade
from holter_server.store.models import Base

# The run table and its distribution column; every other run-keyed table is colocated with it.
RUNS = ("runs", "id")
BY_RUN = (
    "metrics",
    "points",
    "rollups",
    "events",
    "mutes",
    "detector_states",
    "annotations",
    "run_ranks",
    "deleted_runs",
)
REFERENCE = (
    "api_keys",
    "channels",
    "alert_rules",
    "project_settings",
    "service_secrets",
    "references",
    "config_keys",
)
# The alert outbox is the channels' and has rows with no run (test messages): it stays whole on
# the coordinator, where the dispatcher claims rows with SKIP LOCKED. Citus itself makes it a
# "Citus local" table once the channels it refers to are reference tables.
COORDINATOR_ONLY = ("alembic_version", "deliveries")


class NotCitus(RuntimeError):
    """The database is not a Citus coordinator, so it has nothing to distribute over."""


@dataclass(frozen=True)
class Placement:
    """How one table is laid out: `distributed` (by `column`), `reference`, or `local`."""

    table: str
    layout: str
    column: str | None = None


def plan() -> list[Placement]:
    """Every table of the models and its layout, in an order Citus accepts: the tables others
    refer to first (reference tables, then `runs`, then the run-keyed tables in the order of
    their foreign keys)."""
    ordered = [table.name for table in Base.metadata.sorted_tables]
    reference = [Placement(name, "reference") for name in ordered if name in REFERENCE]
    by_run = [Placement(name, "distributed", "run_id") for name in ordered if name in BY_RUN]
    return [*reference, Placement(RUNS[0], "distributed", RUNS[1]), *by_run]


def distribute(
    url: str, *, shard_count: int | None = None, say: Callable[[str], None] = lambda line: None
) -> list[str]:
    """Migrate the database at `url` (a Citus coordinator) and lay its tables out by `plan()`;
    returns what was changed, one line a table (empty: it was laid out already).

    `shard_count` sets the number of shards of `runs` (and so of every table colocated with it)
    when `runs` is first distributed; without it, Citus's `citus.shard_count` (32 by default).
    Raises NotCitus, before migrating anything, on a database without Citus or on a worker node.
    """
    if make_url(url).get_backend_name() != "postgresql":
        raise NotCitus(
            "--distribute needs a Citus coordinator (a Postgres database with the citus extension); this is not "
            "Postgres"
        )
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            _require_coordinator(connection)
        upgrade(url)
        changed: list[str] = []
        # one transaction a table: create_distributed_table copies the table's rows into shards,
        # and a failure half-way leaves the tables done so far done (running again finishes the rest)
        with engine.connect() as opened:
            connection = opened.execution_options(isolation_level="AUTOCOMMIT")
            laid_out: list[str] = []
            for placement in plan():
                line = _lay_out(connection, placement, shard_count=shard_count)
                if line:
                    changed.append(line)
                    laid_out.append(placement.table)
                    say(line)
            # Citus copied each table's rows into its shards and left the originals in the
            # coordinator's shell table, hidden and taking space. Only once no local table refers
            # to them can they go (so after every table is laid out).
            for table in reversed(laid_out):
                connection.execute(
                    text("SELECT truncate_local_data_after_distributing_table(CAST(:t AS regclass))"),
                    {"t": _quoted(connection, table)},
                )
        return changed
    finally:
        engine.dispose()


def _require_coordinator(connection: Connection) -> None:
    version = connection.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'citus'")).scalar()
    if version is None:
        raise NotCitus(
            "--distribute needs a Citus coordinator, and this database has no citus extension "
            "(CREATE EXTENSION citus, then citus_set_coordinator_host and citus_add_node; see docs/scale-out.md)"
        )
    if not connection.execute(text("SELECT citus_is_coordinator()")).scalar():
        raise NotCitus(
            "--distribute runs on the Citus coordinator, and this database is not one "
            "(a worker node, or no coordinator set: SELECT citus_set_coordinator_host(host, port))"
        )


def _quoted(connection: Connection, table: str) -> str:
    return connection.dialect.identifier_preparer.quote(table)


def _current(connection: Connection, table: str) -> tuple[str, str | None, int | None]:
    """The table's layout now: ("distributed", column, colocation id), ("reference", None, None),
    ("local", None, None) for a plain table, or ("citus-local", ...) and the like for layouts Holter never makes."""
    row = connection.execute(
        text(
            "SELECT partmethod, repmodel, column_to_column_name(logicalrelid, partkey), colocationid "
            "FROM pg_dist_partition WHERE logicalrelid = CAST(:t AS regclass)"
        ),
        {"t": _quoted(connection, table)},
    ).first()
    if row is None:
        return "local", None, None
    method, replication, column, colocation = row
    if method == "h":
        return "distributed", column, colocation
    if method == "n" and replication == "t":
        return "reference", None, None
    return ("citus-local" if method == "n" else f"partitioned by method {method}"), column, colocation


def _lay_out(connection: Connection, placement: Placement, *, shard_count: int | None) -> str | None:
    table = _quoted(connection, placement.table)
    layout, column, colocation = _current(connection, placement.table)
    if placement.layout == "reference":
        if layout == "reference":
            return None
        # "citus-local": Citus turned it into one itself when a table it refers to became a reference table
        if layout not in ("local", "citus-local"):
            raise NotCitus(
                f"{placement.table} is {layout} already; a reference table was expected "
                f"(undistribute_table('{placement.table}') first)"
            )
        connection.execute(text("SELECT create_reference_table(CAST(:t AS regclass))"), {"t": table})
        return f"{placement.table}: reference table (a copy on every node)"
    if layout == "distributed":
        if column != placement.column:
            raise NotCitus(
                f"{placement.table} is distributed by {column}, not {placement.column} "
                f"(alter_distributed_table('{placement.table}', distribution_column => '{placement.column}') first)"
            )
        if placement.table == RUNS[0]:
            return None
        runs_colocation = _current(connection, RUNS[0])[2]
        if colocation == runs_colocation:
            return None
        connection.execute(
            text("SELECT update_distributed_table_colocation(CAST(:t AS regclass), colocate_with => 'runs')"),
            {"t": table},
        )
        return f"{placement.table}: colocated with runs"
    if layout not in ("local", "citus-local"):
        raise NotCitus(
            f"{placement.table} is {layout} already; distributed by {placement.column} was expected "
            f"(undistribute_table('{placement.table}') first)"
        )
    if placement.table == RUNS[0]:
        if shard_count:
            connection.execute(
                text("SELECT create_distributed_table(CAST(:t AS regclass), :c, shard_count => :n)"),
                {"t": table, "c": placement.column, "n": shard_count},
            )
        else:
            connection.execute(
                text("SELECT create_distributed_table(CAST(:t AS regclass), :c)"), {"t": table, "c": placement.column}
            )
        return f"{placement.table}: distributed by {placement.column}"
    connection.execute(
        text("SELECT create_distributed_table(CAST(:t AS regclass), :c, colocate_with => 'runs')"),
        {"t": table, "c": placement.column},
    )
    return f"{placement.table}: distributed by {placement.column}, colocated with runs"
