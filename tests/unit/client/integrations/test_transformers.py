"""`HolterCallback` on a real `Trainer` with a tiny config-initialised GPT-2 (no download)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import torch
from holter.integrations.transformers import HolterCallback, numeric_logs

from tests.unit.client.integrations.conftest import RecordingRun


class TokenDataset(torch.utils.data.Dataset):
    def __init__(self, rows: int = 64) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 50, (rows, 16), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def make_trainer(tmp_path: Path, callback: HolterCallback, **arguments) -> transformers.Trainer:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=50, n_positions=16, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(config)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=6,
        logging_steps=2,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        run_name="tiny-gpt2",
        **arguments,
    )
    return transformers.Trainer(
        model=model, args=args, train_dataset=TokenDataset(), eval_dataset=TokenDataset(8), callbacks=[callback]
    )


def test_trainer_logs_arrive_at_their_global_step(tmp_path: Path, started: list[RecordingRun]) -> None:
    make_trainer(tmp_path, HolterCallback(project="hf")).train()
    (run,) = started
    assert [step for step, _ in run.series("loss")] == [2, 4, 6]
    assert [step for step, _ in run.series("grad_norm")] == [2, 4, 6]
    assert all(value > 0 for _, value in run.series("learning_rate"))


def test_the_run_stays_open_after_training_for_evaluate_and_predict(
    tmp_path: Path, started: list[RecordingRun]
) -> None:
    callback = HolterCallback(project="hf")
    trainer = make_trainer(tmp_path, callback)
    trainer.train()
    assert started[0].status == "running"
    trainer.evaluate()
    trainer.predict(TokenDataset(8))
    (run,) = started
    assert [step for step, _ in run.series("eval_loss")] == [6]
    assert [step for step, _ in run.series("test_loss")] == [6]
    callback.finish()
    assert run.status == "finished"


def test_evaluate_without_training_starts_the_run(tmp_path: Path, started: list[RecordingRun]) -> None:
    make_trainer(tmp_path, HolterCallback(project="hf")).evaluate()
    (run,) = started
    assert [step for step, _ in run.series("eval_loss")] == [0] and run.init_kwargs["name"] == "tiny-gpt2"


def test_training_under_another_run_name_finishes_the_previous_run(tmp_path: Path, started: list[RecordingRun]) -> None:
    callback = HolterCallback(project="hf")
    trainer = make_trainer(tmp_path, callback)
    trainer.train()
    trainer.train()  # the same run again: its steps continue in the same Holter run
    assert len(started) == 1
    trainer.args.run_name = "second"
    trainer.train()
    assert [run.status for run in started] == ["finished", "running"]
    assert started[1].init_kwargs["name"] == "second" and started[1].series("loss")


def test_run_is_started_with_the_training_arguments_as_config(tmp_path: Path, started: list[RecordingRun]) -> None:
    make_trainer(tmp_path, HolterCallback(project="hf", config={"dataset": "tiny"}, tags=["test"])).train()
    (run,) = started
    assert run.init_kwargs["project"] == "hf" and run.init_kwargs["name"] == "tiny-gpt2"
    assert run.init_kwargs["config"]["learning_rate"] == 1e-3 and run.init_kwargs["config"]["dataset"] == "tiny"
    assert run.init_kwargs["tags"] == ["test"]


def test_eval_loss_is_logged_at_the_step_it_was_measured(tmp_path: Path, started: list[RecordingRun]) -> None:
    make_trainer(tmp_path, HolterCallback(project="hf"), eval_strategy="steps", eval_steps=3).train()
    assert [step for step, _ in started[0].series("eval_loss")] == [3, 6]


def test_step_time_and_samples_per_second_are_logged_every_step(tmp_path: Path, started: list[RecordingRun]) -> None:
    make_trainer(tmp_path, HolterCallback(project="hf")).train()
    run = started[0]
    assert [step for step, _ in run.series("holter/step_time")] == [1, 2, 3, 4, 5, 6]
    for (_, seconds), (_, rate) in zip(run.series("holter/step_time"), run.series("holter/throughput/samples_per_s")):
        assert rate == pytest.approx(4 / seconds)


def test_watch_every_logs_per_layer_norms_at_the_trainers_steps(tmp_path: Path, started: list[RecordingRun]) -> None:
    make_trainer(tmp_path, HolterCallback(project="hf", watch_every=2)).train()
    run = started[0]
    steps = [step for step, metrics in run.logged if "holter/grad_norm/transformer.h.0" in metrics]
    assert steps == [2, 4, 6]
    assert any("holter/act_norm/transformer.h.1" in metrics for step, metrics in run.logged if step == 2)


def test_a_given_run_is_used_and_left_open(tmp_path: Path) -> None:
    run = RecordingRun()
    make_trainer(tmp_path, HolterCallback(run)).train()
    assert run.series("loss") and run.status == "running"


def test_numeric_logs_keeps_numbers_and_drops_the_rest() -> None:
    logs = {"loss": 1.5, "nan": math.nan, "t": torch.tensor(2.0), "flag": True, "name": "x", "hist": [1, 2]}
    assert numeric_logs(logs) == {"loss": 1.5, "nan": pytest.approx(math.nan, nan_ok=True), "t": 2.0}


def test_trl_mismatch_names_are_read_as_the_mismatch_signal() -> None:
    from holter_server.vocabulary import understand

    names = ["sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max"]
    assert {understand(name).kind for name in numeric_logs(dict.fromkeys(names, 0.01))} == {"logprob_mismatch"}


def test_the_config_holds_the_model_config_and_its_parameter_count_as_wandbs_does(
    tmp_path: Path, started: list[RecordingRun]
) -> None:
    # transformers' WandbCallback.setup: {**model.config.to_dict(), **args.to_dict()}, then model/num_parameters
    trainer = make_trainer(tmp_path, HolterCallback(project="hf"))
    trainer.train()
    config = started[0].init_kwargs["config"]
    assert (config["n_layer"], config["vocab_size"], config["model_type"]) == (2, 50, "gpt2")
    assert config["model/num_parameters"] == trainer.model.num_parameters() and config["learning_rate"] == 1e-3


def test_the_training_totals_go_to_the_summary_not_to_curves(tmp_path: Path, started: list[RecordingRun]) -> None:
    make_trainer(tmp_path, HolterCallback(project="hf")).train()
    run = started[0]
    assert {"train_runtime", "train_loss", "train_samples_per_second", "total_flos"} <= set(run.summary)
    assert not any(name in metrics for _, metrics in run.logged for name in ("train_runtime", "train_loss"))


def test_evaluations_after_training_are_each_their_own_point(tmp_path: Path, started: list[RecordingRun]) -> None:
    trainer = make_trainer(tmp_path, HolterCallback(project="hf"), eval_strategy="steps", eval_steps=3)
    trainer.train()
    trainer.evaluate()  # the final evaluation again: W&B keeps it as its own history row
    trainer.evaluate(eval_dataset=TokenDataset(4))
    assert [step for step, _ in started[0].series("eval_loss")] == [3, 6, 7, 8]
    assert [step for step, _ in started[0].series("loss")] == [2, 4, 6]


def test_report_to_holter_builds_the_callback(tmp_path: Path, started: list[RecordingRun]) -> None:
    trainer = make_trainer(tmp_path, HolterCallback(project="hf"))
    trainer.args.report_to = ["holter"]
    reported = transformers.Trainer(
        model=trainer.model, args=trainer.args, train_dataset=TokenDataset(), eval_dataset=TokenDataset(8)
    )
    assert [type(c).__name__ for c in reported.callback_handler.callbacks if isinstance(c, HolterCallback)] == [
        "HolterCallback"
    ]
    reported.train()
    assert started[0].init_kwargs["name"] == "tiny-gpt2" and started[0].series("loss")


def test_the_project_comes_from_the_environment_then_the_training_arguments(
    tmp_path: Path, started: list[RecordingRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOLTER_PROJECT", raising=False)
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    make_trainer(tmp_path, HolterCallback(), project="from-args").train()
    monkeypatch.setenv("WANDB_PROJECT", "from-env")
    make_trainer(tmp_path, HolterCallback()).train()
    assert [run.init_kwargs["project"] for run in started] == ["from-args", "from-env"]
