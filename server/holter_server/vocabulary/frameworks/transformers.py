"""Hugging Face transformers `Trainer`.

Read from huggingface/transformers:
* src/transformers/trainer.py (`_maybe_log_save_evaluate`, `log`): `loss`, `grad_norm`,
  `learning_rate`, `epoch`; at the end `train_loss`, `total_flos`; `num_input_tokens_seen`;
  evaluation metrics prefixed `eval_` (`eval_loss`), predictions `test_`.
* src/transformers/trainer_utils.py (`speed_metrics`): `{split}_runtime`,
  `{split}_samples_per_second`, `{split}_steps_per_second`, `{split}_tokens_per_second`;
  `TrainerMemoryTracker`: `{stage}_mem_cpu_alloc_delta`, `..._mem_gpu_peaked_delta`.
* src/transformers/integrations/integration_utils.py (`rewrite_logs`, what TensorBoardCallback
  and WandbCallback write): `eval_x` becomes `eval/x`, `test_x` `test/x`, everything else `train/x`
  (so `train/loss`, `train/train_runtime`, `eval/samples_per_second`).

The loss, gradient norm, learning rate and epoch fall to the generic rules; what needs this map
is the evaluation loop's speed, which is a property of evaluation, not of training.
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule

FRAMEWORK = "transformers"

RULES: tuple[NameRule, ...] = (
    # evaluation and prediction speed: measured once per evaluation, not a training throughput
    NameRule(
        r"^(eval|test)[_/](samples|steps|tokens)_per_second$",
        "statistic",
        "speed of an evaluation or prediction loop (trainer_utils.speed_metrics)",
    ),
    # the end-of-training summary written once (`train_samples_per_second`, `train/train_samples_per_second`)
    NameRule(
        r"^(train/)?train_(samples|steps|tokens)_per_second$",
        "statistic",
        "whole-run average speed, logged once at the end (trainer_utils.speed_metrics)",
    ),
    NameRule(r"^(train/)?train_loss$", "loss", "average training loss over the whole run, logged once at the end"),
    # TrainerMemoryTracker's deltas
    NameRule(
        r"^(train/|eval/|test/)?(init|train|eval|test|before_init)_mem_(cpu|gpu)",
        "statistic",
        "memory used by a Trainer stage",
    ),
)
