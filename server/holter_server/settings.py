"""The service's settings: one object, read from HOLTER_* environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    """Where the embedded SQLite store lives when nobody configured a database."""
    return Path(platformdirs.user_data_dir("holter", appauthor=False))


class Settings(BaseSettings):
    """Everything the service can be told. `HOLTER_DATABASE_URL=postgresql://...` selects Postgres."""

    model_config = SettingsConfigDict(env_prefix="HOLTER_", extra="ignore")

    database_url: str | None = Field(default=None, description="SQLAlchemy URL; default: SQLite file in data_dir")
    data_dir: Path = Field(default_factory=default_data_dir)
    host: str = "127.0.0.1"
    port: int = 8765
    migrate_on_start: bool = True
    max_body_bytes: int = Field(default=64 * 1024 * 1024, description="larger request bodies get 413")
    max_points_per_batch: int = Field(default=1_000_000, description="batches with more points get 413")
    max_points_per_read: int = Field(default=1_000_000, description="cap on points one plain range read returns")
    max_json_body_bytes: int = Field(
        default=1024 * 1024, description="JSON bodies (all but points batches) larger than this get 413"
    )
    body_timeout: float = Field(
        default=15.0, description="seconds a request body may pause between chunks before a 408"
    )
    body_total_timeout: float = Field(default=300.0, description="seconds a whole request body may take before a 408")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names (besides loopback) this service answers to "
        "when it listens on loopback: the DNS-rebinding check",
    )
    max_compare_points: int = Field(
        default=200_000, description="a comparison reading more points (run + reference) gets 413"
    )
    max_group_points: int = Field(
        default=2_000_000,
        description="an arm of GET /compare, or a report's seed siblings on one "
        "metric, holding more points than this gets 413 (the report says why it leaves the group out)",
    )
    max_report_events: int = Field(
        default=200, description="most events drawn in a report.html (the rest are listed, not drawn)"
    )
    max_lever_pairs: int = Field(default=50_000, description="most config key × feature pairs the lever finder tests")
    max_lever_keys: int = Field(
        default=10_000, description="most distinct config keys (flattened) across the runs the lever finder reads"
    )
    max_lever_config_bytes: int = Field(
        default=16 * 1024 * 1024,
        description="most bytes of config (as JSON, all runs together) the lever finder reads; more gets 413",
    )
    max_lever_seconds: float = Field(
        default=10.0, description="the lever finder stops testing pairs after this long (partial: says so)"
    )
    max_analyze_metrics: int = Field(
        default=1_000, description="most metrics one POST /runs/{id}/analyze reads (more gets 413: name the metrics)"
    )
    max_analyze_points: int = Field(
        default=5_000_000, description="most points one POST /runs/{id}/analyze reads (more gets 413: name the metrics)"
    )
    max_family_cells: int = Field(default=1_000_000, description="a family read of more metrics × buckets gets 413")
    image_link_ttl: float = Field(
        default=7 * 86_400.0, description="seconds a signed chart link in a chat message stays valid"
    )
    max_connections: int = Field(
        default=1000,
        description="open connections kept: at this many the one idle longest is closed for a new one; "
        "more requests than this in flight get 503",
    )
    max_requests_per_key: int = Field(
        default=32,
        ge=1,
        description="requests one API key may have under way at once; more get 429 (auth on: one key's flood "
        "leaves the service to the others)",
    )
    header_timeout: float = Field(
        default=10.0, description="seconds a client may take to send its request headers (slowloris)"
    )
    auth: Literal["auto", "on", "off"] = Field(default="auto", description="auto: on unless on loopback with no keys")
    admin_token: str | None = Field(default=None, description="a bootstrap admin key (docker-compose secret)")
    partition_points: int = Field(
        default=0,
        ge=0,
        description="Postgres: hash-partition points, rollups and detector states "
        "by run into this many partitions when migrating (an existing store is rebuilt once; 0: as they are)",
    )
    max_metrics_per_run: int = Field(default=10_000, description="a batch that would give a run more metrics gets 422")
    max_config_bytes: int = Field(default=256 * 1024, description="a run config larger than this (as JSON) gets 413")
    max_summary_bytes: int = Field(
        default=64 * 1024,
        description="a run summary larger than this (as JSON, merged) gets 413: it is read with every list of runs",
    )
    background: Literal["process", "thread", "off"] = Field(
        default="process",
        description="where detection, reference drift, alert dispatch and the stall watch run: "
        "process: a worker process `holter serve` starts beside the API (ingest keeps its CPU); "
        "thread: inside the API process; off: elsewhere (holter worker)",
    )
    worker_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="the niceness `holter worker` runs at: when the machine is "
        "full, the API's requests get the CPU first and detection waits",
    )
    db_pool_size: int = Field(
        default=10,
        ge=1,
        description="Postgres connections each process keeps open at most (its API threads wait for one beyond "
        "that); count them into max_connections: (API processes + worker) x this",
    )
    detection_enabled: bool = Field(default=True, description="run live detection inside this service process")
    detection_interval: float = Field(default=0.5, description="seconds between live-detection passes when idle")
    detection_cpu_share: float = Field(
        default=0.25,
        ge=0.0,
        description="share of a core live detection may use on average: "
        "under load each metric is read less often, with more points per read (0: no limit)",
    )
    stall_after: float = Field(default=600.0, description="seconds without points or heartbeat before a run is stalled")
    stall_check_interval: float = Field(default=5.0, description="seconds between stall checks")
    rank_watch_interval: float = Field(
        default=2.0, description="seconds between passes of the ranks watch over distributed jobs' ranks"
    )
    public_url: str | None = Field(default=None, description="address people reach the service at, for links in alerts")
    alert_timeout: float = Field(default=10.0, description="seconds to wait for a chat webhook to answer")
    allow_private_webhooks: bool = Field(
        default=False, description="let channels post to loopback and private addresses"
    )
    alert_give_up_after: float = Field(
        default=86_400.0, description="seconds after which an undeliverable alert is marked failed"
    )

    def base_url(self) -> str:
        """Where links in alerts point: `public_url`, else this service's own address."""
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    def resolved_database_url(self) -> str:
        """The database URL to use, with the driver spelled out (psycopg 3 for Postgres)."""
        url = self.database_url or f"sqlite:///{self.data_dir / 'holter.db'}"
        for prefix in ("postgresql://", "postgres://"):
            if url.startswith(prefix):
                return "postgresql+psycopg://" + url[len(prefix) :]
        return url
