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


def test_a_text_log_in_a_known_format_is_imported(tmp_path):
    from holter_server.importers import detect_format

    path = tmp_path / "train.log"
    path.write_text(
        "> building model\n"
        + "".join(
            f" [2025-01-01 10:00:00] iteration {it:8d}/     100 | lm loss: {3.0 - it / 100:.6E} | grad norm: 1.000 |\n"
            for it in range(1, 11)
        )
    )
    assert detect_format(path) == "textlog"
    series = read_series(path)
    assert series["lm loss"].steps.tolist() == list(range(1, 11)) and list(series) == ["lm loss", "grad-norm"]


def test_a_text_log_in_no_known_format_is_refused(tmp_path):
    path = tmp_path / "notes.log"
    path.write_text("hello\nworld\n")
    with pytest.raises(ImportFormatError, match="unknown format"):
        read_series(path)
