"""A small training script written for wandb, as researchers have them: logistic regression in
numpy, with config, commit=False, define_metric against an epoch axis, a histogram, a summary,
an alert and a table. tests/integration/test_wandb_drop_in.py runs it twice, unmodified except
for its import line: once with `import holter as wandb` against a live service, once with the
real wandb in offline mode, and compares what each recorded."""

import sys

import numpy as np
import wandb


def main() -> int:
    run = wandb.init(
        project="wandb-drop-in",
        name="logreg",
        config={"lr": 0.5, "epochs": 4, "batch_size": 64},
        entity="lab",
        group="sweep-1",
        job_type="train",
        tags=["numpy"],
        notes="drop-in check",
    )
    wandb.config.update({"features": 8})
    wandb.config.seed = 0
    run.config["optimizer"] = {"name": "sgd", "momentum": 0.0}
    wandb.define_metric("epoch")
    wandb.define_metric("val/*", step_metric="epoch")
    wandb.define_metric("train/loss", summary="min")

    rng = np.random.default_rng(wandb.config.seed)
    features = rng.normal(size=(512, wandb.config.features))
    labels = (features @ rng.normal(size=wandb.config.features) > 0).astype(float)
    weights = np.zeros(wandb.config.features)
    best = 0.0
    accuracy = 0.0
    for epoch in range(wandb.config.epochs):
        for start in range(0, len(features), wandb.config.batch_size):
            x = features[start : start + wandb.config.batch_size]
            y = labels[start : start + wandb.config.batch_size]
            p = 1.0 / (1.0 + np.exp(-(x @ weights)))
            loss = float(-np.mean(y * np.log(p + 1e-9) + (1 - y) * np.log(1 - p + 1e-9)))
            gradient = x.T @ (p - y) / len(y)
            weights -= wandb.config.lr * gradient
            wandb.log({"train/loss": loss}, commit=False)
            wandb.log({"train/grad_norm": float(np.linalg.norm(gradient))})
        accuracy = float(np.mean(((features @ weights) > 0) == labels))
        wandb.log({"val/acc": accuracy, "epoch": epoch, "weights": wandb.Histogram(weights)})
        best = max(best, accuracy)
        wandb.summary["best_val_acc"] = best
    if accuracy < 0.999:
        wandb.alert(title="accuracy below target", text=f"val/acc {accuracy:.3f} < 0.999", level=wandb.AlertLevel.WARN)
    run.summary.update({"final_acc": accuracy})
    wandb.log({"predictions": wandb.Table(columns=["p"], data=[[0.5]])})
    wandb.finish()
    print(f"done: {run.id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
