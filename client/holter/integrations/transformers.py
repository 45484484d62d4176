"""Hugging Face `Trainer` integration (TRL's trainers, GRPO included, are `Trainer`s).

    import holter
    args = TrainingArguments(..., report_to="holter")                      # or:
    trainer = Trainer(..., callbacks=[HolterCallback(project="sft")])

`report_to="holter"` works once `holter` is imported (holter/integrations/report_to.py adds the
name to transformers' table of reporting integrations); importing this module adds it too.

The callback starts a run when training begins (on the main process only), logs every value the
trainer logs at its global step, and Holter's own step time and samples per second at every
optimizer step (`holter/step_time`, `holter/throughput/samples_per_s`). The trainer's names stay
its own (`loss`, `grad_norm`, `learning_rate`, `eval_loss`, TRL's `step_time` and
`sampling/sampling_logp_difference/mean`, ...): the service recognises them, and Holter's names
never collide with them. The config is W&B's callback's (transformers' `WandbCallback.setup`):
the model's config, then the training arguments over it, the PEFT config when there is one, and
`model/num_parameters`; the end-of-training totals (`train_runtime`, `train_loss`,
`train_samples_per_second`, `train_steps_per_second`, `total_flos`) go to the run's summary, as
W&B's callback puts them there rather than on a curve.

The run stays open after training, as W&B's callback leaves it, so that a later
`trainer.evaluate()` or `trainer.predict()` logs into it. W&B keeps every log call as its own
history row, so an evaluation after training is its own point even at the final global step;
Holter keeps one value per metric and step, so an evaluation (or prediction) made outside
training whose metrics already hold a point at that step goes to the next step free for them:
each `evaluate()` stays its own point instead of being refused as the same step "logged again".
The run is finished when the process exits, when `callback.finish()` is called, or when another
run's training begins (a hyperparameter-search trial, or a `train()` under another `run_name`).
An exception that escapes `trainer.train()` marks the run crashed through `holter`'s exception hook.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import transformers.integrations.integration_utils as integration_utils
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

import holter
from holter.current import from_environment
from holter.integrations.report_to import register
from holter.throughput import ThroughputMeter

# logged once, at the end of training: totals that sum the run up (W&B's callback puts these in
# its summary: transformers' WandbCallback.on_log, `single_value_scalars`)
TRAINING_TOTALS = frozenset(
    {"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss", "total_flos"}
)


class HolterCallback(TrainerCallback):
    """Streams a `Trainer`'s logs into Holter.

    `run`: log into this run instead of starting one. Otherwise `holter.init` is called with
    `project` (default: $HOLTER_PROJECT or $WANDB_PROJECT, else `args.project`), `name` (default:
    `args.run_name`), the model's config, the training arguments, `config` and
    `model/num_parameters` as the config, and `init_kwargs` (`url`, `tags`, `id`, ...).
    `watch_every`: also watch the model with `holter.torch.watch` (per-layer gradient norms and
    activation RMS) every that many optimizer steps.
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
        self._training = False
        self._last_step: dict[str, int] = {}  # the last step each metric was logged at

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, model: Any = None, **kwargs: Any
    ) -> None:
        if not state.is_world_process_zero:
            return
        self._training = True
        if (
            self._owns_run
            and self.run is not None
            and (state.is_hyper_param_search or self._run_name(args) != self.run.name)
        ):
            self.finish()  # another run's training begins: the previous one is complete
        self._start(args, model)
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
        model: Any = None,
        **kwargs: Any,
    ) -> None:
        self._log(args, state, logs, model)

    def on_predict(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: Mapping[str, Any] | None = None,
        model: Any = None,
        **kwargs: Any,
    ) -> None:
        self._log(args, state, metrics, model)  # `predict()` reports its metrics here, not through `log()`

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._training = False
        if self._watch is not None:
            self._watch.remove()
            self._watch = None

    def finish(self) -> None:
        """Finish the run this callback started (else it is finished when the process exits)."""
        if self.run is not None and self._owns_run:
            self.run.finish()
            self.run = None
            self._last_step.clear()

    def _start(self, args: TrainingArguments, model: Any) -> None:
        if self.run is None:
            project = self._project or from_environment("project") or getattr(args, "project", None)
            self.run = holter.init(
                project=project,
                name=self._run_name(args),
                config=run_config(args, model, self._config),
                **self._init_kwargs,
            )

    def _run_name(self, args: TrainingArguments) -> str | None:
        return self._name or args.run_name

    def _log(self, args: TrainingArguments, state: TrainerState, logs: Mapping[str, Any] | None, model: Any) -> None:
        if not state.is_world_process_zero or not logs:
            return
        metrics = numeric_logs(logs)
        if not metrics:
            return
        if self.run is None and self._owns_run:
            self._start(args, model)  # evaluate() or predict() without training first
        if self.run is None:
            return
        totals = {name: value for name, value in metrics.items() if name in TRAINING_TOTALS}
        if totals and self._owns_run:
            self.run.summary.update(totals)
            metrics = {name: value for name, value in metrics.items() if name not in TRAINING_TOTALS}
            if set(metrics) <= {"epoch"}:
                return  # the end-of-training totals' own epoch is the last step's
        step = state.global_step
        if not self._training:
            # outside training, metrics already logged at this step (an evaluate() after the
            # final evaluation) go to their next free step: each evaluation its own point
            # (the epoch every log carries does not count: it repeats the last step's)
            step = max([step, *(self._last_step.get(name, -1) + 1 for name in metrics if name != "epoch")])
        self._last_step.update(dict.fromkeys(metrics, step))
        self.run.log(metrics, step=step)


def run_config(args: TrainingArguments, model: Any, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The run's config as W&B's callback builds it (transformers' `WandbCallback.setup`): the
    model's config, the training arguments over it, the PEFT config, `model/num_parameters`, and
    the callback's own `config` over all of them."""
    # to_dict, not to_sanitized_dict: that one writes None as the string "None"
    config: dict[str, Any] = dict(args.to_dict())
    model_config = getattr(model, "config", None)
    if model_config is not None:
        config = {**(model_config if isinstance(model_config, dict) else model_config.to_dict()), **config}
    peft_config = getattr(model, "peft_config", None)
    if peft_config:
        config = {"peft_config": {name: _plain_peft(value) for name, value in dict(peft_config).items()}, **config}
    count = getattr(model, "num_parameters", None)
    if callable(count):
        with contextlib.suppress(AttributeError, TypeError, RuntimeError):  # W&B's callback skips it then too
            config["model/num_parameters"] = int(count())
    return {**config, **extra}


def _plain_peft(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else value


register(integration_utils, HolterCallback)  # report_to="holter" builds this class from now on


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
