"""PyTorch Lightning integration: `HolterLogger`, a Lightning `Logger`.

    from holter.integrations.lightning import HolterLogger
    logger = HolterLogger(project="vision", name="resnet-baseline")
    logger.watch(model.backbone, every=50)        # optional: per-layer gradient and activation norms
    trainer = lightning.Trainer(logger=logger, ...)

Works with `lightning` and with the older `pytorch_lightning` package. The run starts when
Lightning sets the trainer up; the module's saved hyperparameters are merged into its config as
they are, nested ones included (stored as JSON, read by dotted key such as `optimizer.betas`;
see `holter.config`); a fit that raises finishes the run as crashed.
"""

from __future__ import annotations

import os
import uuid
from argparse import Namespace
from collections.abc import Mapping
from typing import Any

try:
    from lightning.pytorch.loggers.logger import Logger
    from lightning.pytorch.utilities import rank_zero_only
except ImportError:  # the package's name before Lightning 2.0
    from pytorch_lightning.loggers.logger import Logger  # type: ignore[no-redef]
    from pytorch_lightning.utilities import rank_zero_only  # type: ignore[no-redef]

import holter


class HolterLogger(Logger):
    """Sends Lightning's metrics to a Holter run; `init_kwargs` go to `holter.init` (`url`, `tags`, ...)."""

    def __init__(
        self,
        project: str | None = None,
        name: str | None = None,
        *,
        id: str | None = None,
        config: Mapping[str, Any] | None = None,
        **init_kwargs: Any,
    ) -> None:
        super().__init__()
        # chosen now so that Lightning can read `version` before the run starts (with its config)
        self._id = id or os.environ.get("HOLTER_RUN_ID") or uuid.uuid4().hex[:16]
        self._project, self._name = project, name
        self._config = dict(config or {})
        self._init_kwargs = init_kwargs
        self._run: holter.Run | None = None
        self._watches: list[Any] = []

    @property
    def name(self) -> str:
        return self._project or "default"

    @property
    def version(self) -> str:
        return self._id

    @property
    @rank_zero_only
    def experiment(self) -> holter.Run:
        """The Holter run, started on first use."""
        if self._run is None:
            self._run = holter.init(
                project=self._project, name=self._name, config=self._config, id=self._id, **self._init_kwargs
            )
        return self._run

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        """Merge the hyperparameters (a dict, a Namespace, nested dicts and dataclasses) into the run's config."""
        self.experiment.update_config(params)

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self.experiment.log({k: float(v) for k, v in metrics.items()}, step=step)

    @rank_zero_only
    def watch(self, model: Any, every: int = 50) -> Any:
        """Watch `model` (the module your `training_step` calls) with `holter.torch.watch`; a
        step is one backward pass, Lightning's global step when gradients are not accumulated."""
        from holter.torch import watch

        handle = watch(model, self.experiment, every=every)
        self._watches.append(handle)
        return handle

    @rank_zero_only
    def finalize(self, status: str) -> None:
        """Lightning's "success" (or "finished") finishes the run; "failed" marks it crashed."""
        for handle in self._watches:
            handle.remove()
        self._watches.clear()
        if self._run is not None:
            self._run.finish("crashed" if status == "failed" else "finished")
