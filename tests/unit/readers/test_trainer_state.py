"""trainer_state.json followed through a Trainer's output folder, with its model's config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from holter_readers import FormatError
from holter_readers.trainer_state import TrainerStateReader


def save_checkpoint(output: Path, step: int, history: list[dict], config: dict | None = None) -> None:
    folder = output / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": history}))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))


def test_an_output_folder_is_read_through_its_newest_checkpoint_once_per_entry(tmp_path: Path) -> None:
    history = [{"step": s, "loss": 3.0 - s / 100} for s in range(10, 60, 10)]
    reader = TrainerStateReader(tmp_path, strict=False)
    assert list(reader.read()) == []
    save_checkpoint(tmp_path, 20, history[:2])
    assert [e.step for e in reader.read()] == [10, 20]
    save_checkpoint(tmp_path, 100, [*history, {"step": 50, "eval_loss": 2.6}])  # 100 sorts after 20 by number, not text
    assert [(e.step, list(e.values)) for e in reader.read()] == [
        (30, ["loss"]),
        (40, ["loss"]),
        (50, ["loss"]),
        (50, ["eval_loss"]),
    ]
    assert list(reader.read()) == []


def test_the_models_config_json_beside_it_is_the_runs_config(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 10, [{"step": 10, "loss": 2.0}], config={"model_type": "gpt2", "n_layer": 12})
    reader = TrainerStateReader(tmp_path / "checkpoint-10" / "trainer_state.json")
    list(reader.read(final=True))
    assert reader.config == {"model_type": "gpt2", "n_layer": 12}


def test_a_config_json_that_is_not_an_object_is_a_format_error(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 10, [{"step": 10, "loss": 2.0}])
    (tmp_path / "checkpoint-10" / "config.json").write_text("[1, 2]")
    with pytest.raises(FormatError, match=r"config\.json: not a JSON object"):
        list(TrainerStateReader(tmp_path).read(final=True))


def test_a_half_written_state_is_read_again_next_time_when_following(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    whole = json.dumps({"log_history": [{"step": 1, "loss": 2.0}]})
    path.write_text(whole[: len(whole) // 2])
    reader = TrainerStateReader(path, strict=False)
    assert list(reader.read()) == [] and reader.warnings == []
    path.write_text(whole)
    assert [e.step for e in reader.read()] == [1]


def test_a_checkpoint_linked_from_outside_the_output_folder_is_not_read(tmp_path: Path) -> None:
    output, elsewhere = tmp_path / "output", tmp_path / "elsewhere"
    save_checkpoint(output, 10, [{"step": 10, "loss": 2.0}])
    save_checkpoint(elsewhere, 90, [{"step": 90, "loss": 9.9}])
    (output / "checkpoint-90").symlink_to(elsewhere / "checkpoint-90")  # the newest, but not this job's
    reader = TrainerStateReader(output, strict=False)
    assert [(e.step, e.values) for e in reader.read()] == [(10, {"loss": 2.0})]
    list(reader.read())
    assert reader.warnings == [
        f"{output / 'checkpoint-90' / 'trainer_state.json'} resolves outside {output}; it is not read"
    ]
