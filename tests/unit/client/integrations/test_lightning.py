"""`HolterLogger` under a real Lightning `Trainer` with a tiny module.

Lightning and torch are imported by the first test that runs, not at collection: every pytest-xdist
worker collects this module, and importing them takes seconds that only one worker needs."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.unit.client.integrations.conftest import RecordingRun


@cache
def _regression_class() -> type:
    """A tiny LightningModule (regression on 4 inputs) that can be told to fail at a step."""
    pytest.importorskip("torch")
    lightning = pytest.importorskip("lightning")
    import torch
    from torch import nn

    class Regression(lightning.LightningModule):
        def __init__(self, lr: float = 0.05, fail_at: int | None = None) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))

        def training_step(self, batch, index):  # type: ignore[no-untyped-def]
            if self.hparams.fail_at is not None and self.global_step == self.hparams.fail_at:
                raise RuntimeError("loss exploded")
            x, y = batch
            loss = nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    return Regression


def regression(**kwargs: Any) -> Any:
    """A new `Regression` module."""
    return _regression_class()(**kwargs)


def holter_logger(**kwargs: Any) -> Any:
    """A new `HolterLogger` (skips without torch or Lightning, as the module does)."""
    _regression_class()
    from holter.integrations.lightning import HolterLogger as Logger

    return Logger(**kwargs)


def fit(tmp_path: Path, logger: Any, module: Any, steps: int = 8) -> None:
    import lightning
    import torch

    torch.manual_seed(0)
    x = torch.randn(64, 4)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    trainer = lightning.Trainer(
        max_steps=steps,
        logger=logger,
        log_every_n_steps=2,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        accelerator="cpu",
    )
    trainer.fit(module, data)


def test_metrics_are_logged_and_the_run_finished(tmp_path: Path, started: list[RecordingRun]) -> None:
    fit(tmp_path, holter_logger(project="pl", name="regression"), regression())
    (run,) = started
    assert [step for step, _ in run.series("train_loss")] == [1, 3, 5, 7]
    assert run.status == "finished" and run.init_kwargs["name"] == "regression"


def test_hyperparameters_become_the_run_config(tmp_path: Path, started: list[RecordingRun]) -> None:
    fit(tmp_path, holter_logger(project="pl", config={"data": "synthetic"}), regression(lr=0.01))
    assert started[0].init_kwargs["config"] == {"data": "synthetic", "lr": 0.01}  # fail_at=None is left out


def test_a_failed_fit_marks_the_run_crashed(tmp_path: Path, started: list[RecordingRun]) -> None:
    with pytest.raises(RuntimeError, match="loss exploded"):
        fit(tmp_path, holter_logger(project="pl"), regression(fail_at=4))
    assert started[0].status == "crashed"


def test_watch_logs_gradient_norms_of_the_watched_module(tmp_path: Path, started: list[RecordingRun]) -> None:
    logger = holter_logger(project="pl")
    module = regression()
    logger.watch(module.net, every=4)
    fit(tmp_path, logger, module)
    run = started[0]
    assert [step for step, _ in run.series("holter/grad_norm")] == [0, 4]
    assert {"holter/grad_norm/0", "holter/grad_norm/2", "holter/act_norm/0", "holter/act_norm/2"} <= {
        name for _, metrics in run.logged for name in metrics
    }
