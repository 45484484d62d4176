"""How a metric's name is understood: declared, recognised (generic conventions), or unknown.
The framework maps have their own tests, one module per framework (test_frameworks.py)."""

import pytest
from holter import loader, system, throughput
from holter_server.vocabulary import understand, understand_all
from holter_server.vocabulary.names import declared_kind, is_per_layer, layer_index, layer_of, own_name
from holter_server.vocabulary.profiles import profile_for
from holter_server.vocabulary.signals import signal


@pytest.mark.parametrize(
    ("metric", "kind"),
    [
        ("loss", "loss"),
        ("train/loss", "loss"),
        ("eval_loss", "eval_loss"),
        ("val_loss", "eval_loss"),
        ("mng124m_valueembed_train_loss", "loss"),
        ("cross_entropy", "loss"),
        ("sampling/sampling_logp_difference/mean", "logprob_mismatch"),
        ("training/rollout_probs_diff_std", "logprob_mismatch"),
        ("vllm_kl", "logprob_mismatch"),
        ("act_norm/layer.3", "activation_norm"),
        ("grad_norm/layer.0", "grad_norm"),
        ("tokens_per_s", "throughput"),
        ("throughput/samples_per_s", "throughput"),
        ("step_time", "step_time"),
        ("step_time_ms", "step_time"),
        ("timing_s/step", "step_time"),
        ("perf/time_per_step", "step_time"),
        ("logprob_mismatch/abs_diff_p99", "logprob_mismatch"),
        ("logprob_mismatch/kl_k3", "logprob_mismatch"),
    ],
)
def test_common_names_are_recognised_as_their_kind(metric, kind):
    understood = understand(metric)
    assert (understood.kind, understood.source) == (kind, "recognised")


@pytest.mark.parametrize(
    ("metric", "kind"),
    [
        ("reward", "reward"),
        ("accuracy", "reward"),
        ("eval_accuracy", "reward"),
        ("kl", "statistic"),
        ("objective/kl", "kl"),
        ("entropy", "statistic"),
        ("clip_ratio/high_mean", "statistic"),
        ("pg_loss", "policy_loss"),
        # stable-baselines3's PPO (stable_baselines3/ppo/ppo.py, common/base_class.py)
        ("train/policy_gradient_loss", "policy_loss"),
        ("rollout/ep_rew_mean", "reward"),
        ("train/train_current_rollout_logprob_max_abs_diff", "statistic"),
        ("learning_rate", "schedule"),
        ("epoch", "schedule"),
        ("global_step", "schedule"),
        ("train/step", "schedule"),
        ("loss_scale", "schedule"),
    ],
)
def test_statistics_rewards_and_schedules_are_never_read_as_losses(metric, kind):
    understood = understand(metric)
    assert understood.kind == kind and signal(kind).watch != "vital"


def test_a_name_nothing_recognises_is_unknown_not_a_loss():
    understood = understand("attn/custom_diag_17")
    assert (understood.kind, understood.source) == ("unknown", "unknown")
    profile = profile_for("attn/custom_diag_17")
    assert (
        profile.name == "unknown"
        and profile.severity_cap == "info"
        and set(profile.detectors) == {"nonfinite", "spike"}
    )


def test_a_declared_kind_wins_over_the_name():
    understood = understand("train/ce", declarations={"train/ce": {"kind": "eval_loss"}})
    assert (understood.kind, understood.source, understood.rule) == ("eval_loss", "declared", "train/ce")
    assert understand("grad_norm", declarations={"grad_norm": "statistic"}).kind == "statistic"


def test_an_exact_declaration_beats_a_glob_and_the_longer_glob_beats_the_shorter():
    declarations = {"*": "statistic", "eval/*": "eval_loss", "eval/acc": {"kind": "reward"}, "eval/ppl*": "loss"}
    assert declared_kind("eval/acc", declarations) == ("reward", "eval/acc")
    assert declared_kind("eval/ppl_wiki", declarations) == ("loss", "eval/ppl*")
    assert declared_kind("eval/bleu", declarations) == ("eval_loss", "eval/*")
    assert declared_kind("train/x", declarations) == ("statistic", "*")


def test_a_definition_without_a_kind_declares_nothing():
    assert understand("loss", declarations={"loss": {"summary": "min"}}).source == "recognised"


def test_mismatch_maxima_get_a_wider_tolerance_than_means():
    assert (
        profile_for("sampling/sampling_logp_difference/max").abs_tolerance
        > profile_for("sampling/sampling_logp_difference/mean").abs_tolerance
    )


def test_an_unknown_kind_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown metric kind 'temperature'; expected one of loss"):
        profile_for("loss", "temperature")


@pytest.mark.parametrize(
    ("metric", "tolerance"),
    [
        ("logprob_mismatch/abs_diff_mean", 0.05),
        ("logprob_mismatch/abs_diff_p99", 0.3),
        ("logprob_mismatch/abs_diff_max", 0.5),
        ("logprob_mismatch/frac_above_tol", 0.02),
        ("logprob_mismatch/kl_k3", 0.01),
        ("vllm_kl", 0.05),
    ],
)
def test_mismatch_statistics_get_tolerances_fitting_what_they_measure(metric, tolerance):
    assert profile_for(metric).abs_tolerance == tolerance


def test_markers_are_found_among_the_run_s_other_metrics():
    alone = understand_all(["loss", "grad_norm"])
    beside_grpo = understand_all(["loss", "grad_norm", "reward", "reward_std"])
    assert alone["loss"].kind == "loss" and beside_grpo["loss"].kind == "policy_loss"


# torchtitan logs its data-loading time and share and its MFU under these names
# (pytorch/torchtitan: torchtitan/components/metrics.py, MetricsProcessor.log); other jobs name
# theirs by the same conventions.
@pytest.mark.parametrize(
    ("metric", "kind"),
    [
        ("time_metrics/data_loading(%)", "data_wait"),
        ("time_metrics/data_loading(s)", "statistic"),
        ("mfu(%)", "mfu"),
        ("loader/wait_fraction", "data_wait"),
        ("loader/wait_s", "statistic"),
        ("loader/compute_s", "compute_time"),
        ("input_wait_frac", "data_wait"),
        ("train/compute_time", "compute_time"),
        ("throughput/mfu", "mfu"),
    ],
)
def test_data_wait_compute_time_and_mfu_are_recognised(metric, kind):
    assert understand(metric).kind == kind


# Model FLOPs utilisation as the frameworks spell it, each read from its source: karpathy/nanoGPT
# train.py (`"mfu": running_mfu*100`), pytorch/torchtitan components/metrics.py (`mfu(%)`),
# Lightning's ThroughputMonitor (`device/mfu`, with its stage and separator), mosaicml/composer
# SpeedMonitor and allenai/OLMo-core's speed monitor (`throughput/device/mfu`, `.../MFU`), levanter
# (`throughput/mfu`), volcengine/verl fsdp_workers.py (`perf/mfu/actor`), NVIDIA-NeMo/RL utils.py
# (`train_fp_utilization`, logged under `performance/` by GRPO and `train/` by SFT and DPO).
@pytest.mark.parametrize(
    "metric",
    [
        "mfu",
        "mfu(%)",
        "train|device/mfu",
        "throughput/device/mfu",
        "throughput/device/MFU",
        "throughput/mfu",
        "perf/mfu/actor",
        "perf/mfu/actor_infer",
        "performance/train_fp_utilization",
        "train/train_fp_utilization",
    ],
)
def test_model_flops_utilisation_is_its_own_kind_never_a_throughput(metric):
    understood = understand(metric)
    assert understood.kind == "mfu" and signal("mfu").panel == "mfu" != signal("throughput").panel


@pytest.mark.parametrize("metric", ["tflops", "performance/train_flops_per_gpu", "perf/actor_train_tflops"])
def test_flops_per_second_stay_a_throughput(metric):
    assert understand(metric).kind == "throughput"


@pytest.mark.parametrize(
    ("names", "metric", "unit"),
    [
        (["mfu(%)"], "mfu(%)", "percent"),  # torchtitan: 100 * flops per token * tokens/s / peak
        (["iter", "train/loss", "val/loss", "mfu"], "mfu", "percent"),  # nanoGPT: running_mfu*100
        (["mfu"], "mfu", None),  # a bare `mfu` of another job: its values tell
        (["throughput/device/mfu"], "throughput/device/mfu", None),  # Composer's fraction, OLMo-core's percent
        (["performance/train_fp_utilization"], "performance/train_fp_utilization", "fraction"),
        (["perf/mfu/actor"], "perf/mfu/actor", "fraction"),
        (["holter/throughput/mfu"], "holter/throughput/mfu", "fraction"),
        (["time_metrics/data_loading(%)"], "time_metrics/data_loading(%)", "percent"),
        (["loader/wait_fraction"], "loader/wait_fraction", "fraction"),
        (["input_wait_pct"], "input_wait_pct", "percent"),
    ],
)
def test_a_share_says_whether_it_is_logged_in_percent_where_its_name_or_framework_tells(names, metric, unit):
    assert understand_all(names)[metric].unit == unit


@pytest.mark.parametrize(
    ("metric", "compute_only"),
    [
        ("holter/throughput/compute_tokens_per_s", True),
        ("holter/throughput/compute_samples_per_s", True),
        ("holter/throughput/compute_mfu", True),
        ("holter/compute_time", True),
        ("holter/loader/compute_s", True),
        ("compute_tokens_per_s", True),
        ("train/compute_time", True),
        ("holter/throughput/tokens_per_s", False),
        ("holter/throughput/mfu", False),
        ("holter/step_time", False),
        ("tokens_per_s", False),
    ],
)
def test_the_step_s_own_work_is_told_from_the_whole_step(metric, compute_only):
    assert understand(metric).compute_only is compute_only


def test_the_api_shape_of_an_understanding_says_its_unit_and_whether_it_is_compute_only():
    served = understand("holter/throughput/compute_mfu").to_dict()
    assert served["unit"] == "fraction" and served["compute_only"] is True
    assert understand("mfu(%)", declarations={"mfu(%)": "mfu"}).to_dict()["unit"] == "percent"


# What Holter's own client logs, all under holter/: holter.torch.watch (client/holter/torch.py),
# Run.timed_step / log_throughput and the Trainer callback (client/holter/throughput.py), the
# loader watch (client/holter/loader.py) and the system sampler (client/holter/system.py).
@pytest.mark.parametrize(
    ("metric", "kind"),
    [
        ("holter/grad_norm", "grad_norm"),
        ("holter/grad_norm/transformer.h.3", "grad_norm"),
        ("holter/act_norm/transformer.h.3", "activation_norm"),
        ("holter/step_time", "step_time"),
        ("holter/throughput/tokens_per_s", "throughput"),
        ("holter/throughput/samples_per_s", "throughput"),
        ("holter/throughput/mfu", "mfu"),
        ("holter/throughput/compute_mfu", "mfu"),
        ("holter/throughput/compute_tokens_per_s", "throughput"),
        ("holter/compute_time", "compute_time"),
        ("holter/loader/wait_fraction", "data_wait"),
        ("holter/loader/wait_s", "statistic"),
        ("holter/loader/compute_s", "compute_time"),
        ("holter/system/gpu.0.memory_used_frac", "gpu_memory"),
        ("holter/system/gpu.3.utilization", "gpu_utilization"),
        ("holter/system/gpu.1.throttle.thermal", "gpu_throttle"),
        ("holter/system/gpu.1.throttle.power", "gpu_throttle"),
        ("holter/system/gpu.0.memory_used_gib", "system"),
        ("holter/system/memory.used_frac", "system"),
        ("holter/system/cpu.percent", "system"),
    ],
)
def test_holters_own_names_are_read_by_holters_map(metric, kind):
    understood = understand(metric)
    assert (understood.kind, understood.source, understood.framework) == (kind, "recognised", "holter")


def test_the_names_the_client_modules_log_are_the_ones_holters_map_reads():
    # the service reads the share and the compute time, and only watches the raw wait
    assert [understand(name).kind for name in (loader.WAIT_FRACTION, loader.COMPUTE, loader.WAIT)] == [
        "data_wait",
        "compute_time",
        "statistic",
    ]
    assert [understand(name).kind for name in (throughput.STEP_TIME, throughput.TOKENS_PER_S, throughput.MFU)] == [
        "step_time",
        "throughput",
        "mfu",
    ]
    assert [understand(name).kind for name in throughput.COMPUTE_ONLY] == [
        "compute_time",
        "throughput",
        "throughput",
        "mfu",
    ]
    assert understand(system.PREFIX + "gpu.0.utilization").kind == "gpu_utilization"


@pytest.mark.parametrize("metric", ["system/gpu.0.utilization", "system/gpu.0.memory_used_frac", "system/cpu.percent"])
def test_a_jobs_own_system_names_are_not_read_as_holters_vitals(metric):
    # only Holter's sampler writes under holter/system/: a job's own `system/*` is its own business
    assert understand(metric).framework != "holter" and not signal(understand(metric).kind).system


@pytest.mark.parametrize(
    ("metric", "own", "per_layer"),
    [
        ("holter/grad_norm", "grad_norm", False),
        ("holter/grad_norm/layer.3", "grad_norm/layer.3", True),
        ("grad_norm", "grad_norm", False),
        ("grad_norm/layer.3", "grad_norm/layer.3", True),
        ("holterx/grad_norm", "holterx/grad_norm", True),
    ],
)
def test_holters_namespace_is_taken_off_before_a_name_is_read_as_one_layers(metric, own, per_layer):
    assert (own_name(metric), is_per_layer(metric)) == (own, per_layer)


def test_a_wait_share_in_percent_gets_its_ceiling_in_percent():
    assert (
        profile_for("time_metrics/data_loading(%)").abs_tolerance
        == 100 * profile_for("holter/loader/wait_fraction").abs_tolerance
    )


def test_system_vitals_other_than_the_gpu_s_are_drawn_not_read():
    assert not signal("system").analysed and signal("gpu_memory").analysed and signal("gpu_memory").system


@pytest.mark.parametrize("metric", ["loss/p95", "train/loss/p5", "loss/median", "grads/p25", "eval/loss/p75"])
def test_a_distributions_quantile_is_a_statistic_not_the_metric(metric):
    # holter.Histogram / wandb.Histogram are logged as NAME/min, /p5, ... /max (client/holter/media.py)
    assert understand(metric).kind == "statistic"


def test_a_distributions_extremes_are_statistics_in_a_run_that_logs_its_quantiles():
    with_histogram = understand_all(
        ["loss", "loss/min", "loss/p95", "loss/max", "sampling/sampling_logp_difference/max"]
    )
    assert [with_histogram[n].kind for n in ("loss", "loss/min", "loss/max")] == ["loss", "statistic", "statistic"]
    # a framework's own maximum keeps its meaning
    assert with_histogram["sampling/sampling_logp_difference/max"].kind == "logprob_mismatch"
    assert understand_all(["loss/max"])["loss/max"].kind == "loss"  # no quantiles: nothing says it is one


def test_the_easiest_sequences_loss_reaching_zero_is_not_too_good_to_be_true():
    import numpy as np
    from holter_server.detect import classify_series

    # the per-sequence losses' lowest quantile: some sequences are learnt by heart, as they should be
    rng = np.random.default_rng(5)
    t = np.arange(600)
    values = np.maximum(0.002, 4.0 * np.exp(-t / 80) + np.abs(rng.normal(0, 0.01, len(t))))
    for metric in ("loss/p5", "loss/min"):
        kind = understand_all(["loss/min", "loss/p5", "loss/p95"])[metric].kind
        assert [e for e in classify_series(t, values, metric=metric, kind=kind) if e.severity != "info"] == []
    # read as a loss (issue 32), the same curve is "too good"
    assert [e.kind for e in classify_series(t, values, metric="loss/p5", kind="loss") if e.severity != "info"] == [
        "too_good"
    ]


@pytest.mark.parametrize(
    "metric",
    [
        "explained_variance",
        "train/explained_variance",  # stable-baselines3 stable_baselines3/ppo/ppo.py
        "critic/vf_explained_var",  # verl
        "value/explained_var",
        "eval/r2",
        "r2_score",
    ],
)
def test_explained_variance_like_statistics_are_not_losses(metric):
    assert understand(metric).kind == "statistic"


@pytest.mark.parametrize(
    ("metric", "kind"),
    [
        ("timing/tokens_per_sec", "throughput"),
        ("timing_s/samples_per_second", "throughput"),
        ("perf/tok_per_s", "throughput"),
        ("time/fps", "throughput"),  # stable-baselines3 common/base_class.py
        ("charts/sps", "throughput"),
        ("timing/train/total_step_time", "step_time"),
    ],
)
def test_a_rate_is_a_throughput_even_among_timings(metric, kind):
    assert understand(metric).kind == kind


@pytest.mark.parametrize(
    ("metric", "layer"),
    [
        ("act_norm/layer.5", ("act_norm", "layer.5")),
        ("holter/act_norm/h.0", ("holter/act_norm", "h.0")),
        ("holter/act_norm", None),  # Holter's namespace is no family
        ("grad_norm", None),
    ],
)
def test_one_layer_s_series_names_its_family_then_its_layer(metric, layer):
    assert layer_of(metric) == layer
    assert is_per_layer(metric) is (layer is not None)


@pytest.mark.parametrize(
    ("metric", "index"),
    [
        ("act_norm/layer.11", ("act_norm/layer*", 11)),
        ("model.layers.3.mlp/grad_norm", ("model.layers*.mlp/grad_norm", 3)),
        ("transformer.h.7/act_norm", ("transformer.h*/act_norm", 7)),
        ("loss", None),
    ],
)
def test_a_numbered_layer_of_a_stack_gives_its_family_and_number(metric, index):
    assert layer_index(metric) == index


def test_a_metric_is_served_with_its_numbered_layer():
    from holter_server.schemas.runs import MetricPublic
    from holter_server.store.models import MetricRow

    def served(name: str) -> dict | None:
        row = MetricRow(run_id="r", metric_id=1, name=name, count=1, first_step=0, last_step=0, last_value=1.0)
        return MetricPublic.from_row(row).model_dump(mode="json")["layer"]

    assert served("act_norm/layer.11") == {"family": "act_norm/layer*", "index": 11}
    assert served("loss") is None


# An RL policy's health (issue 45): the frameworks' own names for the KL, the entropy, the clip
# fraction and the reward, and the statistics of them that are not them.
@pytest.mark.parametrize(
    "names",
    [
        ["approx_kl"],
        ["losses/approx_kl"],  # CleanRL
        ["losses/old_approx_kl"],
        ["train/approx_kl", "train/policy_gradient_loss"],  # stable-baselines3
        ["policy/approxkl_avg"],  # TRL's PPO
        ["actor/ppo_kl"],  # verl
        ["train/ppo_kl"],  # OpenRLHF, slime
    ],
)
def test_ppo_kl_to_the_old_policy_is_a_kl_with_ppos_band_on_its_own(names):
    understood = understand_all(names)[names[0]]
    profile = profile_for(names[0])
    assert (understood.kind, profile.band_ceiling, profile.band_critical) == ("kl", 0.1, 0.5)


@pytest.mark.parametrize(
    ("names", "metric"),
    [
        (["kl", "reward", "reward_std"], "kl"),  # TRL's GRPO
        (["objective/kl", "objective/scores"], "objective/kl"),  # TRL's PPO, summed per sequence
        (["actor/kl_loss", "actor/pg_loss"], "actor/kl_loss"),  # verl
        (["train/kl", "train/ppo_kl"], "train/kl"),  # OpenRLHF
        (["kl_divergence", "pg_loss"], "kl_divergence"),
    ],
)
def test_kl_to_the_reference_is_a_kl_without_a_band(names, metric):
    understood = understand_all(names)[metric]
    assert understood.kind == "kl" and profile_for(metric, understood.kind).band_ceiling is None


def test_a_bare_kl_with_nothing_rl_beside_it_stays_a_statistic():
    assert understand_all(["kl", "loss", "recon_loss"])["kl"].kind == "statistic"  # a VAE's KL term


@pytest.mark.parametrize(
    ("names", "metric"),
    [
        (["entropy", "reward_std", "kl"], "entropy"),  # TRL's GRPO
        (["losses/entropy", "losses/approx_kl"], "losses/entropy"),  # CleanRL
        (["actor/entropy", "actor/pg_loss"], "actor/entropy"),  # verl
        (["train/entropy_loss", "train/ppo_kl"], "train/entropy_loss"),  # slime: the entropy itself
    ],
)
def test_a_policys_entropy_beside_an_rl_metric_is_an_entropy(names, metric):
    assert understand_all(names)[metric].kind == "entropy"


@pytest.mark.parametrize(
    ("names", "metric"),
    [
        (["entropy", "loss", "mean_token_accuracy"], "entropy"),  # TRL's SFT: the data's token entropy
        (["train/entropy_loss", "train/policy_gradient_loss"], "train/entropy_loss"),  # SB3: minus it
        (["cross_entropy", "reward_std"], "cross_entropy"),
    ],
)
def test_an_entropy_that_is_not_a_policys_is_not_read_as_one(names, metric):
    assert understand_all(names)[metric].kind != "entropy"


@pytest.mark.parametrize(
    ("names", "metric"),
    [
        (["reward", "reward_std"], "reward_std"),
        (["reward", "rewards/accuracy_reward/std"], "rewards/accuracy_reward/std"),
        (["critic/score/mean", "critic/score/max"], "critic/score/max"),
        (["critic/score/mean", "critic/score/min"], "critic/score/min"),
        (["clip_ratio/region_mean", "clip_ratio/high_max", "reward_std"], "clip_ratio/high_max"),
        (["loss", "rewards/chosen", "rewards/margins"], "rewards/chosen"),  # DPO's implicit reward
        (["objective/kl", "objective/non_score_reward"], "objective/non_score_reward"),  # −β·KL
    ],
)
def test_statistics_of_a_reward_kl_or_clip_fraction_are_not_read_as_it(names, metric):
    assert understand_all(names)[metric].kind == "statistic"


@pytest.mark.parametrize(
    ("names", "metric"),
    [
        (["reward", "reward_std"], "reward"),
        (["reward", "rewards/accuracy_reward/mean"], "rewards/accuracy_reward/mean"),
        (["critic/score/mean", "critic/score/max"], "critic/score/mean"),
        (["loss", "rewards/chosen", "rewards/margins"], "rewards/margins"),
    ],
)
def test_the_reward_itself_stays_a_reward(names, metric):
    assert understand_all(names)[metric].kind == "reward"


@pytest.mark.parametrize(
    ("names", "metric"),
    [
        (["losses/clipfrac", "losses/approx_kl"], "losses/clipfrac"),
        (["policy/clipfrac_avg"], "policy/clipfrac_avg"),
        (["actor/pg_clipfrac", "actor/ppo_kl"], "actor/pg_clipfrac"),
        (["clip_ratio/region_mean", "reward_std"], "clip_ratio/region_mean"),
    ],
)
def test_the_ppo_clip_fraction_is_a_clip_fraction(names, metric):
    assert understand_all(names)[metric].kind == "clip_fraction"


def test_a_value_heads_clip_fraction_is_not_the_policys():
    assert understand_all(["policy/clipfrac_avg", "val/clipfrac_avg"])["val/clipfrac_avg"].kind == "statistic"


@pytest.mark.parametrize("metric", ["kl_coef", "entropy_coef", "kl_penalty_coeff"])
def test_rl_coefficients_are_schedules(metric):
    assert understand_all([metric, "approx_kl"])[metric].kind == "schedule"
