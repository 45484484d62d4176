"""The wandb probe: 81 calls that wandb scripts commonly make, each made through `import holter as
wandb` against a real Holter service and checked for its outcome: stored as wandb would keep it
(read back through the HTTP API), or, where Holter has no such thing (artifacts, files, custom
charts), accepted and explained on stderr without stopping the script.

    python tests/wandb_probe.py --url http://127.0.0.1:8765 [--json report.json]

prints one line per call (ok, or what went wrong) and the count of calls that work; it exits 0
when all of them do. `tests/integration/test_wandb_probe.py` runs it against a live service on
SQLite and Postgres. Run it with another client first on `PYTHONPATH` to count what that client
gets right (each call is made on its own: one that fails or raises does not stop the others).

The list follows issue 32 (the calls its probe found missing, and the behaviours it found wrong)
and the calls wandb's own quickstart, examples and integrations make (wandb/__init__.py's
`__all__`, `wandb.sdk.wandb_run.Run`'s properties, wandb/env.py's variables).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import importlib
import io
import json
import multiprocessing
import multiprocessing.forkserver
import os
import shutil
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CALLS: list[tuple[str, Callable[[Any, Probe], None]]] = []


def call(name: str) -> Callable[[Callable[[Any, Probe], None]], Callable[[Any, Probe], None]]:
    """Register a probe of the call `name` (in the order of this file)."""

    def register(function: Callable[[Any, Probe], None]) -> Callable[[Any, Probe], None]:
        CALLS.append((name, function))
        return function

    return register


@dataclass
class Probe:
    """What a probe needs: the service, a fresh project and folder, and the stderr of its call."""

    url: str
    project: str
    folder: Path
    captured: io.StringIO

    def err(self) -> str:
        return self.captured.getvalue()

    def get(self, path: str, **query: Any) -> Any:
        target = f"{self.url}/api/v1{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        with urllib.request.urlopen(target, timeout=30) as answer:
            return json.loads(answer.read())

    def status_of(self, path: str) -> int:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1{path}", timeout=30) as answer:
                return answer.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def run(self, run_id: str) -> dict[str, Any]:
        return self.get(f"/runs/{urllib.parse.quote(run_id, safe='')}")

    def series(self, run_id: str, metric: str) -> dict[int, Any]:
        data = self.get(f"/runs/{urllib.parse.quote(run_id, safe='')}/metrics/{urllib.parse.quote(metric)}/points")
        return dict(zip(data["steps"], data["values"]))

    def metrics(self, run_id: str) -> set[str]:
        return {m["name"] for m in self.run(run_id)["metrics"]}

    def events(self, run_id: str, kind: str) -> list[dict[str, Any]]:
        return self.get(f"/runs/{urllib.parse.quote(run_id, safe='')}/events", kind=kind)["data"]

    def runs_of(self, project: str) -> list[dict[str, Any]]:
        return self.get("/runs", project=project, limit=100)["data"]

    def init(self, wandb: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("project", self.project)
        return wandb.init(**kwargs)


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables for one probe and put the old ones back."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def expect(condition: Any, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def explained(probe: Probe, *words: str) -> None:
    """The call's stderr says, in a holter note, what became of it."""
    err = probe.err().lower()
    expect(all(word.lower() in err for word in words), f"no note on stderr naming {words!r}: {probe.err()!r}")


# --- init and its arguments -------------------------------------------------------------------


@call("wandb.init(project=, name=, config=)")
def _init_basic(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, name="basic", config={"lr": 0.1, "layers": [2, 3]})
    run.finish()
    stored = p.run(run.id)
    expect(
        (stored["project"], stored["name"], stored["config"]) == (p.project, "basic", {"lr": 0.1, "layers": [2, 3]}),
        f"stored {stored['project']}/{stored['name']} {stored['config']}",
    )


@call("wandb.init(id=) resumes the run")
def _init_id(wandb: Any, p: Probe) -> None:
    run_id = f"probe{uuid.uuid4().hex[:8]}"
    first = p.init(wandb, id=run_id)
    wandb.log({"loss": 2.0})
    first.finish()
    second = p.init(wandb, id=run_id, resume="allow")
    wandb.log({"loss": 1.0})
    second.finish()
    expect(second.resumed and p.series(run_id, "loss") == {0: 2.0, 1: 1.0}, f"{p.series(run_id, 'loss')}")


@call("wandb.init(tags=)")
def _init_tags(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, tags=["baseline", "v2"])
    run.finish()
    expect({"baseline", "v2"} <= set(p.run(run.id)["tags"]), f"tags {p.run(run.id)['tags']}")


@call("wandb.init(notes=)")
def _init_notes(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, notes="why this run")
    run.finish()
    expect(p.run(run.id)["notes"] == "why this run", "notes not stored")


@call("wandb.init(group=)")
def _init_group(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, group="sweep-7")
    run.finish()
    expect("group:sweep-7" in p.run(run.id)["tags"], f"tags {p.run(run.id)['tags']}")


@call("wandb.init(job_type=)")
def _init_job_type(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, job_type="eval")
    run.finish()
    expect("job_type:eval" in p.run(run.id)["tags"], f"tags {p.run(run.id)['tags']}")


@call("wandb.init(entity=)")
def _init_entity(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, entity="lab")
    run.finish()
    expect(p.run(run.id)["project"] == p.project, "run not stored")


@call("wandb.init(mode='offline') and holter sync")
def _init_offline(wandb: Any, p: Probe) -> None:
    spool = p.folder / "spool"
    run = p.init(wandb, mode="offline", spool_dir=spool)
    wandb.log({"loss": 1.0})
    run.finish()
    expect(p.status_of(f"/runs/{run.id}") == 404, "an offline run reached the service")
    expect(list((spool / run.id).glob("*.json")), "nothing in the offline spool")


@call("wandb.init(mode='disabled')")
def _init_disabled(wandb: Any, p: Probe) -> None:
    spool = p.folder / "spool-disabled"
    run = p.init(wandb, mode="disabled", spool_dir=spool)
    wandb.log({"loss": 1.0})
    wandb.config.update({"a": 1})
    run.finish()
    expect(not spool.exists() and not p.runs_of(p.project), "a disabled run left something")


@call("wandb.init(dir=)")
def _init_dir(wandb: Any, p: Probe) -> None:
    folder = p.folder / "dir-arg"
    run = p.init(wandb, dir=str(folder))
    files = run.dir
    run.finish()
    expect(str(files).startswith(str(folder)) and os.path.isdir(files), f"run.dir {files!r} not under {folder}")


@call("wandb.init() twice finishes the first run (reinit)")
def _init_reinit(wandb: Any, p: Probe) -> None:
    first = p.init(wandb)
    second = p.init(wandb, reinit=True)
    second.finish()
    expect(p.run(first.id)["status"] == "finished" and wandb.run is None, "the first run was not finished")


@call("wandb.init(resume='allow')")
def _init_resume(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, resume="allow")
    run.finish()
    expect(p.run(run.id)["status"] == "finished", "not stored")


@call("wandb.init(settings=wandb.Settings(...))")
def _init_settings(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, settings=wandb.Settings(start_method="thread"))
    run.finish()
    explained(p, "settings")


@call("wandb.init(save_code=True, monitor_gym=True)")
def _init_ignored(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, save_code=True, monitor_gym=True)
    run.finish()
    explained(p, "monitor_gym", "save_code")


@call("wandb.init(config_exclude_keys=)")
def _init_exclude(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, config={"lr": 0.1, "secret": "x"}, config_exclude_keys=["secret"])
    run.finish()
    expect(p.run(run.id)["config"] == {"lr": 0.1}, f"config {p.run(run.id)['config']}")


@call("with wandb.init() as run")
def _init_context(wandb: Any, p: Probe) -> None:
    with p.init(wandb) as run:
        run.log({"loss": 1.0})
    try:
        with p.init(wandb) as failed:
            raise KeyError("boom")
    except KeyError:
        pass
    statuses = (p.run(run.id)["status"], p.run(failed.id)["status"])
    expect(statuses == ("finished", "crashed"), f"statuses {statuses}")


# --- log ----------------------------------------------------------------------------------------


@call("wandb.log(dict)")
def _log_plain(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    for value in (3.0, 2.0, 1.0):
        wandb.log({"loss": value})
    run.finish()
    expect(p.series(run.id, "loss") == {0: 3.0, 1: 2.0, 2: 1.0}, f"{p.series(run.id, 'loss')}")


@call("wandb.log(dict, step=)")
def _log_step(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.log({"loss": 2.0}, step=10)
    wandb.log({"loss": 1.0}, step=20)
    run.finish()
    expect(p.series(run.id, "loss") == {10: 2.0, 20: 1.0}, f"{p.series(run.id, 'loss')}")


@call("wandb.log(dict, commit=False)")
def _log_commit(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.log({"loss": 2.0}, commit=False)
    wandb.log({"acc": 0.5})
    run.finish()
    expect(p.series(run.id, "loss") == {0: 2.0} and p.series(run.id, "acc") == {0: 0.5}, "not one step")


@call("run.log(data=...)")
def _log_data_keyword(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    run.log(data={"loss": 1.5})
    run.finish()
    expect(p.series(run.id, "loss") == {0: 1.5}, "not stored")


@call("wandb.log with a nested dict (flattened to a/b)")
def _log_nested(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.log({"train": {"loss": 1.0, "acc": {"top1": 0.5}}})
    run.finish()
    expect({"train/loss", "train/acc/top1"} <= p.metrics(run.id), f"metrics {p.metrics(run.id)}")
    expect(p.series(run.id, "train/acc/top1") == {0: 0.5}, "wrong value")


@call("wandb.Histogram")
def _log_histogram(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.log({"weights": wandb.Histogram(list(range(101)))})
    wandb.log({"grads": wandb.Histogram(np_histogram=([1, 2, 1], [0.0, 1.0, 2.0, 3.0]))})
    run.finish()
    expect(p.series(run.id, "weights/median") == {0: 50.0} and "grads/p95" in p.metrics(run.id), "no quantiles")


@call("wandb.Table / Image / Audio / Video / Html logged")
def _log_media(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    table = wandb.Table(columns=["a", "b"])
    table.add_data(1, 2)
    wandb.log({"samples": table, "picture": wandb.Image(b"..."), "sound": wandb.Audio(b""), "loss": 1.0})
    wandb.log({"clip": wandb.Video(b""), "page": wandb.Html("<b>x</b>"), "loss": 0.5})
    run.finish()
    expect(p.metrics(run.id) == {"loss"}, f"metrics {p.metrics(run.id)}")
    explained(p, "Table values are accepted and not stored")


@call("wandb.plot.* charts logged")
def _log_plot(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    table = wandb.Table(data=[[1, 2], [2, 3]], columns=["x", "y"])
    charts = {
        "line": wandb.plot.line(table, "x", "y", title="t"),
        "scatter": wandb.plot.scatter(table, "x", "y"),
        "bar": wandb.plot.bar(table, "x", "y"),
        "hist": wandb.plot.histogram(table, "y"),
        "series": wandb.plot.line_series([0, 1], [[1, 2]], keys=["k"]),
        "roc": wandb.plot.roc_curve([0, 1], [[0.9, 0.1], [0.2, 0.8]]),
        "pr": wandb.plot.pr_curve([0, 1], [[0.9, 0.1], [0.2, 0.8]]),
        "cm": wandb.plot.confusion_matrix(y_true=[0, 1], preds=[0, 1], class_names=["a", "b"]),
    }
    wandb.log({**charts, "loss": 1.0})
    run.finish()
    expect(p.metrics(run.id) == {"loss"}, f"metrics {p.metrics(run.id)}")
    explained(p, "CustomChart values are accepted and not stored")


# --- config and summary -----------------------------------------------------------------------


@call("wandb.config.update(dict)")
def _config_update(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, config={"lr": 0.1})
    wandb.config.update({"batch": 32})
    run.finish()
    expect(p.run(run.id)["config"] == {"lr": 0.1, "batch": 32}, f"config {p.run(run.id)['config']}")


@call("wandb.config.update(dict, allow_val_change=True)")
def _config_allow_val_change(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, config={"lr": 0.1})
    wandb.config.update({"lr": 0.2}, allow_val_change=True)
    run.finish()
    expect(p.run(run.id)["config"] == {"lr": 0.2}, f"config {p.run(run.id)['config']}")


@call("wandb.config[key] = value / config.key = value")
def _config_items(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.config["warmup"] = 10
    wandb.config.seed = 0
    run.finish()
    expect(p.run(run.id)["config"] == {"warmup": 10, "seed": 0}, f"config {p.run(run.id)['config']}")


@call("wandb.config.setdefaults(dict)")
def _config_setdefaults(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, config={"lr": 0.1})
    wandb.config.setdefaults({"lr": 0.5, "epochs": 3})
    run.finish()
    expect(p.run(run.id)["config"] == {"lr": 0.1, "epochs": 3}, f"config {p.run(run.id)['config']}")


@call("reading wandb.config (key, attribute, get, in, dict)")
def _config_read(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, config={"lr": 0.1})
    readings = (wandb.config["lr"], wandb.config.lr, wandb.config.get("missing", 7), "lr" in wandb.config)
    plain = dict(wandb.config)
    run.finish()
    expect(readings == (0.1, 0.1, 7, True) and plain == {"lr": 0.1}, f"read {readings} {plain}")


@call("wandb.summary[key] = value")
def _summary_set(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.summary["best_acc"] = 0.9
    run.finish()
    expect(p.run(run.id)["summary"] == {"best_acc": 0.9}, f"summary {p.run(run.id)['summary']}")


@call("wandb.summary.update(dict)")
def _summary_update(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.summary.update({"final": 0.3, "epochs": 4})
    run.finish()
    expect(p.run(run.id)["summary"] == {"final": 0.3, "epochs": 4}, f"summary {p.run(run.id)['summary']}")


@call("reading run.summary (the last value logged)")
def _summary_read(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.log({"loss": 2.0})
    wandb.log({"loss": 1.0})
    value = run.summary["loss"]
    run.finish()
    expect(value == 1.0, f"summary read {value}")


@call("wandb.define_metric(name, step_metric=)")
def _define_metric_axis(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.define_metric("epoch")
    wandb.define_metric("val/*", step_metric="epoch")
    wandb.log({"loss": 1.0})
    wandb.log({"val/acc": 0.5, "epoch": 3})
    run.finish()
    expect(p.series(run.id, "val/acc") == {3: 0.5}, f"{p.series(run.id, 'val/acc')}")


@call("wandb.define_metric(name, summary=, goal=)")
def _define_metric_summary(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.define_metric("val/acc", summary="max", goal="maximize")
    wandb.log({"val/acc": 0.5})
    run.finish()
    definition = p.run(run.id)["metric_definitions"].get("val/acc")
    expect(definition == {"summary": "max", "goal": "maximize"}, f"definition {definition}")


# --- alerts, watch, finish --------------------------------------------------------------------


@call("wandb.alert(title, text, level)")
def _alert(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.log({"acc": 0.2})
    wandb.alert(title="accuracy low", text="below 0.5", level=wandb.AlertLevel.WARN)
    run.finish()
    (event,) = p.events(run.id, "alert")
    expect(event["severity"] == "warning" and "accuracy low" in event["summary"], f"event {event}")


@call("wandb.AlertLevel")
def _alert_level(wandb: Any, p: Probe) -> None:
    expect([level.name for level in wandb.AlertLevel] == ["INFO", "WARN", "ERROR"], "levels")


@call("wandb.watch(model, log_freq=)")
def _watch(wandb: Any, p: Probe) -> None:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    run = p.init(wandb)
    wandb.watch(model, log_freq=2)
    for _ in range(4):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        wandb.log({"loss": float(loss)})
    steps = run.step
    run.finish()
    logged = (sorted(p.series(run.id, "loss")), sorted(p.series(run.id, "holter/grad_norm")), steps)
    # wandb's hooks log from the log_freq-th pass on, into the script's step (commit=False)
    expect(logged == ([0, 1, 2, 3], [1, 3], 4), f"loss steps, grad-norm steps, step counter: {logged}")


@call("wandb.unwatch(model)")
def _unwatch(wandb: Any, p: Probe) -> None:
    import torch

    model = torch.nn.Linear(4, 1)
    run = p.init(wandb)
    wandb.watch(model, log_freq=1)
    model(torch.randn(2, 4)).sum().backward()
    wandb.log({"loss": 1.0})
    wandb.unwatch(model)
    model(torch.randn(2, 4)).sum().backward()
    wandb.log({"loss": 0.5})
    run.finish()
    expect(sorted(p.series(run.id, "holter/grad_norm")) == [0], f"{p.series(run.id, 'holter/grad_norm')}")


@call("wandb.finish()")
def _finish(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.finish()
    expect(p.run(run.id)["status"] == "finished" and wandb.run is None, "not finished")


@call("wandb.finish(exit_code=1)")
def _finish_exit_code(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.finish(exit_code=1)
    expect(p.run(run.id)["status"] == "crashed", "not crashed")


@call("wandb.join()")
def _join(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.join()
    expect(p.run(run.id)["status"] == "finished", "not finished")


@call("wandb.run is the current run")
def _current_run(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    current = wandb.run
    wandb.finish()
    expect(current is run and wandb.run is None, "wandb.run")


# --- the run's attributes ---------------------------------------------------------------------


@call("run.id / run.name / run.project")
def _run_identity(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, name="named", id=f"probe{uuid.uuid4().hex[:8]}")
    names = (run.name, run.project)
    run.finish()
    expect(names == ("named", p.project) and p.run(run.id)["name"] == "named", f"{names}")


@call("run.step")
def _run_step(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.log({"loss": 1.0})
    wandb.log({"loss": 1.0})
    step = run.step
    run.finish()
    expect(step == 2, f"step {step}")


@call("run.resumed")
def _run_resumed(wandb: Any, p: Probe) -> None:
    run_id = f"probe{uuid.uuid4().hex[:8]}"
    p.init(wandb, id=run_id).finish()
    again = p.init(wandb, id=run_id)
    resumed = again.resumed
    again.finish()
    expect(resumed is True, "not resumed")


@call("run.url (the run's page)")
def _run_url(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    url = run.url
    run.finish()
    expect(url == f"{p.url}/runs/{run.id}", f"url {url!r}")


@call("run.dir")
def _run_dir(wandb: Any, p: Probe) -> None:
    with environment(WANDB_DIR=str(p.folder / "wandb-dir")):
        run = p.init(wandb)
        path = Path(run.dir) / "model.txt"
        path.write_text("weights")
        run.finish()
    expect(path.read_text() == "weights" and str(path).startswith(str(p.folder)), f"dir {path}")


@call("run.tags (read and set)")
def _run_tags(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, tags=["a"])
    first = run.tags
    run.tags = (*run.tags, "best")
    run.finish()
    expect(first == ("a",) and {"a", "best"} <= set(p.run(run.id)["tags"]), f"{first} {p.run(run.id)['tags']}")


@call("run.notes (read and set)")
def _run_notes(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, notes="first")
    first = run.notes
    run.notes = "second"
    run.finish()
    expect(first == "first" and p.run(run.id)["notes"] == "second", f"{first} {p.run(run.id)['notes']}")


@call("run.group")
def _run_group(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, group="g1")
    values = (run.group, p.init(wandb).group)
    wandb.finish()
    expect(values == ("g1", ""), f"{values}")


@call("run.job_type")
def _run_job_type(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, job_type="train")
    value = run.job_type
    run.finish()
    expect(value == "train", f"{value!r}")


@call("run.sweep_id")
def _run_sweep_id(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    value = run.sweep_id
    run.finish()
    expect(value is None, f"{value!r}")


@call("run.entity")
def _run_entity(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, entity="lab")
    values = (run.entity, p.init(wandb).entity)
    wandb.finish()
    expect(values == ("lab", ""), f"{values}")


@call("run.path")
def _run_path(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, entity="lab")
    path = run.path
    run.finish()
    expect(path == f"lab/{p.project}/{run.id}", f"{path!r}")


@call("run.start_time")
def _run_start_time(wandb: Any, p: Probe) -> None:
    before = time.time()
    run = p.init(wandb)
    value = run.start_time
    run.finish()
    expect(isinstance(value, float) and before - 1 <= value <= time.time(), f"{value!r}")


@call("run.offline")
def _run_offline(wandb: Any, p: Probe) -> None:
    online = p.init(wandb)
    values = [online.offline]
    online.finish()
    offline = p.init(wandb, mode="offline", spool_dir=p.folder / "spool-offline")
    values.append(offline.offline)
    offline.finish()
    expect(values == [False, True], f"{values}")


@call("run.disabled")
def _run_disabled(wandb: Any, p: Probe) -> None:
    online = p.init(wandb)
    values = [online.disabled]
    online.finish()
    disabled = p.init(wandb, mode="disabled")
    values.append(disabled.disabled)
    disabled.finish()
    expect(values == [False, True], f"{values}")


@call("run.name = ... (rename)")
def _run_rename(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, name="before")
    run.name = "after"
    run.finish()
    expect(p.run(run.id)["name"] == "after", f"name {p.run(run.id)['name']}")


@call("run.log_model(path)")
def _run_log_model(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    run.log_model(path=str(p.folder), name="model")
    run.finish()
    explained(p, "log_model", "not stored")


@call("run.log_artifact / use_artifact")
def _run_artifacts(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    artifact = wandb.Artifact("data", type="dataset")
    artifact.add_file(__file__)
    run.log_artifact(artifact)
    run.use_artifact("data:latest")
    wandb.log({"loss": 1.0})
    run.finish()
    expect(p.metrics(run.id) == {"loss"}, "the run's points")
    explained(p, "artifact", "not stored")


@call("wandb.save(path)")
def _save(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.save(__file__)
    run.finish()
    explained(p, "save", "store nothing")


@call("run.log_code()")
def _log_code(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    run.log_code(".")
    run.finish()
    explained(p, "log_code")


@call("wandb.login()")
def _login(wandb: Any, p: Probe) -> None:
    expect(wandb.login() is True, "login")


@call("wandb.termlog")
def _termlog(wandb: Any, p: Probe) -> None:
    wandb.termlog("epoch 3 done")
    explained(p, "epoch 3 done")


@call("wandb.termwarn")
def _termwarn(wandb: Any, p: Probe) -> None:
    wandb.termwarn("lr is high")
    explained(p, "warning lr is high")


@call("wandb.require(...)")
def _require(wandb: Any, p: Probe) -> None:
    wandb.require("core")


@call("wandb.setup()")
def _setup(wandb: Any, p: Probe) -> None:
    wandb.setup()
    run = p.init(wandb)
    run.finish()
    expect(p.run(run.id)["status"] == "finished", "no run after setup")


@call("wandb.mark_preempting()")
def _mark_preempting(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.log({"loss": 1.0})
    wandb.mark_preempting()
    run.finish()
    events = p.events(run.id, "alert")
    expect(any("preempting" in e["summary"] for e in events), f"events {events}")


@call("wandb.sweep(config)")
def _sweep(wandb: Any, p: Probe) -> None:
    sweep_id = wandb.sweep({"method": "grid", "parameters": {"lr": {"values": [0.1, 0.01]}}}, project=p.project)
    expect(isinstance(sweep_id, str) and sweep_id, f"sweep id {sweep_id!r}")
    explained(p, "sweeps run locally")


@call("wandb.agent(sweep_id, function, count=)")
def _agent(wandb: Any, p: Probe) -> None:
    sweep_id = wandb.sweep({"method": "grid", "parameters": {"lr": {"values": [0.1, 0.01]}}}, project=p.project)
    seen: list[Any] = []

    def train() -> None:
        run = wandb.init()
        seen.append((run.id, wandb.config.lr, run.sweep_id))
        wandb.log({"loss": wandb.config.lr})

    wandb.agent(sweep_id, function=train, count=2)
    expect([(lr, sid) for _, lr, sid in seen] == [(0.1, sweep_id), (0.01, sweep_id)], f"trials {seen}")
    for run_id, lr, _ in seen:
        stored = p.run(run_id)
        expect(stored["status"] == "finished" and stored["config"] == {"lr": lr}, f"trial {stored}")
        expect(f"sweep:{sweep_id}" in stored["tags"], f"tags {stored['tags']}")


@call("wandb.Api().run(path) / .runs(project) / .history()")
def _api(wandb: Any, p: Probe) -> None:
    run = p.init(wandb, config={"lr": 0.1})
    for value in (3.0, 2.0):
        wandb.log({"loss": value})
    wandb.summary["best"] = 2.0
    run.finish()
    with environment(HOLTER_URL=p.url):
        api = wandb.Api()
        read = api.run(f"{p.project}/{run.id}")
        history = read.history(keys=["loss"], pandas=False)
        listed = [r.id for r in api.runs(p.project)]
    expect(read.config == {"lr": 0.1} and read.summary == {"best": 2.0}, f"{read.config} {read.summary}")
    expect(history == [{"_step": 0, "loss": 3.0}, {"_step": 1, "loss": 2.0}], f"history {history}")
    expect(run.id in listed, "not listed")


@call("wandb.errors / wandb.Error")
def _errors(wandb: Any, p: Probe) -> None:
    classes = (wandb.errors.Error, wandb.errors.CommError, wandb.errors.UsageError, wandb.errors.AuthenticationError)
    expect(all(issubclass(c, wandb.Error) for c in classes), "classes")
    try:
        wandb.log({"loss": 1.0})  # no run yet
    except wandb.Error:
        return
    raise AssertionError("log() before init() did not raise wandb.Error")


# --- the environment ---------------------------------------------------------------------------


@call("WANDB_MODE=disabled")
def _env_mode(wandb: Any, p: Probe) -> None:
    spool = p.folder / "spool-env-disabled"
    with environment(WANDB_MODE="disabled", HOLTER_SPOOL_DIR=str(spool)):
        run = p.init(wandb)
        wandb.log({"loss": 1.0})
        run.finish()
    expect(not spool.exists() and not p.runs_of(p.project), "WANDB_MODE=disabled made a run")


@call("WANDB_PROJECT / WANDB_NAME / WANDB_RUN_ID")
def _env_identity(wandb: Any, p: Probe) -> None:
    run_id = f"probe{uuid.uuid4().hex[:8]}"
    with environment(WANDB_PROJECT=p.project + "-env", WANDB_NAME="from-env", WANDB_RUN_ID=run_id):
        run = wandb.init()
        run.finish()
    stored = p.run(run_id)
    expect((stored["project"], stored["name"]) == (p.project + "-env", "from-env"), f"{stored['project']}")


@call("WANDB_TAGS / WANDB_NOTES / WANDB_RUN_GROUP / WANDB_JOB_TYPE")
def _env_labels(wandb: Any, p: Probe) -> None:
    with environment(WANDB_TAGS="a,b", WANDB_NOTES="env notes", WANDB_RUN_GROUP="grp", WANDB_JOB_TYPE="jt"):
        run = p.init(wandb)
        run.finish()
    stored = p.run(run.id)
    expect({"a", "b", "group:grp", "job_type:jt"} <= set(stored["tags"]), f"tags {stored['tags']}")
    expect(stored["notes"] == "env notes", f"notes {stored['notes']}")


@call("WANDB_DIR")
def _env_dir(wandb: Any, p: Probe) -> None:
    folder = p.folder / "env-dir"
    with environment(WANDB_DIR=str(folder)):
        run = p.init(wandb)
        files = run.dir
        run.finish()
    expect(str(files).startswith(str(folder)), f"run.dir {files!r}")


@call("WANDB_SILENT")
def _env_silent(wandb: Any, p: Probe) -> None:
    with environment(WANDB_SILENT="true"):
        run = p.init(wandb)
        wandb.termlog("quiet please")
        run.finish()
    expect("View run" not in p.err() and "quiet please" not in p.err(), f"printed {p.err()!r}")


@call("WANDB_ENTITY")
def _env_entity(wandb: Any, p: Probe) -> None:
    with environment(WANDB_ENTITY="team"):
        run = p.init(wandb)
        path = run.path
        run.finish()
    expect(path == f"team/{p.project}/{run.id}", f"{path!r}")


# --- more of what scripts call ------------------------------------------------------------------


@call("wandb.log_artifact / wandb.use_artifact (module level)")
def _module_artifacts(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.log_artifact(__file__, name="code", type="code")
    wandb.use_artifact("data:v0")
    run.finish()
    explained(p, "artifact")


@call("wandb.log_model / use_model (module level)")
def _module_models(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.log_model(str(p.folder), name="m")
    wandb.use_model("m:latest")
    run.finish()
    explained(p, "not stored")


@call("non-finite values logged (NaN, inf)")
def _log_nonfinite(wandb: Any, p: Probe) -> None:
    run = p.init(wandb)
    wandb.log({"loss": float("nan")})
    wandb.log({"loss": float("inf")})
    run.finish()
    expect(p.series(run.id, "loss") == {0: "NaN", 1: "Infinity"}, f"{p.series(run.id, 'loss')}")


# --- running it ---------------------------------------------------------------------------------


def make_call(index: int, url: str) -> dict[str, Any]:
    """Make call number `index` in this process and say how it went."""
    wandb = importlib.import_module("holter")
    name, function = CALLS[index]
    folder = Path(tempfile.mkdtemp(prefix="wandb-probe-"))
    probe = Probe(url, f"probe-{uuid.uuid4().hex[:8]}-{index}", folder, io.StringIO())
    outcome: dict[str, Any] = {"call": name, "ok": True, "why": ""}
    with environment(HOLTER_URL=url, HOLTER_SPOOL_DIR=str(folder / "default-spool")):
        try:
            with contextlib.redirect_stderr(probe.captured):
                function(wandb, probe)
        except Exception as exc:  # noqa: BLE001 - a call that fails is reported, not raised
            outcome = {"call": name, "ok": False, "why": f"{type(exc).__name__}: {exc}"[:400]}
            if os.environ.get("PROBE_TRACEBACKS"):
                traceback.print_exc()
        finally:
            with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(Exception):
                getattr(wandb, "finish", lambda: None)()
    shutil.rmtree(folder, ignore_errors=True)
    return outcome


def run_probe(url: str, only: str | None = None, parallel: int = 1) -> list[dict[str, Any]]:
    """Make every call (or those whose name contains `only`), each in a process of its own (so
    that each meets the client as a script does: nothing said or set up by an earlier call), up to
    `parallel` processes at a time: a call mostly waits on the service, so running several at once
    takes a fraction of the time and leaves each as alone as before (a project and folder its own).

    Each process is forked from a server process that has imported the client and this file and
    made no call (multiprocessing's forkserver): it starts as a fresh script would after `import
    wandb`, without paying for that import again (most of what a call's process cost)."""
    chosen = [(index, name) for index, (name, _) in enumerate(CALLS) if not only or only in name]
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["__main__", "holter"])
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            return list(pool.map(lambda chosen_call: _call_in_a_process(context, url, *chosen_call), chosen))
    finally:
        # Stop the fork server and wait for it: no process outlives the probe, and the CPU of the
        # calls (the server's children) is counted to this process as a child's was before.
        multiprocessing.forkserver._forkserver._stop()  # type: ignore[attr-defined]


def _call_in_a_process(context: Any, url: str, index: int, name: str) -> dict[str, Any]:
    """Make call number `index` in a process of its own and say how it went."""
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_make_call_and_send, args=(index, url, sender), daemon=True)
    process.start()
    sender.close()  # the child's copy is the only one left: its end (or death) ends the pipe
    outcome: dict[str, Any] | None = None
    try:
        if receiver.poll(300):
            outcome = dict(receiver.recv())
    except EOFError:
        pass  # the process ended without an outcome
    finally:
        receiver.close()
        process.join(30)
        if process.exitcode is None:
            process.kill()
            process.join()
    if outcome is None:
        return {"call": name, "ok": False, "why": f"the call's process ended with {process.exitcode}"}
    return outcome


def _make_call_and_send(index: int, url: str, sender: Any) -> None:
    """In the call's process: make the call and send its outcome back."""
    sender.send(make_call(index, url))
    sender.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the Holter service, e.g. http://127.0.0.1:8765")
    parser.add_argument("--json", help="write the outcomes here")
    parser.add_argument("--only", help="make only the calls whose name contains this")
    parser.add_argument(
        "--parallel", type=int, default=4, help="calls made at once, each in its own process (default 4)"
    )
    parser.add_argument("--call", type=int, help=argparse.SUPPRESS)  # one call, in this process
    args = parser.parse_args()
    os.environ.setdefault("HOLTER_SYSTEM_VITALS", "0")
    if args.call is not None:
        print(json.dumps(make_call(args.call, args.url)))
        return 0
    results = run_probe(args.url, args.only, args.parallel)
    for outcome in results:
        print(
            f"{'ok  ' if outcome['ok'] else 'FAIL'}  {outcome['call']}"
            + (f"  ({outcome['why']})" if outcome["why"] else "")
        )
    working = sum(outcome["ok"] for outcome in results)
    print(f"{working} of {len(results)} calls work")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"working": working, "calls": len(results), "results": results}, indent=1)
        )
    return 0 if working == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
