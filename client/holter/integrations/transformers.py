"""Hugging Face `Trainer` integration (TRL's trainers, GRPO included, are `Trainer`s).

    from holter.integrations.transformers import HolterCallback
    trainer = Trainer(..., callbacks=[HolterCallback(project="sft")])

The callback starts a run when training begins (on the main process only), logs every value the
trainer logs at its global step, and Holter's own step time and samples per second at every
optimizer step (`holter/step_time`, `holter/throughput/samples_per_s`). The trainer's names stay
its own (`loss`, `grad_norm`, `learning_rate`, `eval_loss`, TRL's `step_time` and
`sampling/sampling_logp_difference/mean`, ...): the service recognises them, and Holter's names
never collide with them.

The run stays open after training, as W&B's callback leaves it, so that a later
`trainer.evaluate()` or `trainer.predict()` logs into it (at the final global step); it is
finished when the process exits, when `callback.finish()` is called, or when another run's
training begins (a hyperparameter-search trial, or a `train()` under another `run_name`). An
exception that escapes `trainer.train()` marks the run crashed through `holter`'s exception hook.
"""

from __future__ import annotations

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

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, model: Any = None, **kwargs: Any
    ) -> None:
        if not state.is_world_process_zero:
            return
        if (
            self._owns_run
            and self.run is not None
            and (state.is_hyper_param_search or self._run_name(args) != self.run.name)
        ):
            self.finish()  # another run's training begins: the previous one is complete
        self._start(args)
        if self._watch_every and model is not None:
            from holter.torch import watch

            # the trainer logs a step's loss at the global step it is about to reach
            self._watch = watch(model, self.run, every=self._watch_every, step=lambda: state.global_step + 1)

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
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

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._log(args, state, logs)

    def on_predict(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._log(args, state, metrics)  # `predict()` reports its metrics here, not through `log()`

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._watch is not None:
            self._watch.remove()
            self._watch = None

    def finish(self) -> None:
        """Finish the run this callback started (else it is finished when the process exits)."""
        if self.run is not None and self._owns_run:
            self.run.finish()
            self.run = None

    def _start(self, args: TrainingArguments) -> None:
        if self.run is None:
            # to_dict, not to_sanitized_dict: that one writes None as the string "None"
            config = {**args.to_dict(), **self._config}
            self.run = holter.init(project=self._project, name=self._run_name(args), config=config, **self._init_kwargs)

    def _run_name(self, args: TrainingArguments) -> str | None:
        return self._name or args.run_name

    def _log(self, args: TrainingArguments, state: TrainerState, logs: Mapping[str, Any] | None) -> None:
        if not state.is_world_process_zero or not logs:
            return
        metrics = numeric_logs(logs)
        if not metrics:
            return
        if self.run is None and self._owns_run:
            self._start(args)  # evaluate() or predict() without training first
        if self.run is not None:
            self.run.log(metrics, step=state.global_step)


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
