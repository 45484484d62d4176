"""A run's config reaches the service however it is set (wandb's habits: `config.update`, item
and attribute assignment), nested configs are stored as JSON (dataclasses, argparse Namespaces,
Lightning's nested hyperparameters), and `None` values are left out with a note. On SQLite and
Postgres."""

from __future__ import annotations

import dataclasses
from argparse import Namespace
from pathlib import Path

import holter
import httpx
import pytest

from tests.servers import ServerProcess


def stored_config(server: ServerProcess, run_id: str) -> dict:
    return httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()["config"]


def test_update_config_merges_into_the_stored_config(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="config", name="merge", config={"lr": 0.1, "layers": 2}, url=server.url)
    run.log({"loss": 1.0}, step=0)
    run.update_config({"lr": 0.05, "batch_size": 32})
    run.log({"loss": 0.9}, step=1)
    run.finish()
    stored = httpx.get(f"{server.url}/api/v1/runs/{run.id}").json()
    assert stored["config"] == {"lr": 0.05, "layers": 2, "batch_size": 32} == run.config
    assert stored["status"] == "finished" and stored["name"] == "merge"
    assert httpx.get(f"{server.url}/api/v1/runs/{run.id}/metrics/loss/points").json()["steps"] == [0, 1]


def test_every_way_of_setting_the_config_reaches_the_service(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="config", config={"lr": 0.1}, url=server.url)
    run.config.update({"layers": 12})
    run.config["batch_size"] = 32
    run.config.warmup = 500
    run.config.update(seed=7)
    run.finish()
    assert stored_config(server, run.id) == {"lr": 0.1, "layers": 12, "batch_size": 32, "warmup": 500, "seed": 7}
    assert run.config.warmup == 500 and run.config["seed"] == 7


@dataclasses.dataclass
class Adam:
    lr: float = 3e-4
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float | None = None


def test_nested_configs_are_stored_as_json_and_nones_left_out_with_a_note(
    server: ServerProcess, spool_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = Namespace(
        optimizer=Adam(),
        data=Namespace(path=Path("/data/shards"), shuffle=True),
        resume_from=None,
        clip=float("inf"),
        tags={"b", "a"},
    )
    run = holter.init(project="config", config=args, url=server.url)
    run.finish()
    assert stored_config(server, run.id) == {
        "optimizer": {"lr": 3e-4, "betas": [0.9, 0.95]},
        "data": {"path": "/data/shards", "shuffle": True},
        "clip": "Infinity",
        "tags": ["a", "b"],
    }
    note = [line for line in capsys.readouterr().err.splitlines() if "left out because they are None" in line]
    assert note == ["holter: config keys left out because they are None: optimizer.weight_decay, resume_from"]


def test_lightning_nested_hyperparameters_are_stored_as_json(
    server: ServerProcess, spool_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    lightning = pytest.importorskip("lightning")
    import torch
    from holter.integrations.lightning import HolterLogger
    from torch import nn

    class Model(lightning.LightningModule):
        def __init__(self, optimizer: dict, schedule: Namespace, dropout: float | None = None) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.net = nn.Linear(4, 1)

        def training_step(self, batch, index):  # type: ignore[no-untyped-def]
            loss = nn.functional.mse_loss(self.net(batch[0]), batch[1])
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.AdamW(
                self.parameters(), lr=self.hparams.optimizer["lr"], betas=self.hparams.optimizer["betas"]
            )

    x = torch.randn(32, 4)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    logger = HolterLogger(project="config", url=server.url)
    trainer = lightning.Trainer(
        max_steps=4,
        logger=logger,
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        accelerator="cpu",
    )
    trainer.fit(
        Model(
            optimizer={"name": "adamw", "lr": 1e-3, "betas": (0.9, 0.95)}, schedule=Namespace(warmup=10, kind="cosine")
        ),
        data,
    )
    assert stored_config(server, logger.version) == {
        "optimizer": {"name": "adamw", "lr": 1e-3, "betas": [0.9, 0.95]},
        "schedule": {"warmup": 10, "kind": "cosine"},
    }
