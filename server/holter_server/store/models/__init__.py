"""The tables, as SQLAlchemy 2 typed models, one module per concern.

Every table that grows with the data is keyed by `run_id` first, and every unique constraint
includes it, so the big tables can be hash-partitioned or distributed (Citus) by run without
changing a query: each hot query names one run. Import every model here so that
`Base.metadata` (used by Alembic) knows them all.
"""

from holter_server.store.models.alerts import AlertRuleRow, ChannelRow, DeliveryRow
from holter_server.store.models.annotations import AnnotationRow
from holter_server.store.models.base import Base, UTCDateTime
from holter_server.store.models.config_keys import ConfigKeyRow
from holter_server.store.models.deleted_runs import DeletedRunRow
from holter_server.store.models.events import DetectorStateRow, EventRow, MuteRow
from holter_server.store.models.keys import ApiKeyRow
from holter_server.store.models.points import PointRow
from holter_server.store.models.projects import ProjectSettingsRow
from holter_server.store.models.ranks import RankRow
from holter_server.store.models.references import ReferenceRow
from holter_server.store.models.rollups import RollupRow
from holter_server.store.models.runs import MetricRow, RunRow
from holter_server.store.models.secrets import ServiceSecretRow

__all__ = [
    "AlertRuleRow",
    "AnnotationRow",
    "ApiKeyRow",
    "Base",
    "ChannelRow",
    "ConfigKeyRow",
    "DeletedRunRow",
    "DeliveryRow",
    "DetectorStateRow",
    "EventRow",
    "MetricRow",
    "MuteRow",
    "PointRow",
    "ProjectSettingsRow",
    "RankRow",
    "ReferenceRow",
    "RollupRow",
    "RunRow",
    "ServiceSecretRow",
    "UTCDateTime",
]
