"""Training runs in the names each framework really logs, with realistic curves and, where the
signal can have one, a planted problem: what the framework tests feed to the vocabulary, the
live service and `holter import`.

Every name below is copied from the framework's own source; the file is cited beside it (the
same files the maps in server/holter_server/vocabulary/frameworks/ were written from).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

STEPS = 480


@dataclass(frozen=True)
class Scenario:
    """One framework's run: metric name → (expected kind, its curve over `STEPS` steps).

    `planted` are the (event kind, metric) pairs the planted problems must raise; `quiet` the
    metrics that must raise nothing at all (a healthy ratio at 1.0, a policy loss around zero).
    Metrics of kind unknown or statistic must raise nothing above info.
    """

    framework: str
    metrics: dict[str, tuple[str, Callable[[np.ndarray, np.random.Generator], np.ndarray]]]
    planted: frozenset[tuple[str, str]] = frozenset()
    quiet: frozenset[str] = frozenset()
    every: dict[str, int] = field(default_factory=dict)  # metrics logged every N steps only (eval)
    file_format: str = "jsonl"

    def series(self, seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Each metric's (steps, values)."""
        rng = np.random.default_rng(seed)
        t = np.arange(STEPS)
        out = {}
        for name, (_, curve) in self.metrics.items():
            values = np.asarray(curve(t, rng), dtype=float)
            every = self.every.get(name, 1)
            out[name] = (t[::every], values[::every])
        return out

    @property
    def kinds(self) -> dict[str, str]:
        return {name: kind for name, (kind, _) in self.metrics.items()}


# ---------------------------------------------------------------------------------- curves


def lm_loss(t: np.ndarray, rng: np.random.Generator, start: float = 10.5, floor: float = 3.2) -> np.ndarray:
    return floor + (start - floor) * np.exp(-t / 60) + rng.normal(0, 0.02, len(t))


def with_spike(curve: Callable, at: int, factor: float = 2.0, width: int = 2) -> Callable:
    def spiked(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        values = curve(t, rng)
        values[at : at + width] *= factor
        return values

    return spiked


def with_nan_from(curve: Callable, at: int) -> Callable:
    def broken(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        values = curve(t, rng)
        values[at:] = np.nan
        return values

    return broken


def with_shift(curve: Callable, at: int, factor: float) -> Callable:
    def shifted(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        values = curve(t, rng)
        values[at:] *= factor
        return values

    return shifted


def level(value: float, noise: float) -> Callable:
    return lambda t, rng: value + rng.normal(0, noise, len(t))


def positive(value: float, noise: float) -> Callable:
    return lambda t, rng: np.abs(value + rng.normal(0, noise, len(t)))


def grad_norm(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.abs(0.9 + 0.6 * np.exp(-t / 20) + rng.normal(0, 0.05, len(t)))


def lr_schedule(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    # warmup then cosine decay: read as a loss, this "falls then stays" and looked like no learning
    return 3e-4 * np.minimum(1.0, t / 20) * (0.5 + 0.5 * np.cos(np.pi * t / len(t)))


def counter(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (t * 4096).astype(float)


def periodic_mismatch(base: float, noise: float, jump: float, every: int, start: int) -> Callable:
    def curve(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        values = np.abs(base + rng.normal(0, noise, len(t)))
        values[(t >= start) & (t % every == 0)] += jump
        return values

    return curve


def rising_from(base: float, noise: float, at: int, to: float) -> Callable:
    def curve(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        values = np.abs(base + rng.normal(0, noise, len(t)))
        values[at:] = to + np.abs(rng.normal(0, noise * 3, len(t) - at))
        return values

    return curve


def policy_loss(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    # a GRPO/PPO objective: mean zero, noisy, often negative
    return rng.normal(0.0, 0.03, len(t)) + 0.01 * np.sin(t / 7)


def drifting_diagnostic(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    # a custom diagnostic nobody told Holter about: it drifts, jumps and would be "a divergence" for a loss
    values = 0.5 + np.log1p(t) / 4 + rng.normal(0, 0.005, len(t))
    values[200] *= 40.0  # one extreme outlier: worth a note, at info
    values[300:] *= 3.0
    return values


def quantile_of_loss(z: float, spread: float) -> Callable:
    """A quantile of the per-sequence losses around `lm_loss` (`z` standard deviations from its
    middle), noisier the further out; the max now and then hit by one very hard sequence."""

    def curve(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        values = lm_loss(t, rng) + z * 0.6 + rng.normal(0, spread, len(t))
        if z > 3:
            hard = rng.random(len(t)) < 0.02
            values[hard] *= rng.uniform(2.0, 4.0, hard.sum())
        return np.maximum(values, 0.01)

    return curve


UNKNOWN = ("my_probe/attn_sink_h3", ("unknown", drifting_diagnostic))


# ---------------------------------------------------------------------------------- frameworks


SCENARIOS: dict[str, Scenario] = {
    # huggingface/transformers src/transformers/trainer.py (_maybe_log_save_evaluate, log),
    # src/transformers/trainer_utils.py (speed_metrics)
    "transformers": Scenario(
        "transformers",
        {
            "loss": ("loss", with_spike(lm_loss, 300, factor=2.2)),
            "grad_norm": ("grad_norm", with_spike(grad_norm, 298, factor=9.0, width=3)),
            "learning_rate": ("schedule", lr_schedule),
            "epoch": ("schedule", lambda t, rng: t / 160),
            "eval_loss": ("eval_loss", lambda t, rng: lm_loss(t, rng) + 0.05),
            "eval_runtime": ("schedule", level(12.0, 0.3)),
            "eval_samples_per_second": ("statistic", level(85.0, 2.0)),
            "eval_steps_per_second": ("statistic", level(10.6, 0.2)),
            "num_input_tokens_seen": ("schedule", counter),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset({("spike", "loss"), ("grad_norm_precursor", "loss")}),
        every={"eval_loss": 40, "eval_runtime": 40, "eval_samples_per_second": 40, "eval_steps_per_second": 40},
    ),
    # huggingface/trl trl/trainer/grpo_trainer.py (_metrics[mode][...]); the Trainer's loss,
    # grad_norm, learning_rate
    "trl_grpo": Scenario(
        "TRL GRPO",
        {
            "loss": ("policy_loss", policy_loss),
            "grad_norm": ("grad_norm", grad_norm),
            "learning_rate": ("schedule", lr_schedule),
            "reward": ("reward", lambda t, rng: 0.2 + 0.5 * (1 - np.exp(-t / 150)) + rng.normal(0, 0.03, len(t))),
            "reward_std": ("statistic", positive(0.3, 0.02)),
            "frac_reward_zero_std": ("statistic", positive(0.1, 0.02)),
            "kl": ("kl", lambda t, rng: 0.002 * t / 48 + np.abs(rng.normal(0, 0.001, len(t)))),
            "entropy": ("entropy", positive(0.7, 0.02)),
            "completions/mean_length": ("statistic", level(312.0, 15.0)),
            "clip_ratio/region_mean": ("clip_fraction", positive(0.002, 0.001)),
            "sampling/sampling_logp_difference/mean": (
                "logprob_mismatch",
                periodic_mismatch(0.004, 0.001, 0.12, 24, 240),
            ),
            "sampling/sampling_logp_difference/max": ("logprob_mismatch", positive(0.2, 0.02)),
            "sampling/importance_sampling_ratio/mean": ("mismatch_ratio", level(1.0, 0.002)),
            "sampling/importance_sampling_ratio/min": ("statistic", positive(0.6, 0.05)),
            "sampling/importance_sampling_ratio/max": ("statistic", positive(1.9, 0.1)),
            "num_tokens": ("schedule", counter),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset(
            {
                ("sawtooth", "sampling/sampling_logp_difference/mean"),
                ("mismatch_off_zero", "sampling/sampling_logp_difference/mean"),
            }
        ),
        quiet=frozenset({"loss", "sampling/importance_sampling_ratio/mean"}),
    ),
    # volcengine/verl verl/trainer/ppo/rollout_corr_helper.py, verl/utils/debug/metrics.py,
    # verl/trainer/ppo/metric_utils.py, verl/workers/actor/dp_actor.py
    "verl": Scenario(
        "verl",
        {
            "actor/pg_loss": ("policy_loss", policy_loss),
            "actor/entropy": ("entropy", positive(0.6, 0.02)),
            "actor/ppo_kl": ("kl", positive(0.001, 0.0005)),
            "actor/pg_clipfrac": ("clip_fraction", positive(0.01, 0.003)),
            "actor/grad_norm": ("grad_norm", grad_norm),
            "actor/lr": ("schedule", lr_schedule),
            "critic/score/mean": (
                "reward",
                lambda t, rng: 0.3 + 0.4 * (1 - np.exp(-t / 120)) + rng.normal(0, 0.02, len(t)),
            ),
            "critic/advantages/mean": ("statistic", level(0.0, 0.05)),
            "response_length/mean": ("statistic", level(400.0, 20.0)),
            "rollout_corr/log_ppl_abs_diff": ("logprob_mismatch", positive(0.004, 0.001)),
            "rollout_corr/k3_kl": ("logprob_mismatch", rising_from(0.0008, 0.0002, 260, 0.04)),
            "rollout_corr/kl": ("logprob_mismatch", level(0.0005, 0.0003)),
            "rollout_corr/chi2_token": ("logprob_mismatch", positive(0.002, 0.0005)),
            "rollout_corr/chi2_seq": ("statistic", positive(0.8, 0.3)),
            "rollout_corr/rollout_is_mean": ("mismatch_ratio", level(1.0, 0.003)),
            "rollout_corr/training_ppl": (
                "statistic",
                lambda t, rng: 1.8 + 0.3 * np.exp(-t / 200) + rng.normal(0, 0.02, len(t)),
            ),
            "training/rollout_probs_diff_mean": ("logprob_mismatch", positive(0.003, 0.001)),
            "training/rollout_actor_probs_pearson_corr": ("statistic", level(0.998, 0.0005)),
            "timing_s/step": ("step_time", level(41.0, 0.8)),
            "perf/throughput": ("throughput", level(2300.0, 40.0)),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset({("level_shift", "rollout_corr/k3_kl"), ("mismatch_off_zero", "rollout_corr/k3_kl")}),
        quiet=frozenset(
            {"actor/pg_loss", "rollout_corr/rollout_is_mean", "rollout_corr/log_ppl_abs_diff", "rollout_corr/kl"}
        ),
    ),
    # OpenRLHF/OpenRLHF openrlhf/trainer/ray/ppo_actor.py, ppo_critic.py; openrlhf/utils/logging_utils.py
    # (everything as train/<name>)
    "openrlhf": Scenario(
        "OpenRLHF",
        {
            "train/policy_loss": ("policy_loss", policy_loss),
            "train/critic_loss": ("policy_loss", positive(0.05, 0.01)),
            "train/vllm_kl": ("logprob_mismatch", periodic_mismatch(0.002, 0.0006, 0.15, 30, 200)),
            "train/logprobs_diff": ("statistic", lambda t, rng: 0.001 * t + rng.normal(0, 0.005, len(t))),
            "train/kl": ("kl", lambda t, rng: 0.0001 * t + np.abs(rng.normal(0, 0.001, len(t)))),
            "train/ppo_clip_ratio": ("clip_fraction", positive(0.02, 0.005)),
            "train/reward": ("reward", level(0.4, 0.05)),
            "train/return": ("reward", level(0.35, 0.05)),
            "train/response_length": ("statistic", level(500.0, 30.0)),
            "train/actor_lr": ("schedule", lr_schedule),
            "train/actor_grad_norm": ("grad_norm", grad_norm),
            "train/global_step": ("schedule", lambda t, rng: t.astype(float)),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset({("sawtooth", "train/vllm_kl"), ("mismatch_off_zero", "train/vllm_kl")}),
        quiet=frozenset({"train/policy_loss", "train/logprobs_diff"}),
    ),
    # NVIDIA-NeMo/RL nemo_rl/algorithms/loss/loss_functions.py (ClippedPGLossFn), nemo_rl/algorithms/grpo.py
    "nemo_rl": Scenario(
        "NeMo-RL",
        {
            "train/loss": ("policy_loss", policy_loss),
            "train/token_mult_prob_error": (
                "mismatch_ratio",
                lambda t, rng: 1.0 + np.abs(rng.normal(0.006, 0.002, len(t))),
            ),
            "train/gen_kl_error": ("logprob_mismatch", rising_from(0.0008, 0.0002, 320, 0.05)),
            "train/policy_kl_error": ("logprob_mismatch", positive(0.0009, 0.0002)),
            "train/js_divergence_error": ("logprob_mismatch", positive(0.0002, 0.00005)),
            "train/sampling_importance_ratio": ("mismatch_ratio", level(1.0, 0.002)),
            "train/probs_ratio": ("statistic", level(1.0, 0.001)),
            "train/approx_entropy": ("entropy", positive(0.5, 0.02)),
            "train/reward": ("reward", level(0.5, 0.05)),
            "train/grad_norm": ("grad_norm", grad_norm),
            "train/lr": ("schedule", lr_schedule),
            "timing/train/total_step_time": ("step_time", level(95.0, 2.0)),
            # nemo_rl/algorithms/utils.py print_performance_metrics, logged by grpo.py with prefix="performance";
            # grpo.py timing_metrics["valid_tokens_per_sec_per_gpu"], logged with prefix="timing/train"
            "performance/train_fp_utilization": ("mfu", level(0.41, 0.004)),
            "performance/train_flops_per_gpu": ("throughput", level(405.0, 4.0)),
            "performance/tokens_per_sec_per_gpu": ("throughput", level(2100.0, 20.0)),
            "performance/training_worker_idle_time_ratio": ("statistic", positive(0.08, 0.01)),
            "timing/train/valid_tokens_per_sec_per_gpu": ("throughput", level(1900.0, 20.0)),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset({("level_shift", "train/gen_kl_error"), ("mismatch_off_zero", "train/gen_kl_error")}),
        # healthy ≈ 1.0, not 0: read as a logprob gap it would "leave zero" from step 0
        quiet=frozenset(
            {"train/loss", "train/token_mult_prob_error", "train/sampling_importance_ratio", "train/policy_kl_error"}
        ),
    ),
    # THUDM/slime slime/backends/megatron_utils/loss.py, model.py; radixark/miles
    # miles/backends/training_utils/loss_hub/losses.py (train_rollout_kl)
    "slime": Scenario(
        "slime",
        {
            "train/loss": ("policy_loss", policy_loss),
            "train/pg_loss": ("policy_loss", policy_loss),
            "train/entropy_loss": ("entropy", positive(0.4, 0.02)),
            "train/pg_clipfrac": ("clip_fraction", positive(0.01, 0.003)),
            "train/ppo_kl": ("kl", positive(0.0005, 0.0002)),
            "train/train_rollout_logprob_abs_diff": ("logprob_mismatch", positive(0.012, 0.002)),
            "train/train_rollout_kl": ("logprob_mismatch", rising_from(0.00015, 0.00004, 250, 0.03)),
            "train/grad_norm": ("grad_norm", grad_norm),
            "train/lr-pg_0": ("schedule", lr_schedule),
            "rollout/raw_reward": ("reward", level(0.45, 0.05)),
            "perf/step_time": ("step_time", level(120.0, 3.0)),
            # slime/observability/train_metric_utils.py
            "perf/actor_train_tok_per_s": ("throughput", level(9100.0, 90.0)),
            "perf/actor_train_tflops": ("throughput", level(210.0, 2.0)),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset({("level_shift", "train/train_rollout_kl"), ("mismatch_off_zero", "train/train_rollout_kl")}),
        quiet=frozenset({"train/loss", "train/pg_loss", "train/train_rollout_logprob_abs_diff"}),
    ),
    # Lightning-AI/pytorch-lightning src/lightning/pytorch/trainer/connectors/logger_connector/result.py
    # (forked_name: {name}_step / {name}_epoch), src/lightning/pytorch/callbacks/lr_monitor.py (lr-{Optimizer})
    "lightning": Scenario(
        "Lightning",
        {
            "train_loss_step": ("loss", with_nan_from(lm_loss, 400)),
            "train_loss_epoch": ("loss", lm_loss),
            "val_loss": ("eval_loss", lambda t, rng: lm_loss(t, rng) + 0.1),
            "val_acc": ("reward", lambda t, rng: 0.2 + 0.6 * (1 - np.exp(-t / 100)) + rng.normal(0, 0.01, len(t))),
            "lr-AdamW": ("schedule", lr_schedule),
            "epoch": ("schedule", lambda t, rng: (t // 120).astype(float)),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset({("divergence", "train_loss_step")}),
        every={"train_loss_epoch": 120, "val_loss": 120, "val_acc": 120, "epoch": 120},
    ),
    # NVIDIA/Megatron-LM megatron/training/training.py (training_log, evaluate_and_print_results), pretrain_gpt.py
    "megatron": Scenario(
        "Megatron-LM",
        {
            "lm loss": ("loss", with_spike(lm_loss, 150, factor=2.0)),
            "lm loss validation": ("eval_loss", lambda t, rng: lm_loss(t, rng) + 0.08),
            # exp of the validation loss beside it: not a second eval loss (its scale made the train loss "too good")
            "lm loss validation ppl": ("statistic", lambda t, rng: np.exp(lm_loss(t, rng) + 0.08)),
            "grad-norm": ("grad_norm", grad_norm),
            "iteration-time": ("step_time", with_shift(level(1.20, 0.01), 400, 1.5)),
            "learning-rate": ("schedule", lr_schedule),
            "loss-scale": ("schedule", lambda t, rng: np.full(len(t), 65536.0)),
            "batch-size": ("schedule", lambda t, rng: np.full(len(t), 512.0)),
            "num-zeros": ("statistic", level(1200.0, 40.0)),
            "params-norm": ("statistic", lambda t, rng: 180.0 + t / 10 + rng.normal(0, 0.1, len(t))),
            "throughput": ("throughput", level(410.0, 4.0)),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset(
            {("spike", "lm loss"), ("level_shift", "iteration-time"), ("systems_slowdown", "iteration-time")}
        ),
        every={"lm loss validation": 40, "lm loss validation ppl": 40},
    ),
    # pytorch/torchtitan torchtitan/components/metrics.py (MetricsProcessor.log),
    # torchtitan/components/optimizer/lr_scheduler.py (get_metrics: lr/{Optimizer}/{i})
    "torchtitan": Scenario(
        "torchtitan",
        {
            "loss_metrics/global_avg_loss": ("loss", lm_loss),
            "loss_metrics/global_max_loss": ("loss", lambda t, rng: lm_loss(t, rng) + 0.2),
            "grad_norm": ("grad_norm", grad_norm),
            "throughput(tps)": ("throughput", with_shift(level(7800.0, 60.0), 360, 0.65)),
            "tflops": ("throughput", level(310.0, 3.0)),
            "mfu(%)": ("mfu", level(41.0, 0.4)),
            "time_metrics/end_to_end(s)": ("step_time", level(4.2, 0.04)),
            "time_metrics/data_loading(s)": ("statistic", positive(0.02, 0.002)),
            "time_metrics/data_loading(%)": ("data_wait", positive(0.5, 0.05)),
            "memory/max_active(GiB)": ("statistic", level(61.0, 0.1)),
            "lr/AdamW/0": ("schedule", lr_schedule),
            "n_tokens_seen": ("schedule", counter),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset({("level_shift", "throughput(tps)"), ("systems_slowdown", "throughput(tps)")}),
    ),
    # deepspeedai/DeepSpeed deepspeed/runtime/engine.py, deepspeed/runtime/pipe/engine.py
    "deepspeed": Scenario(
        "DeepSpeed",
        {
            "Train/Samples/train_loss": (
                "loss",
                lambda t, rng: np.where(t < 330, lm_loss(t, rng), 3.3 * np.exp((t - 330) / 40)),
            ),
            "Train/Samples/eval_loss": ("eval_loss", lambda t, rng: lm_loss(t, rng) + 0.05),
            "Train/Samples/lr": ("schedule", lr_schedule),
            "Train/Samples/loss_scale": ("schedule", lambda t, rng: np.full(len(t), 4096.0)),
            "Train/Samples/elapsed_time_ms_step": ("step_time", level(850.0, 8.0)),
            "Train/Eigenvalues/ModelBlockParam_0": ("statistic", positive(12.0, 0.5)),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset({("divergence", "Train/Samples/train_loss")}),
        every={"Train/Samples/eval_loss": 40},
    ),
    # karpathy/nanoGPT train.py (wandb.log)
    "nanogpt": Scenario(
        "nanoGPT",
        {
            "iter": ("schedule", lambda t, rng: t.astype(float)),
            "train/loss": ("loss", with_spike(lm_loss, 250, factor=2.0)),
            "val/loss": ("eval_loss", lambda t, rng: lm_loss(t, rng) + 0.1),
            "lr": ("schedule", lr_schedule),
            "mfu": ("mfu", level(38.0, 0.3)),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset({("spike", "train/loss")}),
    ),
    # karpathy/llm.c llmc/logger.h (s:%d trl:... lr:... norm:..., s:%d tel:..., s:%d eval:...)
    "llmc": Scenario(
        "llm.c",
        {
            "trl": ("loss", with_nan_from(lm_loss, 420)),
            "lr": ("schedule", lr_schedule),
            "norm": ("grad_norm", grad_norm),
            "tel": ("eval_loss", lambda t, rng: lm_loss(t, rng) + 0.05),
            "eval": ("reward", lambda t, rng: 0.25 + 0.05 * (1 - np.exp(-t / 200)) + rng.normal(0, 0.002, len(t))),
        },
        planted=frozenset({("divergence", "trl")}),
        every={"tel": 40, "eval": 40},
        file_format="llmc_log",
    ),
    # NVIDIA-NeMo/RL at 7ea279ab, nemo_rl/algorithms/sft.py: metrics logged with prefix="train"
    # (train_fp_utilization among them), timing_metrics with prefix="timing/train"
    # (valid_tokens_per_sec_per_gpu among them). The job slows down at step 360: the throughput
    # it logs among its timings falls, and the step time rises with it.
    "nemo_rl_sft": Scenario(
        "NeMo-RL SFT",
        {
            "train/loss": ("loss", lm_loss),
            "train/grad_norm": ("grad_norm", grad_norm),
            "train/lr": ("schedule", lr_schedule),
            "train/train_fp_utilization": ("mfu", with_shift(level(0.38, 0.003), 360, 0.62)),
            "timing/train/valid_tokens_per_sec_per_gpu": ("throughput", with_shift(level(5200.0, 45.0), 360, 0.62)),
            "timing/train/total_step_time": ("step_time", with_shift(level(6.3, 0.05), 360, 1 / 0.62)),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset(
            {
                ("level_shift", "timing/train/valid_tokens_per_sec_per_gpu"),
                ("systems_slowdown", "timing/train/valid_tokens_per_sec_per_gpu"),
                ("level_shift", "timing/train/total_step_time"),
            }
        ),
    ),
    # vwxyzjn/cleanrl at fe8d8a03, cleanrl/ppo.py writer.add_scalar(...): the value function's
    # explained variance rises toward 1 as the critic learns (healthy: nothing to say), the value
    # loss follows the returns up, and the environment steps per second halve at step 340.
    "cleanrl": Scenario(
        "CleanRL",
        {
            "charts/learning_rate": ("schedule", lr_schedule),
            "charts/episodic_return": (
                "reward",
                lambda t, rng: 20 + 400 * (1 - np.exp(-t / 120)) + rng.normal(0, 15, len(t)),
            ),
            "charts/episodic_length": (
                "statistic",
                lambda t, rng: 20 + 400 * (1 - np.exp(-t / 120)) + rng.normal(0, 15, len(t)),
            ),
            "losses/value_loss": (
                "policy_loss",
                lambda t, rng: 5 + 40 * (1 - np.exp(-t / 150)) + np.abs(rng.normal(0, 2, len(t))),
            ),
            "losses/policy_loss": ("policy_loss", policy_loss),
            "losses/entropy": (
                "entropy",
                lambda t, rng: 0.69 - 0.3 * (1 - np.exp(-t / 200)) + rng.normal(0, 0.005, len(t)),
            ),
            "losses/old_approx_kl": ("kl", positive(0.004, 0.001)),
            "losses/approx_kl": ("kl", positive(0.004, 0.001)),
            "losses/clipfrac": ("clip_fraction", positive(0.05, 0.01)),
            "losses/explained_variance": (
                "statistic",
                lambda t, rng: 0.93 * (1 - np.exp(-t / 70)) - 0.2 + rng.normal(0, 0.02, len(t)),
            ),
            "charts/SPS": ("throughput", with_shift(level(1750.0, 25.0), 340, 0.5)),
            UNKNOWN[0]: UNKNOWN[1],
        },
        planted=frozenset({("level_shift", "charts/SPS")}),
        quiet=frozenset({"losses/explained_variance", "losses/value_loss"}),
    ),
    # mlflow/mlflow mlflow/system_metrics/metrics/{cpu,gpu,disk,network}_monitor.py, prefixed
    # "system/" by system_metrics_monitor.py and sampled every 10 s at its own counter: a GPU
    # idling through evaluation or a checkpoint is not a collapse, memory filling is not a leak
    "mlflow": Scenario(
        "MLflow",
        {
            "train_loss": ("loss", lm_loss),
            "system/cpu_utilization_percentage": (
                "system",
                lambda t, rng: np.clip(60 + rng.normal(0, 20, len(t)), 0, 100),
            ),
            "system/system_memory_usage_megabytes": (
                "system",
                lambda t, rng: 30000 + 20 * t + rng.normal(0, 50, len(t)),
            ),
            "system/gpu_0_utilization_percentage": (
                "system",
                lambda t, rng: np.where(t % 100 < 8, 2.0, 97.0) + rng.normal(0, 1, len(t)),
            ),
            "system/gpu_0_memory_usage_percentage": ("system", lambda t, rng: np.minimum(95.0, 40 + t / 4.0)),
            "system/gpu_0_power_usage_watts": ("system", level(610.0, 15.0)),
            "system/network_receive_megabytes": ("system", counter),
            "system/disk_usage_percentage": ("system", level(71.0, 0.01)),
        },
        quiet=frozenset(
            {
                "system/cpu_utilization_percentage",
                "system/system_memory_usage_megabytes",
                "system/gpu_0_utilization_percentage",
                "system/gpu_0_memory_usage_percentage",
                "system/gpu_0_power_usage_watts",
                "system/network_receive_megabytes",
                "system/disk_usage_percentage",
            }
        ),
    ),
    # a wandb.Histogram of per-sequence losses (client/holter/media.py: NAME/min ... NAME/max): the
    # quantiles of a loss are statistics of its distribution, and its extremes are spiky by nature
    "histogram_quantiles": Scenario(
        "holter",
        {
            "loss": ("loss", lm_loss),
            **{
                f"loss/{q}": ("statistic", quantile_of_loss(z, spread))
                for q, z, spread in (
                    ("min", -2.5, 0.4),
                    ("p5", -1.6, 0.1),
                    ("p25", -0.7, 0.05),
                    ("median", 0.0, 0.03),
                    ("p75", 0.7, 0.05),
                    ("p95", 1.6, 0.1),
                    ("max", 3.5, 0.9),
                )
            },
        },
    ),
}


def write_file(scenario: Scenario, folder, seed: int = 0):
    """The scenario's run as the file `holter import` reads: JSONL (one line per step), or an
    llm.c main.log."""
    from pathlib import Path

    series = scenario.series(seed)
    by_step: dict[int, dict[str, float]] = {}
    for name, (steps, values) in series.items():
        for step, value in zip(steps.tolist(), values.tolist()):
            by_step.setdefault(step, {})[name] = value
    folder = Path(folder)
    if scenario.file_format == "llmc_log":
        path = folder / "main.log"
        path.write_text(
            "".join(
                f"s:{step} " + " ".join(f"{k}:{v:.6f}" for k, v in row.items()) + "\n"
                for step, row in sorted(by_step.items())
            )
        )
        return path
    import json

    path = folder / f"{scenario.framework.replace(' ', '_')}.jsonl"
    path.write_text("".join(json.dumps({"step": step, **row}) + "\n" for step, row in sorted(by_step.items())))
    return path
