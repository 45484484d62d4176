"""MLflow's system metrics (`mlflow.start_run(log_system_metrics=True)`), in runs imported from
MLflow or logged beside it.

Read from mlflow/mlflow, mlflow/system_metrics/:
* system_metrics_monitor.py: every name is prefixed `system/` (and the node id, `system/<node>/`,
  with MLFLOW_SYSTEM_METRICS_NODE_ID), logged every 10 s at the monitor's own counter (0, 1,
  2, ...), not at the training step.
* metrics/cpu_monitor.py: `cpu_utilization_percentage`, `system_memory_usage_megabytes`
  (`system_memory_usage_percentage` in older releases).
* metrics/disk_monitor.py: `disk_usage_percentage`, `disk_usage_megabytes`,
  `disk_available_megabytes`; metrics/network_monitor.py: `network_receive_megabytes`,
  `network_transmit_megabytes`.
* metrics/gpu_monitor.py (NVML) and rocm_monitor.py: `gpu_<i>_memory_usage_percentage`,
  `gpu_<i>_memory_usage_megabytes` (`..._gigabytes` on ROCm), `gpu_<i>_utilization_percentage`,
  `gpu_<i>_power_usage_watts`, `gpu_<i>_power_usage_percentage`.
* metrics/process_monitor.py: `process_cpu_percentage`, `process_memory_rss_megabytes`,
  `process_memory_vms_megabytes`, `process_memory_percentage`, `process_threads`,
  `process_open_files`.

They are machine vitals, drawn and not read: Holter's GPU detectors assume samples taken at the
training's own steps (holter/system.py logs only when the step moved), which MLflow's counter
is not, so a GPU idling through a checkpoint would read as a collapse.
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule

FRAMEWORK = "MLflow"

RULES: tuple[NameRule, ...] = (
    NameRule(
        r"^system/([^/]+/)?("
        r"cpu_utilization_percentage|system_memory_usage_(megabytes|percentage)|"
        r"disk_(usage_percentage|usage_megabytes|available_megabytes)|network_(receive|transmit)_megabytes|"
        r"gpu_\d+_(memory_usage_(percentage|megabytes|gigabytes)|utilization_percentage|power_usage_(watts|percentage))|"
        r"process_(cpu_percentage|memory_(rss|vms)_megabytes|memory_percentage|threads|open_files)"
        r")$",
        "system",
        "a machine vital MLflow samples every 10 s at its own counter: drawn, not read",
    ),
)
