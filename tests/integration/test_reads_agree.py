"""SQLite and Postgres give the same chart reads for the same batches."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from holter_server.api.routes.points import series_body
from holter_server.schemas.points import ReadBatch, read_batch
from holter_server.services.ingest import ingest_batch
from holter_server.services.reads import read_family, read_series
from holter_server.settings import Settings
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory, session_scope, upgrade

pytestmark = pytest.mark.postgres


def batches(seed: int) -> list[ReadBatch]:
    rng = np.random.default_rng(seed)
    steps = np.arange(40_000)
    values = rng.normal(size=len(steps)).cumsum()
    values[rng.choice(len(steps), 20)] = 1e3
    values[rng.choice(len(steps), 5)] = math.nan
    values[rng.choice(len(steps), 5)] = -math.inf
    parts = np.array_split(rng.permutation(len(steps)), 8)
    out = []
    for shuffled in [*parts, parts[2], parts[5][:100]]:  # shuffled, then a re-sent batch and a partial one
        part = np.sort(shuffled)
        out.append(
            read_batch(
                {
                    "metrics": {
                        "loss": {"steps": steps[part].tolist(), "values": values[part].tolist()},
                        "act_norm/layer.1": {"steps": steps[part].tolist(), "values": (values[part] * 2).tolist()},
                    }
                }
            )
        )
    return out


def read_everything(url: str) -> list[dict]:
    upgrade(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    with session_scope(factory) as session:
        runs_store.create_or_resume_run(session=session, run_id="same", project="p", name=None, config={}, tags=[])
    for batch in batches(seed=9):
        with session_scope(factory) as session:
            ingest_batch(session=session, run_id="same", batch=batch, max_metrics=Settings().max_metrics_per_run)
    reads = []
    with factory() as session:
        metrics = runs_store.list_metrics(session=session, run_id="same")
        for metric in metrics:
            for start, end, max_points in [(None, None, 500), (1234, 5678, 300), (39_000, None, 100), (100, 400, 1000)]:
                read = read_series(
                    session=session, metric=metric, start=start, end=end, max_points=max_points, plain_cap=10**6
                )
                reads.append(series_body(read))
        family = read_family(
            session=session,
            run_id="same",
            prefix="act",
            metrics=metrics[:1],
            start=None,
            end=None,
            max_buckets=50,
            stat="mean",
        )
        reads.append({"family": family.values, "nonfinite": family.nonfinite})
    engine.dispose()
    return reads


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def test_sqlite_and_postgres_read_the_same(postgres_url: str, tmp_path: Path) -> None:
    on_sqlite = read_everything(f"sqlite:///{tmp_path / 'agree.db'}")
    on_postgres = read_everything(Settings(database_url=postgres_url).resolved_database_url())
    assert any(body.get("downsampled") for body in on_sqlite)
    for a, b in zip(on_sqlite, on_postgres, strict=True):
        assert same(a, b), (a.get("metric"), a.get("start"), a.get("end"))
