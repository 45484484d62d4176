import math

import pytest

from holter_server.importers import ImportFormatError, read_series


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
