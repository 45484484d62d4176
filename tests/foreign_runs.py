"""Runs written by other trackers' own libraries, for the importer tests: an MLflow run through
`MlflowClient`, a W&B offline run by a real `wandb` script in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# The training script of a transformers-style W&B run: `train/global_step` with every log call
# (transformers' WandbCallback does this: integrations/integration_utils.py, `on_log`), an eval
# line logged apart at the same step, a NaN, and a config update after init.
WANDB_SCRIPT = """
import wandb
run = wandb.init(
    project="p", name="wandb-baseline", config={"lr": 3e-4, "optim": {"name": "adamw", "betas": [0.9, 0.95]}}
)
for step in range(1, 6):
    wandb.log({"train/loss": 2.0 - step / 10, "train/grad_norm": 0.5, "train/global_step": step * 8})
    if step == 5:
        wandb.log({"eval/loss": float("nan"), "train/global_step": step * 8})
run.config.update({"warmup_steps": 100})
wandb.finish()
"""


def write_wandb_offline_run(folder: Path, script: str = WANDB_SCRIPT) -> Path:
    """Run `script` with wandb in offline mode (it contacts no server); return the run's folder."""
    pytest.importorskip("wandb")
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DIR": str(folder),
        "WANDB_DISABLE_GIT": "true",
        "WANDB_DISABLE_CODE": "true",
        "WANDB__DISABLE_STATS": "true",
    }
    subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=folder,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
    )
    (run_folder,) = (folder / "wandb").glob("offline-run-*")
    return run_folder


def write_mlflow_run(
    tracking_uri: str,
    *,
    name: str = "mlflow-baseline",
    metrics: dict[str, list[tuple[int, float, int]]],
    params: dict[str, object],
) -> str:
    """One finished MLflow run with `metrics` (key -> [(step, value, timestamp ms)]) and `params`; its id."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    experiment = client.create_experiment(f"holter-{name}")
    run = client.create_run(experiment, run_name=name)
    for key, value in params.items():
        client.log_param(run.info.run_id, key, value)
    for key, history in metrics.items():
        for step, value, timestamp in history:
            client.log_metric(run.info.run_id, key, value, timestamp=timestamp, step=step)
    client.set_terminated(run.info.run_id)
    return str(run.info.run_id)
