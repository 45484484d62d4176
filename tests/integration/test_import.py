"""`holter import` streams each file format into a real service; the points read back are the file's."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import pytest

from holter.cli import main
from tests.conftest import new_run_id
from tests.servers import ServerProcess, free_port


def import_file(server: ServerProcess, path: Path, *extra: str) -> tuple[int, str]:
    run_id = new_run_id()
    code = main(["import", str(path), "--project", "imports", "--name", path.name, "--run-id", run_id, "--url", server.url, *extra])
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
    assert counts(server, run_id) == {"loss": 50, "grad_norm": 50, "learning_rate": 50, "eval_loss": 1, "eval_runtime": 1}
    assert points(server, run_id, "loss")["steps"] == list(range(10, 510, 10))


def test_tensorboard_folder_is_imported_with_its_diagnosis(server: ServerProcess, spool_dir: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
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
    assert f"{server.url}/api/v1/runs/{run_id}" in report
    assert "train/loss (300 points): critical" in report and "divergence at steps 200–299" in report


def test_large_file_streams_through_in_batches(server: ServerProcess, spool_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    with path.open("w") as handle:
        handle.write("step,loss,grad_norm,tokens_per_s\n")
        for step in range(60_000):
            handle.write(f"{step},{2.0 + (step % 13) / 100},{0.5 + (step % 5) / 50},{50_000 + step % 17}\n")
    code, run_id = import_file(server, path)
    assert code == 0
    assert counts(server, run_id) == {"loss": 60_000, "grad_norm": 60_000, "tokens_per_s": 60_000}


def test_unknown_format_is_refused_before_any_run_is_created(server: ServerProcess, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    code, run_id = import_file(server, path)
    assert code == 2 and "unknown format" in capsys.readouterr().err
    assert httpx.get(f"{server.url}/api/v1/runs/{run_id}").status_code == 404


def test_no_service_is_an_error_not_a_spool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss\n0,1.0\n")
    code = main(["import", str(path), "--project", "imports", "--name", "x", "--url", f"http://127.0.0.1:{free_port()}"])
    assert code == 3 and "no Holter service" in capsys.readouterr().err
