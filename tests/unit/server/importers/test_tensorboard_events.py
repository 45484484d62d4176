import pytest

from holter_server.importers import ImportFormatError, detect_format, read_series

tensorboard = pytest.importorskip("tensorboard")


def write_events(folder, points):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    for tag, step, value in points:
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(event_pb2.Event(step=step, summary=summary))
    writer.close()


def test_tensorboard_folder_scalars_are_read(tmp_path):
    write_events(tmp_path, [("train/loss", 1, 3.0), ("train/loss", 2, 2.5), ("grad_norm", 2, 0.7)])
    series = read_series(tmp_path)
    assert detect_format(tmp_path) == "tensorboard"
    assert series["train/loss"].steps.tolist() == [1, 2] and series["grad_norm"].values.tolist() == [pytest.approx(0.7)]


def test_tensorboard_runs_in_subfolders_are_prefixed(tmp_path):
    (tmp_path / "run_a").mkdir()
    write_events(tmp_path / "run_a", [("loss", 1, 3.0)])
    assert list(read_series(tmp_path)) == ["run_a/loss"]


def test_folder_without_event_files_is_a_format_error(tmp_path):
    with pytest.raises(ImportFormatError, match="no TensorBoard event files"):
        read_series(tmp_path)
