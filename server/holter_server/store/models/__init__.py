"""The tables, as SQLAlchemy 2 typed models, one module per concern.

Every table that grows with the data is keyed by `run_id` first, and every unique constraint
includes it, so the big tables can be hash-partitioned or distributed (Citus) by run without
changing a query: each hot query names one run. Import every model here so that
`Base.metadata` (used by Alembic) knows them all.
"""

from holter_server.store.models.base import Base, UTCDateTime
from holter_server.store.models.points import PointRow
from holter_server.store.models.runs import MetricRow, RunRow

__all__ = ["Base", "MetricRow", "PointRow", "RunRow", "UTCDateTime"]
