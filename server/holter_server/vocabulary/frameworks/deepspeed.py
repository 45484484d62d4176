"""DeepSpeed's monitor (TensorBoard, wandb, CSV).

Read from deepspeedai/DeepSpeed:
* deepspeed/runtime/engine.py: `Train/Samples/lr`, `Train/Samples/loss_scale`,
  `Train/Samples/elapsed_time_ms_forward|backward|backward_inner|backward_allreduce|step`,
  `Train/Eigenvalues/ModelBlockParam_{i}`.
* deepspeed/runtime/pipe/engine.py: `Train/Samples/train_loss`, `Train/Samples/eval_loss`.
The x of these series is the number of samples, not the step.
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule

FRAMEWORK = "DeepSpeed"

RULES: tuple[NameRule, ...] = (
    NameRule(r"^train/samples/train_loss$", "loss", "training loss (pipeline engine)"),
    NameRule(r"^train/samples/eval_loss$", "eval_loss", "evaluation loss (pipeline engine)"),
    NameRule(r"^train/samples/elapsed_time_ms_", "step_time", "time of a phase of the step, in ms"),
    NameRule(r"^train/eigenvalues/", "statistic", "Hessian eigenvalue of a block"),
)
