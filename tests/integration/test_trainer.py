"""A real tiny `Trainer` (config-initialised GPT-2 on CPU) in its own process, streaming through
`HolterCallback` into a real service, on SQLite and Postgres: the run stays open for
`evaluate()` and `predict()` after training and is finished when the process exits; the
trainer's own `grad_norm` and a TRL-style `step_time` are stored beside Holter's
`holter/grad_norm` and `holter/step_time`, none of them dropping another's points."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from tests.conftest import new_run_id
from tests.servers import ServerProcess

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = """
    import sys, time
    import torch, transformers
    from holter.integrations.transformers import HolterCallback

    class TokenDataset(torch.utils.data.Dataset):
        def __init__(self, rows):
            self.ids = torch.randint(0, 50, (rows, 16), generator=torch.Generator().manual_seed(0))
        def __len__(self):
            return len(self.ids)
        def __getitem__(self, index):
            return {"input_ids": self.ids[index], "labels": self.ids[index]}

    class StepTimingTrainer(transformers.Trainer):
        # as TRL's GRPOTrainer does (huggingface/trl:trl/trainer/grpo_trainer.py): training_step
        # times itself and log() merges the mean into the logs as `step_time`
        def training_step(self, *args, **kwargs):
            started = time.perf_counter()
            output = super().training_step(*args, **kwargs)
            self._step_times = getattr(self, "_step_times", []) + [time.perf_counter() - started]
            return output
        def log(self, logs, *args, **kwargs):
            if getattr(self, "_step_times", None) and "loss" in logs:
                logs["step_time"] = sum(self._step_times) / len(self._step_times)
                self._step_times = []
            super().log(logs, *args, **kwargs)

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=50, n_positions=16, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    args = transformers.TrainingArguments(
        output_dir=sys.argv[3], max_steps=6, logging_steps=1, per_device_train_batch_size=4, learning_rate=1e-3,
        report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True, run_name="tiny-gpt2",
    )
    callback = HolterCallback(project="trainer", id=sys.argv[1], url=sys.argv[2], watch_every=1)
    trainer = StepTimingTrainer(model=transformers.GPT2LMHeadModel(config), args=args, train_dataset=TokenDataset(64),
                                eval_dataset=TokenDataset(8), callbacks=[callback])
    trainer.train()
    trainer.evaluate()
    trainer.predict(TokenDataset(8))
    # no finish: the run is finished when the process exits
"""


def test_a_trainer_run_keeps_evaluate_and_predict_and_collides_with_nothing(
    server: ServerProcess, spool_dir: Path, tmp_path: Path
) -> None:
    run_id = new_run_id()
    env = {**os.environ, "HOLTER_SPOOL_DIR": str(spool_dir), "OMP_NUM_THREADS": "1"}
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), run_id, server.url, str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    run = httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()
    assert run["status"] == "finished"
    counts = {m["name"]: m for m in run["metrics"]}
    assert counts["eval_loss"]["last_step"] == 6 and counts["test_loss"]["last_step"] == 6
    # each name is its own series, complete: nothing was dropped as a "duplicate" of another
    assert counts["grad_norm"]["count"] == 6 and counts["holter/grad_norm"]["count"] == 6
    assert counts["step_time"]["count"] == 6 and counts["holter/step_time"]["count"] == 6
    assert "holter/act_norm/transformer.h.1" in counts
    assert "logged again" not in child.stderr and "refused" not in child.stderr


REPORT_TO_SCRIPT = """
    import sys
    import holter  # nothing else of Holter's: report_to="holter" is enough
    import torch, transformers

    class TokenDataset(torch.utils.data.Dataset):
        def __init__(self, rows, seed=0):
            self.ids = torch.randint(0, 50, (rows, 16), generator=torch.Generator().manual_seed(seed))
        def __len__(self):
            return len(self.ids)
        def __getitem__(self, index):
            return {"input_ids": self.ids[index], "labels": self.ids[index]}

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=50, n_positions=16, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    args = transformers.TrainingArguments(output_dir=sys.argv[1], max_steps=6, logging_steps=2,
                                          per_device_train_batch_size=4, learning_rate=1e-3, report_to="holter",
                                          save_strategy="no", use_cpu=True, disable_tqdm=True, run_name="reported",
                                          eval_strategy="steps", eval_steps=3)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=TokenDataset(64), eval_dataset=TokenDataset(8))
    trainer.train()
    trainer.evaluate()                                    # the final evaluation again
    trainer.evaluate(eval_dataset=TokenDataset(8, seed=1))  # another split, same metric names
    print("parameters", model.num_parameters())
"""


def test_report_to_holter_keeps_the_model_config_and_each_evaluation_after_training(
    server: ServerProcess, spool_dir: Path, tmp_path: Path
) -> None:
    run_id = new_run_id()
    env = {
        **os.environ,
        "HOLTER_SPOOL_DIR": str(spool_dir),
        "OMP_NUM_THREADS": "1",
        "HOLTER_URL": server.url,
        "WANDB_RUN_ID": run_id,
        "WANDB_PROJECT": "reported",
    }
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(REPORT_TO_SCRIPT), str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    run = httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()
    assert (run["project"], run["name"], run["status"]) == ("reported", "reported", "finished")
    parameters = int(child.stdout.split("parameters")[-1])
    assert run["config"]["model/num_parameters"] == parameters and run["config"]["n_embd"] == 32
    assert run["config"]["eval_steps"] == 3 and {"train_runtime", "train_loss"} <= set(run["summary"])
    eval_loss = httpx.get(f"{server.url}/api/v1/runs/{run_id}/metrics/eval_loss/points").json()
    assert eval_loss["steps"] == [3, 6, 7, 8]
    assert eval_loss["values"][1] == pytest.approx(eval_loss["values"][2])  # the same model on the same split
    assert "logged again" not in child.stderr and "refused" not in child.stderr
