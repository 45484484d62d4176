"""wandb's public API (`wandb.Api()`), reading runs back from the Holter service:

    api = holter.Api()                            # $HOLTER_URL and $HOLTER_API_KEY
    run = api.run("mnist/3f2a9c")                 # "project/id", "entity/project/id" or an id
    run.config, run.summary, run.name, run.tags, run.state, run.url
    run.history(keys=["loss"], samples=500)       # one row per step (a DataFrame with pandas)
    for row in run.scan_history(keys=["loss"]):   # every point, page by page
        ...
    for run in api.runs("mnist"):                 # the project's runs, newest first
        ...

What wandb's API has and Holter does not (artifacts, sweeps, reports, files, projects' settings)
is accepted: such a call returns None and says so once. `history()` reads each metric downsampled
to `samples` points the way the run page does (a spike is never hidden); `scan_history()` reads
every stored point. Rows hold `_step` and the metrics that have a value at that step; NaN and
infinities come back as floats.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

from holter.errors import CommError
from holter.surface import note_once
from holter.transport import RejectedError, Transport, TransportError

_NONFINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
# the most points the service downsamples a read to (its MAX_CHART_POINTS)
MAX_SAMPLES = 100_000
# wandb's run states for Holter's statuses
_STATES = {"running": "running", "finished": "finished", "crashed": "crashed", "stalled": "running"}


def _number(value: Any) -> Any:
    return _NONFINITE.get(value, value) if isinstance(value, str) else value


class Api:
    """A read-only client of the service's HTTP API, shaped like wandb's `wandb.Api`.

    `overrides` may hold `project` (the default for `runs()`); wandb's `base_url` and `api_key`
    name wandb's service and are not used: Holter's come from `url=`/`api_key=`, else
    $HOLTER_URL/$HOLTER_API_KEY."""

    def __init__(
        self,
        overrides: dict[str, Any] | None = None,
        timeout: float | None = None,
        api_key: str | None = None,
        *,
        url: str | None = None,
    ) -> None:
        from holter.run import DEFAULT_URL

        self.settings = dict(overrides or {})
        self.url = (url or os.environ.get("HOLTER_URL") or DEFAULT_URL).rstrip("/")
        self._transport = Transport(self.url, os.environ.get("HOLTER_API_KEY"), timeout=timeout or 30.0)

    def _get(self, path: str, **query: Any) -> Any:
        shown = {key: value for key, value in query.items() if value is not None}
        target = f"/api/v1{path}" + (f"?{urlencode(shown)}" if shown else "")
        try:
            return self._transport.request("GET", target)
        except TransportError as exc:
            raise CommError(f"the Holter service at {self.url} did not answer: {exc}", exc) from exc
        except RejectedError as exc:
            raise CommError(f"the Holter service refused GET {target}: {exc.detail}", exc) from exc

    def run(self, path: str) -> ApiRun:
        """The run at `path`: "project/id", "entity/project/id" or a bare id."""
        run_id = str(path).strip("/").rsplit("/", 1)[-1]
        return ApiRun(self, self._get(f"/runs/{quote(run_id, safe='')}"))

    def runs(
        self,
        path: str | None = None,
        filters: dict[str, Any] | None = None,
        order: str | None = None,
        per_page: int = 100,
        include_sweeps: bool = True,
        **kwargs: Any,
    ) -> list[ApiRun]:
        """The runs of a project ("project" or "entity/project"; default: overrides' project, else
        every project the key sees), newest first. From wandb's `filters`, `tags` ({"tags": "x"} or
        {"tags": {"$in": ["x"]}}, the first tag) and `state` are applied; the rest is ignored."""
        project = str(path).strip("/").rsplit("/", 1)[-1] if path else self.settings.get("project")
        filters = filters or {}
        tag = filters.get("tags")
        if isinstance(tag, dict):
            tag = next(iter(tag.get("$in") or ()), None)
        if set(filters) - {"tags", "state"}:
            note_once("api filters", "holter: Api.runs() applies the filters 'tags' and 'state' only")
        found: list[ApiRun] = []
        offset, page = 0, max(1, min(int(per_page), 1000))
        while True:
            answer = self._get("/runs", project=project, tag=tag, limit=page, offset=offset)
            found += [ApiRun(self, row) for row in answer["data"]]
            offset += len(answer["data"])
            if not answer["data"] or offset >= answer["count"]:
                break
        state = filters.get("state")
        return [run for run in found if state is None or run.state == state]

    def flush(self) -> None:
        """wandb's cache flush: nothing is cached here."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def unsupported(*args: Any, **kwargs: Any) -> None:
            note_once(
                f"api {name}",
                f"holter: Api().{name}() is accepted and returns None: Holter keeps runs and their curves "
                "(no artifacts, sweeps, reports or files)",
            )

        return unsupported


class ApiRun:
    """A run as the public API reads it (wandb's `wandb.apis.public.Run`)."""

    def __init__(self, api: Api, data: dict[str, Any]) -> None:
        self._api = api
        self._data = data
        self.id: str = data["id"]
        self.name: str | None = data.get("name")
        self.display_name = self.name
        self.project: str = data["project"]
        self.entity = ""
        self.path = [self.project, self.id]
        self.config: dict[str, Any] = dict(data.get("config") or {})
        self.summary: dict[str, Any] = {key: _number(value) for key, value in (data.get("summary") or {}).items()}
        self.tags: list[str] = list(data.get("tags") or [])
        self.notes: str | None = data.get("notes")
        self.state: str = _STATES.get(str(data.get("status")), str(data.get("status")))
        self.created_at = data.get("created_at")
        self.lastHistoryStep = data.get("last_step")
        self.url = f"{api.url}/runs/{quote(self.id)}"

    def _metric_names(self) -> list[str]:
        metrics = self._data.get("metrics")
        if metrics is None:
            self._data = self._api._get(f"/runs/{quote(self.id, safe='')}")
            metrics = self._data.get("metrics") or []
        return [m["name"] for m in metrics]

    def _series(self, name: str, **query: Any) -> dict[str, Any]:
        return self._api._get(f"/runs/{quote(self.id, safe='')}/metrics/{quote(name, safe='/')}/points", **query)

    def history(
        self,
        samples: int = 500,
        keys: list[str] | None = None,
        x_axis: str = "_step",
        pandas: bool = True,
        stream: str = "default",
    ) -> Any:
        """One row per step of the `keys` (default: every metric), each metric downsampled to about
        `samples` points; a pandas DataFrame when pandas is importable and `pandas` is true."""
        rows: dict[int, dict[str, Any]] = {}
        for name in keys or self._metric_names():
            series = self._series(name, max_points=min(max(2, int(samples)), MAX_SAMPLES))
            for step, value in zip(series["steps"], series["values"]):
                rows.setdefault(step, {"_step": step})[name] = _number(value)
        ordered = [rows[step] for step in sorted(rows)]
        if pandas:
            try:
                import pandas as pd
            except ImportError:
                return ordered
            return pd.DataFrame(ordered)
        return ordered

    def scan_history(
        self,
        keys: list[str] | None = None,
        page_size: int = 1000,
        min_step: int | None = None,
        max_step: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every stored point of the `keys` (default: every metric), one row per step in step order."""
        rows: dict[int, dict[str, Any]] = {}
        for name in keys or self._metric_names():
            start = min_step
            while True:
                series = self._series(name, start=start, end=max_step, limit=max(1, int(page_size)))
                for step, value in zip(series["steps"], series["values"]):
                    rows.setdefault(step, {"_step": step})[name] = _number(value)
                if not series.get("truncated") or not series["steps"]:
                    break
                start = series["steps"][-1] + 1
        for step in sorted(rows):
            yield rows[step]

    def update(self) -> None:
        """wandb's `run.update()` saves edits made here; edit tags and notes on the run page (or with
        `PATCH /api/v1/runs/{id}`) instead: this is accepted and sends nothing."""
        note_once("api update", "holter: ApiRun.update() sends nothing; edit tags and notes on the run page")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def unsupported(*args: Any, **kwargs: Any) -> None:
            note_once(
                f"api run {name}", f"holter: ApiRun.{name}() is accepted and returns None (Holter keeps no files)"
            )

        return unsupported

    def __repr__(self) -> str:
        return f"<Run {self.project}/{self.id} ({self.state})>"

    def to_json(self) -> str:
        """The run as the service answered, as JSON."""
        return json.dumps(self._data)
