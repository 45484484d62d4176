"""Runs inside bench/.venv-mlflow: log the same shape of data to an MLflow tracking server.

Prints one JSON line: points per second with log_batch (1,000 metrics per call, MLflow's
limit) and milliseconds per log_metric call.
"""

import json
import statistics
import sys
import time

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

url, points, metrics = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = MlflowClient(tracking_uri=url)
experiment = client.create_experiment(f"bench-{time.time_ns()}")
run = client.create_run(experiment)
run_id = run.info.run_id
names = [f"m{i}" for i in range(metrics)]
steps = points // metrics
per_call = 1000 // metrics  # steps per log_batch call: 1,000 metric values

started = time.perf_counter()
now_ms = int(time.time() * 1000)
for first in range(0, steps, per_call):
    batch = [
        Metric(name, step * 0.5 + i, now_ms, step)
        for step in range(first, min(first + per_call, steps))
        for i, name in enumerate(names)
    ]
    client.log_batch(run_id, metrics=batch)
batch_rate = steps * metrics / (time.perf_counter() - started)

single = []
for step in range(200):
    t = time.perf_counter()
    client.log_metric(run_id, "single", float(step), step=step)
    single.append(time.perf_counter() - t)
print(
    json.dumps(
        {"log_batch_points_per_s": batch_rate, "log_metric_ms": statistics.median(single) * 1000, "run_id": run_id}
    )
)
