import math
import os

import pytest
from holter_server.importers import ImportFormatError, detect_format, open_source

from tests.foreign_runs import write_mlflow_run

HISTORY = {
    "loss": [(0, 2.5, 1_700_000_000_000), (10, 2.1, 1_700_000_030_500), (20, math.nan, 1_700_000_061_000)],
    "eval_loss": [(10, 2.3, 1_700_000_031_000)],
}
PARAMS = {"lr": 3e-4, "batch_size": 32, "optimizer": "adamw", "fused": True}


@pytest.fixture(autouse=True)
def _file_store_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    # MLflow 3 refuses to open a file store unless told; writing one in the test needs it too
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")


@pytest.mark.parametrize("store", ["sqlite", "file"])
def test_mlflow_run_keeps_steps_wall_times_and_parameters(tmp_path, store):
    path = tmp_path / ("mlflow.db" if store == "sqlite" else "mlruns")
    uri = f"sqlite:///{path}" if store == "sqlite" else path.as_uri()
    write_mlflow_run(uri, metrics=HISTORY, params=PARAMS)
    assert detect_format(path) == "mlflow"
    source = open_source(path)
    points = list(source.points)
    assert source.name == "mlflow-baseline"
    assert source.config == PARAMS  # MLflow stores them as strings; numbers and booleans come back typed
    loss = [p for p in points if p.metric == "loss"]
    assert [p.step for p in loss] == [0, 10, 20] and loss[1].value == 2.1 and math.isnan(loss[2].value)
    assert [p.wall_time for p in loss] == [1_700_000_000.0, 1_700_000_030.5, 1_700_000_061.0]
    assert [(p.metric, p.step) for p in points if p.metric == "eval_loss"] == [("eval_loss", 10)]
    assert [p.step for p in points] == sorted(p.step for p in points)  # one step's points travel together


def test_a_file_store_run_folder_opens_that_run(tmp_path):
    root = tmp_path / "mlruns"
    first = write_mlflow_run(root.as_uri(), name="a", metrics={"loss": [(0, 1.0, 1_700_000_000_000)]}, params={})
    write_mlflow_run(root.as_uri(), name="b", metrics={"loss": [(0, 2.0, 1_700_000_000_000)]}, params={})
    (run_folder,) = [p for p in root.glob("*/*") if p.name == first]
    assert open_source(run_folder).name == "a"


def test_a_store_with_several_runs_asks_which(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ids = [
        write_mlflow_run(uri, name=n, metrics={"loss": [(0, 1.0, 1_700_000_000_000)]}, params={}) for n in ("a", "b")
    ]
    with pytest.raises(ImportFormatError, match="holds 2 runs; pick one with --source-run"):
        open_source(tmp_path / "mlflow.db")
    assert open_source(tmp_path / "mlflow.db", source_run=ids[1]).name == "b"


def test_an_unknown_source_run_is_a_format_error(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_mlflow_run(uri, metrics={"loss": [(0, 1.0, 1_700_000_000_000)]}, params={})
    with pytest.raises(ImportFormatError):
        open_source(tmp_path / "mlflow.db", source_run="0" * 32)
    assert os.environ["MLFLOW_ALLOW_FILE_STORE"] == "true"
