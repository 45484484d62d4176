"""What a command that sends a run needs of the client that sends it.

`holter import` streams through the real client (batches, spool, the delivery account), but the
service's package never imports the client: the `holter` CLI passes itself in (`client=`), and
these protocols say what the command uses of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Delivery(Protocol):
    """The client's account of a run's points (`holter.Delivery`)."""

    refused: int
    spooled: int
    not_durable: int


class SentRun(Protocol):
    """A run being sent (`holter.Run`)."""

    id: str
    resumed: bool

    def log_at(self, metrics: Mapping[str, Any], *, step: int, wall_time: float | None = None) -> None: ...

    def update_config(self, values: Any) -> None: ...

    def join_rank(self, rank: int, world_size: int, *, launcher: str, job: str) -> None: ...

    def finish(self, status: str = ...) -> Delivery: ...


class Client(Protocol):
    """The client package (`holter`): what starts a run."""

    def init(self, **options: Any) -> SentRun: ...
