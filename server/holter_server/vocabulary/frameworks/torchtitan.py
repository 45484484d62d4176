"""torchtitan.

Read from pytorch/torchtitan:
* torchtitan/components/metrics.py (`MetricsProcessor.log`): `loss_metrics/global_avg_loss`,
  `loss_metrics/global_max_loss`, `grad_norm`, `throughput(tps)`, `tflops`,
  `time_metrics/end_to_end(s)`, `time_metrics/data_loading(s)`, `time_metrics/data_loading(%)`,
  `memory/max_active(GiB)` (and `(%)`, `max_reserved`, `num_alloc_retries`, `num_ooms`),
  `mfu(%)` (model FLOPs utilisation in percent: `100 * num_flops_per_token * tps / gpu_peak_flops`);
  validation: `validation_metrics/loss`, `validation_metrics/throughput(tps)`,
  `validation_metrics/memory/*`. Older releases logged `wps`/`tps` and `mfu(%)` the same way.
* torchtitan/trainer.py: `n_tokens_seen`; torchtitan/components/optimizer/lr_scheduler.py
  (`get_metrics`): `lr/{Optimizer}` and `lr/{Optimizer}/{i}` (schedules, by the generic rule).
"""

from __future__ import annotations

from holter_server.vocabulary.names import PERCENT, NameRule

FRAMEWORK = "torchtitan"

RULES: tuple[NameRule, ...] = (
    NameRule(
        r"^loss_metrics/global_(avg|max)_loss$",
        "loss",
        "training loss, averaged (or the largest) over data-parallel ranks",
    ),
    NameRule(r"^validation_metrics/loss$", "eval_loss", "validation loss"),
    NameRule(r"^mfu\(%\)$", "mfu", "model FLOPs utilisation, in percent", unit=PERCENT),
    NameRule(r"^validation_metrics/", "statistic", "validation-loop speed and memory"),
    NameRule(r"^time_metrics/end_to_end\(s\)$", "step_time", "step time"),
    NameRule(
        r"^time_metrics/data_loading\(%\)$",
        "data_wait",
        "the share of the step spent loading data, in percent",
        unit=PERCENT,
    ),
    NameRule(
        r"^time_metrics/data_loading\(s\)$", "statistic", "seconds spent loading data (the share is what is read)"
    ),
)
