"""Holter's own client: the names it logs for you, all under `holter/` (`names.HOLTER_NAMESPACE`),
so that none collides with a name the job logs itself (TRL's `step_time`, the Trainer's
`grad_norm`, a job's own `system/*`).

Read from this repository's client:
* client/holter/torch.py (`holter.torch.watch`): `holter/grad_norm` (the whole model),
  `holter/grad_norm/<layer>` and `holter/act_norm/<layer>` (one layer each).
* client/holter/throughput.py (`Run.timed_step`, `Run.log_throughput`, the Trainer callback):
  over the whole step, its wait for data included, `holter/step_time`,
  `holter/throughput/tokens_per_s`, `holter/throughput/samples_per_s` and `holter/throughput/mfu`
  (model FLOPs utilisation, a kind and chart of its own); over `timed_step`'s block alone, the
  step's own work, `holter/compute_time`, `holter/throughput/compute_tokens_per_s`,
  `holter/throughput/compute_samples_per_s` and `holter/throughput/compute_mfu`.
* client/holter/system.py (the system-vitals sampler): everything under `holter/system/` —
  `holter/system/cpu.percent`, `.../memory.*`, `.../disk.*`, `.../network.*`, and per GPU
  `holter/system/gpu.<i>.utilization`, `.memory_used_frac`, `.memory_used_gib`, `.temperature_c`,
  `.power_w`, `.sm_clock_mhz`, `.throttle.thermal`, `.throttle.power`. The GPU's memory share,
  utilisation and throttle flags have detectors of their own; the rest is drawn, not read.
* client/holter/job.py and ranks.py (a distributed job): `holter/rank/<r>/<name>`, what rank r > 0
  logged as `<name>`, and every rank's `holter/dist/step_s`, `wait_s`, `compute_s` and
  `local_grad_norm`: a rank's series, read across ranks (vocabulary/ranks.py), not one by one.
* client/holter/loader.py (`holter.torch.watch_loader`): `holter/loader/wait_fraction` (the share
  of the step spent waiting for data), `holter/loader/wait_s` (that wait in seconds: ≈0 and noisy
  when healthy, so only watched for NaN and extreme outliers) and `holter/loader/compute_s` (the
  step's own work).
* client/holter/media.py (`holter.Histogram`, wandb's `Histogram`): `<name>/min`, `/p5`, `/p25`,
  `/median`, `/p75`, `/p95`, `/max`, a distribution's quantiles at each step. A quantile is a
  statistic of the distribution, not the metric it is named after: `loss/p95` is not a loss
  (the `/min` and `/max` ends are read so in a run that logs a histogram's quantiles, names.py).
`holter.rl`'s `logprob_mismatch/*` follows the generic rules.
"""

from __future__ import annotations

from holter_server.vocabulary.names import FRACTION, NameRule

FRAMEWORK = "holter"

RULES: tuple[NameRule, ...] = (
    # a distributed job's other ranks (client/holter/job.py) and every rank's timings (client/holter/ranks.py):
    # read across ranks by the ranks watch, never as curves of their own (vocabulary/ranks.py)
    NameRule(r"^holter/rank/\d+/", "rank", "what one rank of a distributed job logged (rank 0's is the run's own)"),
    NameRule(r"^holter/dist/", "rank", "a rank's step, its wait in collectives, its own work, its local gradient norm"),
    NameRule(r"^holter/grad_norm$", "grad_norm", "the whole model's gradient norm (holter.torch.watch)"),
    NameRule(r"^holter/grad_norm/", "grad_norm", "one layer's gradient norm (holter.torch.watch)"),
    NameRule(r"^holter/act_norm/", "activation_norm", "one layer's activation RMS (holter.torch.watch)"),
    NameRule(
        r"^holter/step_time$",
        "step_time",
        "the whole step, its wait for data included (timed_step, log_throughput, the Trainer callback)",
    ),
    NameRule(
        r"^holter/compute_time$",
        "compute_time",
        "the step's own work, without its wait for data (timed_step)",
        compute_only=True,
    ),
    NameRule(
        r"^holter/throughput/mfu$",
        "mfu",
        "model FLOPs utilisation over the whole step, its wait for data included: the share of the device's peak",
        unit=FRACTION,
    ),
    NameRule(
        r"^holter/throughput/compute_mfu$",
        "mfu",
        "model FLOPs utilisation over the step's own work (timed_step's block), without its wait for data",
        unit=FRACTION,
        compute_only=True,
    ),
    NameRule(
        r"^holter/throughput/compute_",
        "throughput",
        "tokens or samples per second over the step's own work (timed_step's block), without its wait for data",
        compute_only=True,
    ),
    NameRule(
        r"^holter/throughput/",
        "throughput",
        "tokens or samples per second over the whole step, its wait for data included (timed_step, log_throughput)",
    ),
    NameRule(r"^holter/system/gpu\.\d+\.memory_used_frac$", "gpu_memory", "a GPU's share of memory in use"),
    NameRule(r"^holter/system/gpu\.\d+\.utilization$", "gpu_utilization", "a GPU's utilisation (%)"),
    NameRule(r"^holter/system/gpu\.\d+\.throttle\.(thermal|power)$", "gpu_throttle", "1 while a GPU's clocks are cut"),
    NameRule(r"^holter/system/", "system", "a machine vital sampled beside the run"),
    NameRule(
        r"^holter/loader/wait_fraction$", "data_wait", "the share of the step spent waiting for data", unit=FRACTION
    ),
    NameRule(r"^holter/loader/wait_s$", "statistic", "seconds spent waiting for data (the share is what is read)"),
    NameRule(
        r"^holter/loader/compute_s$",
        "compute_time",
        "the step's own work, without its wait for data",
        compute_only=True,
    ),
    NameRule(
        r"/(p\d{1,2}(\.\d+)?|median)$",
        "statistic",
        "a quantile of a logged distribution (holter.Histogram): a statistic, not the metric itself",
    ),
)
