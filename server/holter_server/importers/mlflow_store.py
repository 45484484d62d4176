"""MLflow runs, read from its SQLite store (`mlflow.db`) or its file store (`mlruns/`) with the
`mlflow` package (`pip install 'holter[mlflow]'`): every metric's history with its steps and
wall times, and the run's parameters as its config.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holter_server.importers.series import ImportFormatError, Point, Source

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_mlflow_sqlite(path: Path) -> bool:
    """An SQLite file: MLflow's database store is the only kind Holter imports."""
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def file_store_root(path: Path) -> tuple[Path, str | None] | None:
    """(the store's root, the run id when `path` is one run's folder) for a folder of MLflow's
    file store (`mlruns/`, an experiment folder or a run folder); None for any other folder."""
    if not path.is_dir():
        return None
    if (path / "meta.yaml").is_file() and (path / "metrics").is_dir():
        return path.parent.parent, path.name
    if (path / "meta.yaml").is_file() and any(path.glob("*/metrics")):
        return path.parent, None
    if any(path.glob("*/meta.yaml")) and (any(path.glob("*/*/metrics")) or (path / ".trash").is_dir()):
        return path, None
    return None


def open_mlflow(path: Path, *, run_id: str | None = None) -> Source:
    """Open one MLflow run of the store at `path` (the only one, or `run_id`)."""
    try:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ImportFormatError(
            "reading MLflow runs needs the 'mlflow' package (pip install 'holter[mlflow]')"
        ) from None
    if is_mlflow_sqlite(path):
        uri = f"sqlite:///{path.resolve()}"
    else:
        located = file_store_root(path)
        if located is None:
            raise ImportFormatError(f"{path}: not an MLflow store")
        root, folder_run = located
        run_id = run_id or folder_run
        # MLflow 3 keeps its file store readable only when asked: this is a read of an existing store
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        uri = root.resolve().as_uri()
    try:
        client = MlflowClient(tracking_uri=uri)
        run = client.get_run(run_id or _only_run(client, path))
    except MlflowException as exc:
        raise ImportFormatError(f"{path}: {exc.message}") from None
    keys = sorted(run.data.metrics)
    read = [0]

    def points() -> Iterator[Point]:
        histories = []
        for key in keys:
            history = sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: (m.step, m.timestamp))
            histories.append(
                [
                    Point(key, int(m.step), float(m.value), m.timestamp / 1000.0 if m.timestamp else None)
                    for m in history
                ]
            )
            read[0] += 1
        # in step order across metrics, so that the points of one step travel together
        yield from heapq.merge(*histories, key=lambda p: p.step)

    return Source(
        path=path,
        format="mlflow",
        points=points(),
        config=_parameters(run.data.params),
        progress=lambda: read[0] / max(len(keys), 1),
        name=run.info.run_name,
    )


def _only_run(client: Any, path: Path) -> str:
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, max_results=50) if experiments else []
    if len(runs) == 1:
        return str(runs[0].info.run_id)
    if not runs:
        raise ImportFormatError(f"{path}: the MLflow store holds no run")
    listed = ", ".join(f"{r.info.run_id} ({r.info.run_name})" for r in runs[:10])
    raise ImportFormatError(
        f"{path}: the MLflow store holds {len(runs)} runs; pick one with --source-run (e.g. {listed})"
    )


def _parameters(params: dict[str, str]) -> dict[str, Any]:
    """MLflow keeps parameters as strings; numbers and booleans become themselves again."""
    return {key: _typed(value) for key, value in params.items()}


def _typed(text: str) -> Any:
    if text in ("True", "False", "true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text
