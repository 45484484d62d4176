"""Which process does a run's background work: claims by run, held for one transaction.

Background loops (live detection, the stall watch) on several processes share the runs between
them. They used to lock the rows they worked on with `SELECT ... FOR UPDATE SKIP LOCKED` across
all runs, which a distributed (Citus) or partitioned table answers badly or not at all: Citus
refuses a multi-shard FOR UPDATE. Instead a process claims whole runs with a Postgres advisory
lock on a hash of (task, run_id), taken on the database it is connected to (the coordinator on
Citus) and touching no table: it is held until the transaction ends, so two processes never
work on the same run at once, and it goes with the connection when a process dies, so a crashed
worker's claim never outlives it. Two runs whose hashes meet share a claim: one waits a pass.

SQLite has one writer at a time, and one process does its background work (see
`database.background_lock_path`): every run asked for is granted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from enum import IntEnum

from sqlalchemy import text
from sqlalchemy.orm import Session


class Task(IntEnum):
    """The background work a run is claimed for (the advisory lock's first key)."""

    DETECTION = 2201
    STALL_WATCH = 2202
    REFERENCE_DRIFT = 2203
    RANK_WATCH = 2204
    TRIPWIRE = 2205


def run_key(run_id: str) -> int:
    """The run's 32-bit signed key: the advisory lock's second key."""
    return int.from_bytes(hashlib.blake2b(run_id.encode(), digest_size=4).digest(), "big", signed=True)


def claim_runs(*, session: Session, task: Task, run_ids: Sequence[str]) -> list[str]:
    """Those of `run_ids` this transaction now holds for `task` (in the order given), skipping
    runs another transaction holds; held until commit or rollback."""
    if not run_ids or session.get_bind().dialect.name != "postgresql":
        return list(run_ids)
    keys = sorted({run_key(run_id) for run_id in run_ids})
    held = set(
        session.scalars(
            text("SELECT k FROM unnest(CAST(:keys AS integer[])) AS k WHERE pg_try_advisory_xact_lock(:task, k)"),
            {"keys": keys, "task": int(task)},
        )
    )
    return [run_id for run_id in run_ids if run_key(run_id) in held]


def wait_for_run(*, session: Session, task: Task, run_id: str) -> None:
    """Hold `run_id` for `task` in this transaction, waiting for whoever holds it now (for a
    change a loop must not write over, such as a reset of the run's detection)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:task, :key)"), {"task": int(task), "key": run_key(run_id)})


def one_writer_at_a_time(*, session: Session, task: Task, run_id: str) -> None:
    """Hold `run_id` for `task` until this transaction ends, so that writers of one run's `task`
    (the ranks of a job reporting at once) read what the one before them wrote: Postgres's
    advisory lock, or SQLite's one write lock, taken now rather than at the first write."""
    if session.get_bind().dialect.name == "postgresql":
        wait_for_run(session=session, task=task, run_id=run_id)
    else:
        session.execute(text("UPDATE runs SET updated_at = updated_at WHERE id = :run_id"), {"run_id": run_id})
