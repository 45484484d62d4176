"""What the store asks of a database backend: the few statements whose fastest form differs
between Postgres and SQLite (bulk writes, locks, batched reads). Everything else in the store
is SQLAlchemy that runs the same on both.

The store picks the backend of a session with `backend_for(session)`; nothing outside
`store/` knows which database it talks to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import UpdateBase

# One metric's share of a batch: parallel lists of steps, values and wall times (or None).
Column = tuple[Sequence[int], Sequence[float], Sequence[float | None]]
# One metric's summary change after a batch: (metric id, points stored, first step, last step).
SummaryRow = tuple[int, int, int, int]
# Points of one metric in step order: steps, values (NaN and ±Inf as themselves), wall times.
PointColumns = tuple[list[int], list[float], list[float | None]]

# Steps of a conflict shown to the sender: the first few.
CONFLICT_STEPS_SHOWN = 10


@dataclass(frozen=True)
class Conflict:
    """Points of one metric sent again at a stored step with another value (the first was kept)."""

    count: int
    steps: list[int]  # the first few, in step order


@dataclass(frozen=True)
class KnownInsert:
    """A batch inserted under remembered metric ids: per metric, how many points were new, the
    conflicts, and the run's (status, creation moment) after its activity was recorded; `run`
    None when the run's row was not there or the ids were refused (a foreign key: no such metric)."""

    stored: dict[int, int]
    conflicts: dict[int, Conflict]
    run: tuple[str, datetime] | None


class Backend(Protocol):
    """The statements one database does its own way. Every method runs inside the session's
    transaction; none commits."""

    name: str

    def run_status_and_metric_ids(
        self, session: Session, run_id: str, names: list[str]
    ) -> tuple[str | None, datetime | None, dict[str, int]] | None:
        """The run's status and creation moment and the ids of those of `names` it has, in one
        round trip; None when the backend has no faster way than the store's portable queries."""

    def lock_metric_allocation(self, session: Session, run_id: str) -> None:
        """Hold the run's metric-id allocation lock until the transaction ends."""

    def insert_points(
        self, session: Session, run_id: str, by_id: dict[int, Column]
    ) -> tuple[dict[int, int], dict[int, Conflict]]:
        """Store the points not stored yet (first of a step wins); per metric, how many were new,
        and the metrics whose incoming value differs from the stored one at some step."""

    def insert_points_then(
        self, session: Session, run_id: str, by_id: dict[int, Column], then: Callable[[], None]
    ) -> tuple[dict[int, int], dict[int, Conflict]] | None:
        """`insert_points`, with `then`'s writes (statements nobody reads back from) sent in the
        same round trip, run by the database after the insert and before the answer is read;
        None when the backend has no such way (then nothing was done: the caller inserts and
        writes in turn). `then` runs before the new counts are known, so it must write what is
        right when every point was new and leave what it wrote correctable when not."""

    def insert_known_points_then(
        self,
        session: Session,
        run_id: str,
        by_id: dict[int, Column],
        then: Callable[[], None],
        activity: UpdateBase,
        params: dict[str, Any],
    ) -> KnownInsert | None:
        """`insert_points_then` with metric ids the caller remembers rather than read in this
        transaction, and the run's activity recorded in the same round trip (`activity` with
        `params`: the store's activity UPDATE, answering the run's status and creation moment as
        they are now), so that the caller can tell whether the ids were still the run's; None
        when the backend has no such way (then nothing was done)."""

    def update_metric_summaries(
        self, session: Session, run_id: str, rows: list[SummaryRow], last_values: Sequence[float] | None = None
    ) -> None:
        """Bring the metrics' count, first and last step and latest value up to date.
        `last_values`: per row, the value stored at its last step, when the caller knows it (every
        point of the batch was new); else the store reads it from the points."""

    def read_points_from(
        self, session: Session, starts: Sequence[tuple[str, int, int]], limit_each: int
    ) -> dict[tuple[str, int], PointColumns] | None:
        """Per (run, metric id, first step): its points from that step on, at most `limit_each`, in one
        query; None when the backend has no faster way than a query per metric."""

    def touch_detection_rows(self, session: Session, keys: Sequence[tuple[str, int]], moment: datetime) -> bool:
        """Set `updated_at` of these detector_states rows ((run, metric id) each) in one round
        trip; False when the backend has no faster way than the store's portable statement."""

    def save_detected_steps(self, session: Session, rows: Sequence[tuple[str, int, int]], moment: datetime) -> bool:
        """Set `detected_step` (and `updated_at` to `moment`) of these detector_states rows, each
        (run, metric id, step), in one round trip; False when the backend has no faster way than
        the store's portable statement."""

    def writes_together(self, session: Session) -> AbstractContextManager[None]:
        """A block whose statements nobody reads back from go to the database in one round trip."""

    def lock_rollup_slots(self, session: Session, run_id: str, slots: list[int]) -> None:
        """Take the run's rollup locks of these slots (in order) until the transaction ends; a
        backend with one writer at a time needs none."""

    def upsert_rollups(
        self, session: Session, run_id: str, columns: list[np.ndarray], lists: list[list[Any]], statement: RollupUpsert
    ) -> None:
        """Insert or merge rollup rows given as columns (numpy for ordering, lists with NULLs to send)."""

    def fetch_columns(self, session: Session, sql: str, params: Sequence[Any], kinds: str) -> list[np.ndarray]:
        """Run a query whose columns are all BIGINT ("i") or DOUBLE ("f"), its placeholders `%s`,
        `{nan}` where NaN stands in for NULL, and return the columns as numpy arrays."""

    def insert_ignoring_conflicts(self, model: type) -> postgresql.Insert | sqlite.Insert:
        """`INSERT ... ON CONFLICT DO NOTHING` into `model`."""


@dataclass(frozen=True)
class RollupUpsert:
    """The parts of the rollup upsert statement common to both backends."""

    names: str  # the column list
    key: str  # the conflict key's columns
    on_conflict: str  # the SET clause; `{finite_sum}` in it: the backend's sum of two finite sums
    types: tuple[str, ...]  # the Postgres type of each column after the run id
