"""A wandb script runs against Holter with only its import changed (issue 17), on SQLite and
Postgres: tests/data/wandb_script/train.py runs as a subprocess with `import holter as wandb`
against a live `holter serve`, and everything it logged is on the run: points (each at the step
wandb would plot it at), config, summary, the alert event and its chat message, the histogram's
quantiles. The same script also runs under the real wandb (offline), when it is installed, and
both record the same metrics at the same steps. Offline mode and `holter sync` round-trip too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.receivers import Receiver
from tests.servers import ServerProcess
from tests.waiting import wait_until

SCRIPT = Path(__file__).parents[1] / "data" / "wandb_script" / "train.py"
QUANTILES = ("min", "p5", "p25", "median", "p75", "p95", "max")
EPOCHS, BATCHES = 4, 8  # the script's config: 512 samples in batches of 64


def script_importing(line: str, folder: Path) -> Path:
    """The script as it is, but for its import line."""
    text = SCRIPT.read_text()
    assert text.count("\nimport wandb\n") == 1
    copy = folder / "train.py"
    copy.write_text(text.replace("\nimport wandb\n", f"\n{line}\n"))
    return copy


def run_script(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, str(path)],
        cwd=path.parent,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def run_id_of(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout.strip().splitlines()[-1].removeprefix("done: ")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    hook = Receiver().start()
    yield hook
    hook.stop()


def series(api: httpx.Client, run_id: str, metric: str) -> dict[int, float]:
    answer = api.get(f"/runs/{run_id}/metrics/{metric}/points")
    answer.raise_for_status()
    data = answer.json()
    return dict(zip(data["steps"], data["values"]))


def expected_steps() -> dict[str, list[int]]:
    """Where wandb plots each metric of the script: the train metrics at its log-call counter
    (commit=False joins the loss to the grad norm's step), val/acc at the epoch, the histogram
    and the epoch itself at the counter after each epoch's batches."""
    train = [epoch * (BATCHES + 1) + batch for epoch in range(EPOCHS) for batch in range(BATCHES)]
    ends = [epoch * (BATCHES + 1) + BATCHES for epoch in range(EPOCHS)]
    steps = {"train/loss": train, "train/grad_norm": train, "val/acc": list(range(EPOCHS)), "epoch": ends}
    steps.update({f"weights/{q}": ends for q in QUANTILES})
    return steps


def test_an_unmodified_wandb_script_logs_everything_onto_the_run(
    server: ServerProcess, api: httpx.Client, receiver: Receiver, tmp_path: Path, spool_dir: Path
) -> None:
    # a chat channel for the script's project, with the default rules a new channel gets
    project = "wandb-drop-in"
    channel = api.post(
        "/channels",
        json={"name": f"drop-in-{uuid.uuid4().hex[:6]}", "kind": "webhook", "target": receiver.url, "project": project},
    )
    assert channel.status_code == 201, channel.text
    done = run_script(script_importing("import holter as wandb", tmp_path), {"HOLTER_URL": server.url})
    run_id = run_id_of(done)
    assert "Table values are accepted and not stored" in done.stderr

    run = api.get(f"/runs/{run_id}").json()
    assert run["status"] == "finished" and run["name"] == "logreg" and run["notes"] == "drop-in check"
    assert set(run["tags"]) == {"numpy", "group:sweep-1", "job_type:train"}
    assert run["config"] == {
        "lr": 0.5,
        "epochs": 4,
        "batch_size": 64,
        "features": 8,
        "seed": 0,
        "optimizer": {"name": "sgd", "momentum": 0.0},
    }
    assert run["metric_definitions"]["val/*"] == {"step_metric": "epoch"}
    assert run["metric_definitions"]["train/loss"] == {"summary": "min"}
    stored = {name: sorted(series(api, run_id, name)) for name in expected_steps()}
    assert stored == expected_steps()
    assert {m["name"] for m in run["metrics"]} == set(expected_steps())  # the table left nothing behind

    accuracy = series(api, run_id, "val/acc")
    assert run["summary"] == {"best_val_acc": max(accuracy.values()), "final_acc": accuracy[EPOCHS - 1]}
    bands = [series(api, run_id, f"weights/{q}") for q in QUANTILES]
    for step in expected_steps()["epoch"]:
        assert [band[step] for band in bands] == sorted(
            band[step] for band in bands
        )  # quantiles in order at every step

    (alert,) = api.get(f"/runs/{run_id}/events", params={"kind": "alert"}).json()["data"]
    assert alert["severity"] == "warning" and alert["summary"].startswith("accuracy below target: val/acc ")
    assert alert["start_step"] == expected_steps()["epoch"][-1]
    message = wait_until(
        lambda: [r.json() for r in receiver.received if r.json().get("run_id") == run_id or run_id in r.body.decode()]
    )
    assert "accuracy below target" in json.dumps(message)


def test_offline_mode_keeps_the_run_on_disk_until_holter_sync_sends_it(
    server: ServerProcess, api: httpx.Client, tmp_path: Path, spool_dir: Path
) -> None:
    done = run_script(
        script_importing("import holter as wandb", tmp_path), {"HOLTER_MODE": "offline", "HOLTER_URL": server.url}
    )
    run_id = run_id_of(done)
    assert api.get(f"/runs/{run_id}").status_code == 404  # nothing was sent
    assert f"holter sync {spool_dir / run_id}" in done.stderr

    synced = subprocess.run(
        [sys.executable, "-m", "holter.cli", "sync", str(spool_dir / run_id), "--url", server.url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert synced.returncode == 0, synced.stderr
    run = api.get(f"/runs/{run_id}").json()
    assert run["status"] == "finished" and run["summary"]["final_acc"] > 0.5
    assert {name: sorted(series(api, run_id, name)) for name in expected_steps()} == expected_steps()
    assert api.get(f"/runs/{run_id}/events", params={"kind": "alert"}).json()["count"] == 1
    assert not list((spool_dir / run_id).glob("*.json"))


def test_disabled_mode_sends_nothing_and_writes_no_file(tmp_path: Path, spool_dir: Path) -> None:
    done = run_script(
        script_importing("import holter as wandb", tmp_path),
        {"HOLTER_MODE": "disabled", "HOLTER_URL": "http://127.0.0.1:9"},
    )  # nothing listens there
    assert run_id_of(done) == "disabled"
    assert not spool_dir.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def wandb_history(folder: Path) -> tuple[list[dict], dict, dict]:
    """The history rows, summary and config a real wandb offline run recorded."""
    from holter_server.importers.wandb_offline import HEADER_LEN, _key, _merge_config, _records, run_log
    from wandb.proto import wandb_internal_pb2

    log = run_log(next(folder.glob("wandb/offline-run-*")))
    rows: list[dict] = []
    summary: dict = {}
    config: dict = {}
    with log.open("rb") as handle:
        handle.read(HEADER_LEN)
        for record in _records(handle, log, wandb_internal_pb2.Record):
            kind = record.WhichOneof("record_type")
            if kind == "history":
                rows.append({_key(item): json.loads(item.value_json) for item in record.history.item})
            elif kind == "summary":
                summary.update({_key(item): json.loads(item.value_json) for item in record.summary.update})
            elif kind in ("run", "config"):
                _merge_config(config, (record.run.config if kind == "run" else record.config).update, log)
    return rows, summary, config


def test_the_script_records_the_same_metrics_at_the_same_steps_under_real_wandb(
    server: ServerProcess, api: httpx.Client, tmp_path: Path, spool_dir: Path
) -> None:
    pytest.importorskip("wandb")
    (tmp_path / "wandb_run").mkdir()
    (tmp_path / "holter_run").mkdir()
    run_script(
        script_importing("import wandb", tmp_path / "wandb_run"),
        {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(tmp_path / "wandb_run")},
    )
    rows, wandb_summary, wandb_config = wandb_history(tmp_path / "wandb_run")
    # where wandb plots each number: val/* at its step metric (the epoch), everything else at _step;
    # a histogram or table is stored as nested keys under its name (`weights/_type`, `weights/bins`, ...)
    plotted: dict[str, list[int]] = {}
    ranges: dict[int, tuple[float, float]] = {}
    for row in rows:
        media = {key.removesuffix("/_type"): value for key, value in row.items() if key.endswith("/_type")}
        for key, _value in row.items():
            if key.startswith("_") or any(key.startswith(f"{name}/") for name in media):
                continue
            plotted.setdefault(key, []).append(row["epoch"] if key.startswith("val/") else row["_step"])
        for name, kind in media.items():
            if kind == "histogram":
                for q in QUANTILES:
                    plotted.setdefault(f"{name}/{q}", []).append(row["_step"])
                ranges[row["_step"]] = (row[f"{name}/bins"][0], row[f"{name}/bins"][-1])

    done = run_script(script_importing("import holter as wandb", tmp_path / "holter_run"), {"HOLTER_URL": server.url})
    run_id = run_id_of(done)
    run = api.get(f"/runs/{run_id}").json()
    assert {name: sorted(series(api, run_id, name)) for name in plotted} == {k: sorted(v) for k, v in plotted.items()}
    assert {m["name"] for m in run["metrics"]} == set(plotted)
    assert {k: v for k, v in wandb_config.items() if not k.startswith("_")} == run["config"]
    lowest, highest = series(api, run_id, "weights/min"), series(api, run_id, "weights/max")
    for step, (first_edge, last_edge) in ranges.items():  # wandb's bins span the values' min to max
        assert (lowest[step], highest[step]) == pytest.approx((first_edge, last_edge))
    assert {key: wandb_summary[key] for key in run["summary"]} == run["summary"]
