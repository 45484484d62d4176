import math
from pathlib import Path

import pytest
from holter_server.importers import ImportFormatError, iter_points, open_source, read_series


def test_csv_with_step_and_several_metric_columns(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("step,loss,grad_norm\n1,2.5,0.9\n2,2.4,\n3,nan,inf\n")
    series = read_series(path)
    assert list(series) == ["loss", "grad_norm"]
    assert series["loss"].steps.tolist() == [1, 2, 3]
    assert math.isnan(series["loss"].values[2])
    assert series["grad_norm"].steps.tolist() == [1, 3] and math.isinf(series["grad_norm"].values[1])


def test_step_value_csv_is_named_after_the_file(tmp_path):
    path = tmp_path / "val_loss.csv"
    path.write_text("step,value\n0,10.8\n125,4.4\n")
    assert list(read_series(path)) == ["val_loss"]


def test_tensorboard_csv_export_skips_wall_time(tmp_path):
    path = tmp_path / "loss.csv"
    path.write_text("Wall time,Step,Value\n1700000000.0,1,3.2\n1700000001.0,2,3.1\n")
    series = read_series(path)
    assert list(series) == ["loss"] and series["loss"].values.tolist() == [3.2, 3.1]


def test_csv_without_step_column_is_a_format_error(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("loss,acc\n1,2\n")
    with pytest.raises(ImportFormatError, match="no step column"):
        read_series(path)


def test_csv_without_numbers_is_a_format_error(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("step,note\n1,hello\n")
    with pytest.raises(ImportFormatError, match="no numeric metric"):
        read_series(path)


def test_non_integer_step_is_a_format_error(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("step,loss\n1.5,2.0\n")
    with pytest.raises(ImportFormatError, match="not a whole number"):
        read_series(path)


def test_tensorboard_csv_export_keeps_each_rows_wall_time(tmp_path):
    path = tmp_path / "loss.csv"
    path.write_text("Wall time,Step,Value\n1700000000.5,1,3.2\n1700000001.25,2,3.1\n")
    points = list(iter_points(path))
    assert [p.wall_time for p in points] == [1700000000.5, 1700000001.25]


def test_millisecond_and_iso_timestamps_become_seconds(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("step,timestamp,loss\n1,1700000000500,2.0\n2,2023-11-14T22:13:21Z,1.9\n")
    assert [p.wall_time for p in iter_points(path)] == [1700000000.5, 1700000001.0]


def test_step_column_names_the_training_step(tmp_path):
    # a W&B CSV export: _step counts log calls, train/global_step is the training step
    path = tmp_path / "export.csv"
    path.write_text("_step,train/global_step,train/loss\n0,8,2.0\n1,16,1.9\n2,24,1.8\n")
    series = read_series(path, step_column="train/global_step")
    assert list(series) == ["train/loss"] and series["train/loss"].steps.tolist() == [8, 16, 24]


def test_a_wandb_export_is_read_at_the_trainers_global_step_not_at_the_log_call_count(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text("_step,train/global_step,train/loss,_runtime\n0,8,2.0,1.5\n1,16,1.9,3.0\n2,24,1.8,4.5\n")
    series = read_series(path)
    assert list(series) == ["train/loss"] and series["train/loss"].steps.tolist() == [8, 16, 24]


def test_unknown_step_column_names_the_columns_there(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text("_step,loss\n0,2.0\n")
    with pytest.raises(ImportFormatError, match=r"no column 'global_step' for --step-column \(columns: _step, loss\)"):
        read_series(path, step_column="global_step")


def test_lightning_hparams_yaml_beside_metrics_csv_becomes_the_config(tmp_path):
    lightning = pytest.importorskip("lightning.pytorch.loggers")
    logger = lightning.CSVLogger(tmp_path, name="run")
    logger.log_hyperparams({"lr": 3e-4, "optimizer": {"name": "adamw", "betas": (0.9, 0.95)}, "layers": 12})
    logger.log_metrics({"train_loss": 2.5}, step=0)
    logger.save()
    source = open_source(Path(logger.log_dir) / "metrics.csv")
    assert source.config["lr"] == 3e-4 and source.config["layers"] == 12
    assert source.config["optimizer"] == {"name": "adamw", "betas": [0.9, 0.95]}
    assert [(p.metric, p.step) for p in source.points] == [("train_loss", 0)]
