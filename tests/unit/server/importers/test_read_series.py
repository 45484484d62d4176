import pytest
from holter_server.importers import ImportFormatError, iter_points, read_series


def test_missing_file_is_a_format_error(tmp_path):
    with pytest.raises(ImportFormatError, match="no such file"):
        read_series(tmp_path / "nope.csv")


def test_unknown_extension_is_a_format_error(tmp_path):
    path = tmp_path / "run.xlsx"
    path.write_text("x")
    with pytest.raises(ImportFormatError, match="unknown format"):
        read_series(path)


def test_points_stream_lazily_row_by_row(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("step,loss\n1,2.0\n2,oops\n3,1.0\n")
    points = iter_points(path)
    assert next(points) == ("loss", 1, 2.0, None)
