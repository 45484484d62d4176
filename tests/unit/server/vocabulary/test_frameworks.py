"""Each framework's map, against the names it really logs (tests/frameworks.py cites the source
file of each) and realistic curves: the right kind, the planted problem found, healthy signals
quiet, and nothing above info from a name Holter does not know."""

from __future__ import annotations

import numpy as np
import pytest
from holter_server.detect import IncrementalDetector, classify_series
from holter_server.detect.findings import SeriesSnapshot, cross_signal_findings
from holter_server.vocabulary import understand, understand_all
from holter_server.vocabulary.profiles import KINDS
from holter_server.vocabulary.signals import signal

from tests.frameworks import SCENARIOS, Scenario


def read(scenario: Scenario):
    """The batch classifier's reading of the scenario's run: understanding, events with findings."""
    series = scenario.series()
    understood = understand_all(list(series))
    events, snapshots = [], []
    for name, (steps, values) in series.items():
        kind = understood[name].kind
        snapshots.append(SeriesSnapshot(name, float(values[-1]), int(steps[0]), int(steps[-1]), kind))
        if KINDS[kind].detectors:
            detector = IncrementalDetector(name, kind=kind)
            detector.add(steps, values)
            events += detector.events
    return understood, events + cross_signal_findings(events, snapshots)


@pytest.mark.parametrize("key", sorted(SCENARIOS))
def test_every_name_a_framework_logs_gets_its_kind(key):
    scenario = SCENARIOS[key]
    understood = understand_all(list(scenario.metrics))
    assert {name: u.kind for name, u in understood.items()} == scenario.kinds
    assert all(u.source == ("unknown" if u.kind == "unknown" else "recognised") for u in understood.values())


@pytest.mark.parametrize("key", sorted(SCENARIOS))
def test_the_planted_problem_is_found_and_the_healthy_signals_stay_quiet(key):
    scenario = SCENARIOS[key]
    understood, events = read(scenario)
    found = {(e.kind, e.metric) for e in events}
    assert scenario.planted <= found
    assert not [e for e in events if e.metric in scenario.quiet]
    watched_quietly = {
        name for name, u in understood.items() if signal(u.kind).watch == "quiet" and u.kind != "policy_loss"
    }
    assert all(e.severity == "info" for e in events if e.metric in watched_quietly)


def test_an_unknown_name_is_watched_for_extreme_outliers_at_info():
    scenario = SCENARIOS["transformers"]
    _, events = read(scenario)
    probe = [e for e in events if e.metric == "my_probe/attn_sink_h3"]
    assert [(e.kind, e.start_step, e.severity) for e in probe] == [("spike", 200, "info")]


def test_a_healthy_token_mult_prob_error_near_one_stays_quiet():
    # NVIDIA-NeMo/RL docs/guides/grpo.md: mean exp(|logp_train - logp_gen|), healthy ≈ 1.0
    rng = np.random.default_rng(1)
    values = 1.0 + np.abs(rng.normal(0.006, 0.002, 600))
    assert understand("train/token_mult_prob_error").kind == "mismatch_ratio"
    assert classify_series(np.arange(600), values, metric="train/token_mult_prob_error") == []
    # read as a logprob gap (healthy ≈0), the same healthy curve "leaves zero" from the start
    assert classify_series(np.arange(600), values, metric="train/token_mult_prob_error", kind="logprob_mismatch")


def test_a_token_mult_prob_error_that_leaves_one_is_found():
    rng = np.random.default_rng(2)
    values = 1.0 + np.abs(rng.normal(0.006, 0.002, 600))
    values[400:] = 1.25 + np.abs(rng.normal(0, 0.01, 200))
    events = classify_series(np.arange(600), values, metric="train/token_mult_prob_error")
    alarms = [e for e in events if e.severity != "info"]
    assert alarms and alarms[0].kind == "level_shift" and 400 <= alarms[0].start_step <= 405


def test_a_grpo_policy_loss_around_zero_is_not_a_language_model_loss():
    # huggingface/trl trl/trainer/grpo_trainer.py: the Trainer's `loss` is the GRPO objective
    names = ["loss", "grad_norm", "reward", "reward_std", "frac_reward_zero_std", "completions/mean_length"]
    understood = understand_all(names)
    assert understood["loss"].kind == "policy_loss" and understood["loss"].framework == "TRL"
    values = SCENARIOS["trl_grpo"].series()["loss"][1]
    assert classify_series(np.arange(len(values)), values, metric="loss", kind="policy_loss") == []
    # read as a language-model loss its swings around zero are spikes (main's classifier keeps
    # them at info since w14: recovered spikes never alarm)
    assert classify_series(np.arange(len(values)), values, metric="loss", kind="loss")


def test_an_sft_loss_stays_a_loss_and_a_dpo_loss_too():
    assert understand_all(["loss", "grad_norm", "mean_token_accuracy", "num_tokens"])["loss"].kind == "loss"
    dpo = [
        "loss",
        "rewards/chosen",
        "rewards/rejected",
        "rewards/accuracies",
        "rewards/margins",
        "logps/chosen",
        "logits/chosen",
    ]
    understood = understand_all(dpo)
    assert understood["loss"].kind == "loss"
    # the implicit rewards of the chosen and rejected completions fall on a healthy run: statistics
    assert {understood[n].kind for n in dpo[1:3]} == {"statistic"} and understood["logps/chosen"].kind == "statistic"
    assert {understood[n].kind for n in dpo[3:5]} == {"reward"}


@pytest.mark.parametrize(
    "name",
    [
        "lr_group0/lr",
        "lr/AdamW",
        "lr/AdamW/0",
        "lr-AdamW/pg1",
        "train/lr-pg_0",
        "learning_rate/group_1",
        "Train/Samples/lr",
        "learning-rate vs samples",
    ],
)
def test_learning_rate_series_in_add_scalars_and_per_group_shapes_are_schedules(name):
    understood = understand(name)
    assert understood.kind == "schedule" and not signal("schedule").analysed
    # a warmup-then-decay schedule read as a loss looked like "nothing learns" (critical)
    t = np.arange(400)
    lr = 3e-4 * np.minimum(1.0, t / 20) * (0.5 + 0.5 * np.cos(np.pi * t / 400))
    assert classify_series(t, lr, metric=name) == []


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("train_loss_step", "loss"),
        ("train_loss_epoch", "loss"),
        ("val_loss_epoch", "eval_loss"),
        ("val_acc_step", "reward"),
        ("val_loss/dataloader_idx_1", "eval_loss"),
    ],
)
def test_lightning_step_and_epoch_forks_are_read_through(name, kind):
    assert understand(name).kind == kind


def test_a_lightning_suffix_says_so():
    understood = understand("train_loss_step")
    assert (understood.kind, understood.framework) == ("loss", "Lightning") and "on_step" in understood.note


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("lm loss", "loss"),
        ("lm loss validation", "eval_loss"),
        ("lm loss validation ppl", "statistic"),  # exp of the eval loss, not a second one
        ("lm loss vs samples", "loss"),
        ("grad-norm", "grad_norm"),
        ("iteration-time", "step_time"),
        ("forward-backward-time", "step_time"),
        ("loss-scale", "schedule"),
        ("params-norm", "statistic"),
    ],
)
def test_megatron_names(name, kind):
    assert understand(name).kind == kind


def test_openrlhf_logprobs_diff_is_a_drift_from_the_reference_not_a_rollout_mismatch():
    # OpenRLHF/OpenRLHF openrlhf/trainer/ray/ppo_actor.py: logprobs_diff = actor - base (reference) log-probs
    assert understand("train/logprobs_diff").kind == "statistic"
    assert understand("train/vllm_kl").kind == "logprob_mismatch"


def test_modded_nanogpt_clock_and_running_mean_are_not_read_as_step_times():
    # KellerJordan/modded-nanogpt train_gpt.py: `train_time:{training_time_ms:.0f}ms step_avg:{...:.2f}ms`
    understood = understand_all(["train_loss", "val_loss", "train_time", "step_avg"])
    assert {name: u.kind for name, u in understood.items()} == {
        "train_loss": "loss",
        "val_loss": "eval_loss",
        "train_time": "schedule",
        "step_avg": "statistic",
    }
    assert understood["train_time"].framework == "modded-nanogpt"
    assert understand("train_time").kind == "unknown" and understand("step_avg").kind == "unknown"


def test_llmc_short_names_are_read_as_llmc_only_beside_trl():
    assert understand_all(["trl", "tel", "lr", "norm", "eval"])["norm"].kind == "grad_norm"
    assert understand("norm").kind == "unknown" and understand("eval").kind == "unknown"


@pytest.mark.parametrize(
    ("metric", "kind", "framework"),
    [
        # NVIDIA-NeMo/RL at 7ea279ab: nemo_rl/algorithms/utils.py print_performance_metrics
        # (performance_metrics["train_fp_utilization"], ["train_flops_per_gpu"]), logged by grpo.py
        # with prefix="performance"; sft.py logs metrics["train_fp_utilization"] with prefix="train"
        ("performance/train_fp_utilization", "mfu", "NeMo-RL"),
        ("train/train_fp_utilization", "mfu", "NeMo-RL"),
        ("performance/train_flops_per_gpu", "throughput", "NeMo-RL"),
        ("performance/training_worker_idle_time_ratio", "statistic", "NeMo-RL"),
        # grpo.py / sft.py: timing_metrics["valid_tokens_per_sec_per_gpu"], prefix="timing/train"
        ("timing/train/valid_tokens_per_sec_per_gpu", "throughput", "NeMo-RL"),
        ("timing/train/total_step_time", "step_time", "generic"),
        # THUDM/slime at 624b824a: slime/observability/train_metric_utils.py
        # log_dict["perf/actor_train_tok_per_s"], log_dict["perf/actor_train_tflops"]
        ("perf/actor_train_tok_per_s", "throughput", "slime"),
        ("perf/actor_train_tflops", "throughput", "slime"),
        ("perf/actor_train_time", "step_time", "slime"),
        # vwxyzjn/cleanrl at fe8d8a03: cleanrl/ppo.py writer.add_scalar("losses/explained_variance", ...),
        # writer.add_scalar("charts/SPS", ...)
        ("losses/explained_variance", "statistic", "CleanRL"),
        ("charts/SPS", "throughput", "CleanRL"),
        # mlflow/mlflow: mlflow/system_metrics/metrics/gpu_monitor.py, cpu_monitor.py, prefix "system/"
        ("system/gpu_0_utilization_percentage", "system", "MLflow"),
        ("system/gpu_3_memory_usage_megabytes", "system", "MLflow"),
        ("system/cpu_utilization_percentage", "system", "MLflow"),
        ("system/node_0/system_memory_usage_megabytes", "system", "MLflow"),
        ("system/network_transmit_megabytes", "system", "MLflow"),
    ],
)
def test_names_from_the_frameworks_own_source_get_their_kind(metric, kind, framework):
    understood = understand(metric)
    assert (understood.kind, understood.framework) == (kind, framework)


def test_cleanrls_td_losses_are_rl_losses_in_a_cleanrl_run():
    cleanrl = understand_all(["losses/td_loss", "losses/q_values", "charts/SPS", "charts/episodic_return"])
    assert (cleanrl["losses/td_loss"].kind, cleanrl["losses/q_values"].kind) == ("policy_loss", "statistic")
    assert understand("losses/td_loss").kind == "loss"  # without CleanRL's charts, a plain loss


def test_a_drop_of_nemo_rls_valid_tokens_per_second_is_named():
    # logged among the timings, it was read as a step time, whose fall is no problem
    rng = np.random.default_rng(3)
    values = 5200.0 + rng.normal(0, 45.0, 500)
    values[330:] *= 0.6
    events = classify_series(np.arange(500), values, metric="timing/train/valid_tokens_per_sec_per_gpu")
    alarms = [e for e in events if e.severity != "info"]
    assert alarms and alarms[0].kind == "level_shift" and 330 <= alarms[0].start_step <= 336
    assert alarms[0].details["after"] < alarms[0].details["before"]


def test_cleanrls_explained_variance_rising_toward_one_is_no_divergence():
    rng = np.random.default_rng(4)
    t = np.arange(600)
    values = 0.95 * (1 - np.exp(-t / 90)) - 0.3 + rng.normal(0, 0.02, len(t))
    assert [e for e in classify_series(t, values, metric="losses/explained_variance") if e.severity != "info"] == []
    # read as a loss, the same healthy rise is the "divergence" issue 32 saw
    assert [e.kind for e in classify_series(t, values, metric="losses/explained_variance", kind="loss")]


def test_mlflows_gpu_idling_through_checkpoints_raises_nothing():
    t = np.arange(400)
    values = np.where(t % 100 < 8, 2.0, 97.0)
    assert classify_series(t, values, metric="system/gpu_0_utilization_percentage") == []
