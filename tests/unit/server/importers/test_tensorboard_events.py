import pytest
from holter_server.importers import ImportFormatError, detect_format, open_source, read_series

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


def test_each_scalar_keeps_its_events_wall_time(tmp_path):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path))
    for step in range(3):
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="loss", simple_value=2.0 - step)])
        writer.add_event(event_pb2.Event(step=step, wall_time=1_700_000_000.0 + 60 * step, summary=summary))
    writer.close()
    assert [p.wall_time for p in open_source(tmp_path).points] == [1_700_000_000.0, 1_700_000_060.0, 1_700_000_120.0]


def test_add_hparams_becomes_the_config_and_its_final_metrics_are_not_curves(tmp_path):
    tensorboard_writer = pytest.importorskip("torch.utils.tensorboard")
    with tensorboard_writer.SummaryWriter(log_dir=str(tmp_path)) as writer:
        for step in range(5):
            writer.add_scalar("train/loss", 2.0 - step / 10, step)
        writer.add_hparams(
            {"lr": 3e-4, "batch_size": 32, "optimizer": "adamw", "warmup": True}, {"hparam/final_loss": 1.6}
        )
    source = open_source(tmp_path)
    points = list(source.points)
    assert source.config == {"lr": 3e-4, "batch_size": 32, "optimizer": "adamw", "warmup": True}
    assert {p.metric for p in points} == {"train/loss"} and len(points) == 5


def test_progress_moves_record_by_record_through_one_big_file(tmp_path):
    write_events(tmp_path, [("loss", step, 1.0) for step in range(1000)])
    source = open_source(tmp_path)
    shares = [source.progress() for _, point in zip(range(500), source.points)]
    assert 0.4 < shares[-1] < 0.6 and shares == sorted(shares)
