"""`holter import` streams each file format into a real service; the points read back are the file's."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import pytest
from holter.cli import main

from tests.conftest import new_run_id
from tests.foreign_runs import write_mlflow_run, write_wandb_offline_run
from tests.real_curves import load_series
from tests.servers import ServerProcess, free_port


def import_file(server: ServerProcess, path: Path, *extra: str) -> tuple[int, str]:
    run_id = new_run_id()
    code = main(
        [
            "import",
            str(path),
            "--project",
            "imports",
            "--name",
            path.name,
            "--run-id",
            run_id,
            "--url",
            server.url,
            *extra,
        ]
    )
    return code, run_id


def points(server: ServerProcess, run_id: str, metric: str) -> dict:
    return httpx.get(f"{server.url}/api/v1/runs/{run_id}/metrics/{metric}/points").json()


def counts(server: ServerProcess, run_id: str) -> dict[str, int]:
    return {m["name"]: m["count"] for m in httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()["metrics"]}


def test_csv_is_imported_point_for_point(server: ServerProcess, spool_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    rows = ["step,loss,grad_norm"] + [f"{s},{3.0 / (1 + s / 50):.6f},{1.0 + (s % 7) / 10}" for s in range(2000)]
    path.write_text("\n".join(rows) + "\n")
    code, run_id = import_file(server, path)
    assert code == 0
    assert counts(server, run_id) == {"loss": 2000, "grad_norm": 2000}
    loss = points(server, run_id, "loss")
    assert loss["steps"] == list(range(2000))
    assert loss["values"][:2] == [3.0, pytest.approx(3.0 / 1.02, abs=1e-6)]
    run = httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()
    assert run["status"] == "finished" and run["name"] == "metrics.csv" and run["config"]["format"] == "csv"


def test_jsonl_keeps_nan_and_sparse_metrics(server: ServerProcess, spool_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    lines = [{"step": s, "loss": 2.0 - s / 100} for s in range(100)]
    lines += [{"step": 100, "loss": math.nan}, {"step": 100, "eval_loss": 1.5}]  # json writes a bare NaN
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    code, run_id = import_file(server, path)
    assert code == 0
    assert counts(server, run_id) == {"loss": 101, "eval_loss": 1}
    assert points(server, run_id, "loss")["values"][-1] == "NaN"
    assert points(server, run_id, "eval_loss")["steps"] == [100]


def test_trainer_state_gives_train_and_eval_series(server: ServerProcess, spool_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    history = [{"step": s, "loss": 2.0 - s / 1000, "grad_norm": 0.9, "learning_rate": 1e-4} for s in range(10, 510, 10)]
    history += [{"step": 500, "eval_loss": 1.7, "eval_runtime": 3.0}]
    path.write_text(json.dumps({"global_step": 500, "log_history": history}))
    code, run_id = import_file(server, path)
    assert code == 0
    assert counts(server, run_id) == {
        "loss": 50,
        "grad_norm": 50,
        "learning_rate": 50,
        "eval_loss": 1,
        "eval_runtime": 1,
    }
    assert points(server, run_id, "loss")["steps"] == list(range(10, 510, 10))


def test_the_service_s_reading_of_the_whole_run_is_printed(
    server: ServerProcess, spool_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the real whisper-large-v2 fine-tune of the corpus as its trainer_state.json: eval loss up at
    # each of its 5 evals while the train loss falls (tests/data/real_curves, source in labels.json)
    history = []
    for name, key in (("whisper_ja_train_loss", "loss"), ("whisper_ja_eval_loss", "eval_loss")):
        steps, values = load_series(name).arrays()
        history += [{"step": int(s), key: float(v)} for s, v in zip(steps, values)]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 5000, "log_history": sorted(history, key=lambda h: h["step"])}))
    code, _ = import_file(server, path)
    report = capsys.readouterr().out
    assert code == 0 and "eval_loss (eval_loss, 5 points): " in report
    assert "the run, its series read together: warning" in report and "overfitting at steps 1,000–5,000" in report


def test_tensorboard_folder_is_imported_with_its_diagnosis(
    server: ServerProcess, spool_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path))
    for step in range(300):
        loss = 3.0 * math.exp(-step / 60) + 1.0 if step < 200 else math.nan  # diverges to NaN at step 200
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="train/loss", simple_value=loss)])
        writer.add_event(event_pb2.Event(step=step, summary=summary))
    writer.close()
    code, run_id = import_file(server, tmp_path)
    assert code == 0
    stored = points(server, run_id, "train/loss")
    assert stored["steps"] == list(range(300))
    assert stored["values"][0] == pytest.approx(4.0) and stored["values"][200:] == ["NaN"] * 100
    report = capsys.readouterr().out
    assert f"{server.url}/runs/{run_id}" in report
    assert "train/loss (loss, 300 points): critical" in report and "divergence at steps 200–299" in report


def test_large_file_streams_through_in_batches(server: ServerProcess, spool_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    with path.open("w") as handle:
        handle.write("step,loss,grad_norm,tokens_per_s\n")
        for step in range(60_000):
            handle.write(f"{step},{2.0 + (step % 13) / 100},{0.5 + (step % 5) / 50},{50_000 + step % 17}\n")
    code, run_id = import_file(server, path)
    assert code == 0
    assert counts(server, run_id) == {"loss": 60_000, "grad_norm": 60_000, "tokens_per_s": 60_000}


def test_unknown_format_is_refused_before_any_run_is_created(
    server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    code, run_id = import_file(server, path)
    assert code == 2 and "unknown format" in capsys.readouterr().err
    assert httpx.get(f"{server.url}/api/v1/runs/{run_id}").status_code == 404


def test_no_service_is_an_error_not_a_spool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss\n0,1.0\n")
    code = main(
        ["import", str(path), "--project", "imports", "--name", "x", "--url", f"http://127.0.0.1:{free_port()}"]
    )
    assert code == 3 and "no Holter service" in capsys.readouterr().err


def test_original_wall_times_are_kept(server: ServerProcess, spool_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(
        "".join(
            json.dumps({"step": s, "loss": 2.0 - s / 10, "_timestamp": 1_600_000_000.0 + 30 * s}) + "\n"
            for s in range(5)
        )
    )
    code, run_id = import_file(server, path)
    assert code == 0
    stored = points(server, run_id, "loss")
    assert stored["times"] == [1_600_000_000.0 + 30 * s for s in range(5)]


def test_a_file_that_fails_before_any_point_leaves_no_run(
    server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text("{not json\n")
    code, run_id = import_file(server, path)
    assert code == 2 and "not JSON" in capsys.readouterr().err
    assert httpx.get(f"{server.url}/api/v1/runs/{run_id}").status_code == 404


def test_a_file_without_numbers_leaves_no_run(
    server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,note\n1,hello\n")
    code, run_id = import_file(server, path)
    assert code == 2 and "nothing imported" in capsys.readouterr().err
    assert httpx.get(f"{server.url}/api/v1/runs/{run_id}").status_code == 404


def test_a_file_that_fails_midway_keeps_what_was_read_and_exits_non_zero(
    server: ServerProcess, spool_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(10)) + "{torn\n")
    code, run_id = import_file(server, path)
    assert code == 2
    run = httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()
    assert run["status"] == "crashed" and counts(server, run_id) == {"loss": 10}


def test_an_import_into_an_existing_run_exits_non_zero_when_a_metric_is_refused(
    server: ServerProcess, spool_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the read-back of the stored counts cannot judge a run that held points before: the client's
    # own account (finish()'s Delivery) does
    first = tmp_path / "first.csv"
    first.write_text("step,loss\n0,2.0\n1,1.9\n")
    code, run_id = import_file(server, first)
    assert code == 0
    second = tmp_path / "second.csv"
    second.write_text(f"step,loss,{'x' * 300}\n2,1.8,1.0\n3,1.7,1.0\n")
    code = main(["import", str(second), "--project", "imports", "--run-id", run_id, "--url", server.url])
    err = capsys.readouterr().err
    assert code == 4 and "2 points refused" in err and "at most 256 characters" in err
    assert counts(server, run_id) == {"loss": 4}


def test_mlflow_run_is_imported_with_steps_times_and_parameters(
    server: ServerProcess, spool_dir: Path, tmp_path: Path
) -> None:
    store = tmp_path / "mlflow.db"
    history = [(s * 10, 3.0 / (1 + s), 1_650_000_000_000 + 1000 * s) for s in range(50)]
    write_mlflow_run(f"sqlite:///{store}", metrics={"loss": history}, params={"lr": 0.001, "optimizer": "sgd"})
    code, run_id = import_file(server, store)
    assert code == 0
    stored = points(server, run_id, "loss")
    assert stored["steps"] == [s * 10 for s in range(50)]
    assert stored["times"][:2] == [1_650_000_000.0, 1_650_000_001.0]
    config = httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()["config"]
    assert config["lr"] == 0.001 and config["optimizer"] == "sgd" and config["format"] == "mlflow"


def test_wandb_offline_run_is_imported_at_its_training_steps(
    server: ServerProcess, spool_dir: Path, tmp_path: Path
) -> None:
    run_folder = write_wandb_offline_run(tmp_path)
    run_id = new_run_id()
    code = main(["import", str(run_folder), "--project", "imports", "--run-id", run_id, "--url", server.url])
    assert code == 0
    run = httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()
    assert run["name"] == "wandb-baseline" and run["config"]["lr"] == 3e-4 and run["config"]["warmup_steps"] == 100
    assert points(server, run_id, "train/loss")["steps"] == [8, 16, 24, 32, 40]
    assert points(server, run_id, "eval/loss")["values"] == ["NaN"]


def test_options_go_before_or_after_the_subcommand(server: ServerProcess, spool_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss\n0,1.0\n1,0.9\n")
    run_id = new_run_id()
    assert main(["--url", server.url, "import", str(path), "--project", "imports", "--run-id", run_id]) == 0
    assert counts(server, run_id) == {"loss": 2}


def test_the_runs_config_names_the_file_not_its_local_path(
    server: ServerProcess, spool_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss\n0,1.0\n1,0.9\n")
    code, run_id = import_file(server, path)
    config = httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()["config"]
    assert code == 0 and config == {"source": "holter import", "file": "metrics.csv", "format": "csv"}
    assert str(tmp_path) not in json.dumps(config)


def test_a_trainer_states_model_config_becomes_the_runs_config(
    server: ServerProcess, spool_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 2.0}]}))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 12}))
    code, run_id = import_file(server, tmp_path / "trainer_state.json")
    config = httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()["config"]
    assert code == 0 and config["model_type"] == "gpt2" and config["n_layer"] == 12


def test_an_import_with_an_ingest_key_succeeds(
    secured: ServerProcess,
    spool_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.conftest import ADMIN_TOKEN

    with secured.api(key=ADMIN_TOKEN) as admin:
        key = admin.post("/keys", json={"name": "importer", "scope": "ingest", "project": "imports-key"}).json()["key"]
        path = tmp_path / "metrics.csv"
        path.write_text("step,loss\n" + "".join(f"{s},{2.0 - s / 100}\n" for s in range(100)))
        monkeypatch.setenv("HOLTER_API_KEY", key)
        run_id = new_run_id()
        code = main(["import", str(path), "--project", "imports-key", "--run-id", run_id, "--url", secured.url])
        assert code == 0, capsys.readouterr().err
        assert "an ingest key" in capsys.readouterr().err
        stored = {m["name"]: m["count"] for m in admin.get(f"/runs/{run_id}").json()["metrics"]}
    assert stored == {"loss": 100}


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_holters_own_export_is_imported_and_analysed_as_the_metrics_it_holds(
    server: ServerProcess, spool_dir: Path, tmp_path: Path, file_format: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import holter

    original = holter.init(project="imports", name="exported", url=server.url, spool_dir=spool_dir)
    for step in range(300):
        loss = math.nan if step == 250 else 3.0 * math.exp(-step / 80) + 1.0
        original.log_at(
            {"loss": loss, "grad_norm": math.inf if step == 10 else 0.5}, step=step, wall_time=1_700_000_000.0 + step
        )
    original.finish()
    exported = httpx.get(f"{server.url}/api/v1/runs/{original.id}/export", params={"format": file_format})
    path = tmp_path / f"exported.{file_format}"
    path.write_bytes(exported.content)
    code, run_id = import_file(server, path)
    assert code == 0
    for metric in ("loss", "grad_norm"):
        imported, logged = points(server, run_id, metric), points(server, original.id, metric)
        assert (imported["steps"], imported["values"], imported["times"]) == (
            logged["steps"],
            logged["values"],
            logged["times"],
        )
    capsys.readouterr()
    assert main(["analyze", str(path)]) == 1  # the NaN at step 250 is named
    report = capsys.readouterr().out
    assert "loss (loss, 300 points): warning" in report and "loss became NaN at step 250" in report
    assert "grad_norm (grad_norm, 300 points)" in report
