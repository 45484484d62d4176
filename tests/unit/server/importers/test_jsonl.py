import pytest
from holter_server.importers import ImportFormatError, read_series


def test_jsonl_with_step_key_and_nested_metrics(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 10, "loss": 2.0, "train": {"grad_norm": 1.5}}\n\n{"step": 20, "loss": NaN}\n')
    series = read_series(path)
    assert series["loss"].steps.tolist() == [10, 20]
    assert series["train/grad_norm"].values.tolist() == [1.5]


def test_jsonl_without_step_uses_the_line_index(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"loss": 3.0}\n{"loss": 2.0}\n')
    assert read_series(path)["loss"].steps.tolist() == [0, 1]


def test_a_wandb_history_is_read_at_the_trainers_global_step_not_at_the_log_call_count(tmp_path):
    path = tmp_path / "wandb-history.jsonl"
    path.write_text(
        '{"_step": 0, "train/global_step": 10, "train/loss": 2.0, "_runtime": 4.1}\n'
        '{"_step": 1, "train/global_step": 20, "train/loss": 1.8, "_runtime": 8.0}\n'
    )
    series = read_series(path)
    assert list(series) == ["train/loss"] and series["train/loss"].steps.tolist() == [10, 20]


def test_broken_jsonl_line_is_a_format_error_naming_the_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"loss": 3.0}\n{"loss": \n')
    with pytest.raises(ImportFormatError, match=r"metrics.jsonl:2"):
        read_series(path)
