"""Plain Postgres: the tables that grow with the points, hash-partitioned by run.

Every hot query names one run, and every key of these tables starts with `run_id`, so a table
split by a hash of `run_id` into N partitions answers the same queries, each from one partition
(a smaller index to keep in memory and to vacuum), without changing a query.

An existing table is rebuilt once, in one transaction: a partitioned twin is made, every row is
copied into it, the old table is dropped and the twin takes its name, keys and indexes. Writers
wait on the table's lock while it is copied, so no point written meanwhile is lost; readers go
on until the swap. SQLite has nothing of the kind: there it is a no-op.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, text

# Big, keyed by run first, and referred to by no foreign key (so each can be dropped and rebuilt).
PARTITIONED_TABLES = ("points", "rollups", "detector_states")


def not_a_partition(connection: Connection) -> Callable[[str | None, str, Any], bool]:
    """Alembic's `include_name` filter that leaves the partitions out of a comparison with the
    models: they are the partitioned table's storage, not tables of their own."""
    partitions: set[str] = set()
    if connection.dialect.name == "postgresql":
        partitions = set(connection.scalars(text("SELECT relname FROM pg_class WHERE relispartition")))

    def include(name: str | None, type_: str, parent_names: Any) -> bool:
        return not (type_ == "table" and name in partitions)

    return include


def partition_count(*, connection: Connection, table: str) -> int:
    """How many hash partitions `table` has (0: it is a plain table)."""
    return int(
        connection.scalar(
            text(
                "SELECT count(i.inhrelid) FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid"
                " LEFT JOIN pg_inherits i ON i.inhparent = c.oid"
                " WHERE c.relname = :table AND c.relnamespace = current_schema()::regnamespace AND p.partstrat = 'h'"
            ),
            {"table": table},
        )
        or 0
    )


def partition_by_run(
    *, connection: Connection, partitions: int, tables: tuple[str, ...] = PARTITIONED_TABLES
) -> list[str]:
    """Hash-partition each of `tables` by run_id into `partitions` partitions, rebuilding those
    that are plain or split otherwise; returns the tables rebuilt. Runs in the caller's transaction."""
    if connection.dialect.name != "postgresql" or partitions < 1:
        return []
    rebuilt = []
    for table in tables:
        if partition_count(connection=connection, table=table) != partitions:
            _rebuild(connection, table, partitions)
            rebuilt.append(table)
    return rebuilt


def _rebuild(connection: Connection, table: str, partitions: int) -> None:
    def run(sql: str) -> None:
        connection.exec_driver_sql(sql)

    run(f'LOCK TABLE "{table}" IN EXCLUSIVE MODE')  # readers go on; writers wait for the new table
    constraints = connection.execute(
        text(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = CAST(:table AS regclass) AND contype IN ('p', 'u', 'f', 'c') ORDER BY conname"
        ),
        {"table": table},
    ).all()
    indexes = (
        connection.execute(
            text(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = :table"
                " AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = CAST(:table AS regclass))"
            ),
            {"table": table},
        )
        .scalars()
        .all()
    )
    twin = f"{table}__by_run"
    run(f'CREATE TABLE "{twin}" (LIKE "{table}" INCLUDING DEFAULTS INCLUDING STORAGE) PARTITION BY HASH (run_id)')
    for remainder in range(partitions):
        run(
            f'CREATE TABLE "{table}_h{partitions}_{remainder}" PARTITION OF "{twin}"'
            f" FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
        )
    run(f'INSERT INTO "{twin}" SELECT * FROM "{table}"')
    run(f'DROP TABLE "{table}"')
    run(f'ALTER TABLE "{twin}" RENAME TO "{table}"')
    for name, definition in sorted(constraints, key=lambda c: not c[1].startswith("PRIMARY KEY")):
        run(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
    for definition in indexes:
        run(definition)
    run(f'ANALYZE "{table}"')
