"""Hugging Face `Trainer` integration (TRL's trainers, GRPO included, are `Trainer`s).

    from holter.integrations.transformers import HolterCallback
    trainer = Trainer(..., callbacks=[HolterCallback(project="sft")])

The callback starts a run when training begins (on the main process only), logs every value the
trainer logs at its global step, step time and samples per second at every optimizer step, and
finishes the run when training ends. The names stay the trainer's (`loss`, `grad_norm`,
`learning_rate`, `eval_loss`, TRL's `sampling/sampling_logp_difference/mean`, ...): the service
recognises them. An exception that escapes `trainer.train()` marks the run crashed through
`holter`'s exception hook.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

import holter
from holter.throughput import ThroughputMeter


class HolterCallback(TrainerCallback):
    """Streams a `Trainer`'s logs into Holter.

    `run`: log into this run instead of starting one. Otherwise `holter.init` is called with
    `project`, `name` (default: `args.run_name`), the training arguments plus `config` as the
    config, and `init_kwargs` (`url`, `tags`, `id`, ...). `watch_every`: also watch the model
    with `holter.torch.watch` (per-layer gradient norms and activation RMS) every that many
    optimizer steps.
    """

    def __init__(
        self,
        run: holter.Run | None = None,
        *,
        project: str | None = None,
        name: str | None = None,
        config: Mapping[str, Any] | None = None,
        watch_every: int | None = None,
        **init_kwargs: Any,
    ) -> None:
        self.run = run
        self._owns_run = run is None
        self._project, self._name, self._config = project, name, dict(config or {})
        self._init_kwargs = init_kwargs
        self._watch_every = watch_every
        self._watch: Any = None
        self._meter = ThroughputMeter()

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, model: Any = None,
                       **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        if self.run is None:
            config = {**_json_config(args.to_sanitized_dict()), **self._config}
            self.run = holter.init(project=self._project, name=self._name or args.run_name, config=config, **self._init_kwargs)
        if self._watch_every and model is not None:
            from holter.torch import watch

            # the trainer logs a step's loss at the global step it is about to reach
            self._watch = watch(model, self.run, every=self._watch_every, step=lambda: state.global_step + 1)

    def on_step_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        self._meter.start()  # after set-up, evaluation or saving, the clock starts with the step

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if self.run is None:
            return
        samples = args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
        metrics = self._meter.mark(samples=samples)
        if metrics is not None:
            self.run.log(metrics, step=state.global_step)

    def on_evaluate(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        self._meter.restart()  # evaluation is not a training step

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        self._meter.restart()

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        if self.run is None or not logs:
            return
        metrics = numeric_logs(logs)
        if metrics:
            self.run.log(metrics, step=state.global_step)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if self._watch is not None:
            self._watch.remove()
            self._watch = None
        if self.run is not None and self._owns_run:
            self.run.finish()


def numeric_logs(logs: Mapping[str, Any]) -> dict[str, float]:
    """The numeric values of a trainer log (numbers, numpy and torch scalars; NaN and ±Inf kept)."""
    metrics: dict[str, float] = {}
    for key, value in logs.items():
        if isinstance(value, (str, bool)):
            continue
        try:
            metrics[key] = float(value)
        except (TypeError, ValueError):
            continue  # lists, dicts, multi-element tensors: not a point on a curve
    return metrics


def _json_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The training arguments with values JSON cannot carry (NaN limits, objects) made plain."""
    plain: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, float) and not math.isfinite(value):
            plain[key] = str(value)
        elif value is None or isinstance(value, (str, int, float, bool, list, dict)):
            plain[key] = value
        else:
            plain[key] = str(value)
    return plain
