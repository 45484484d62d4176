import pytest

from holter_server.detect import infer_kind, is_vital_sign, profile_for
from holter_server.detect.kinds import recognised_kind


@pytest.mark.parametrize(
    ("metric", "kind"),
    [
        ("loss", "loss"),
        ("train/loss", "loss"),
        ("eval_loss", "eval_loss"),
        ("val_loss", "eval_loss"),
        ("mng124m_valueembed_train_loss", "loss"),
        ("sampling/sampling_logp_difference/mean", "logprob_mismatch"),
        ("sampling/sampling_logp_difference/max", "logprob_mismatch"),
        ("training/rollout_probs_diff_mean", "logprob_mismatch"),
        ("training/rollout_probs_diff_std", "logprob_mismatch"),
        ("vllm_kl", "logprob_mismatch"),
        ("train_rollout_logprob_abs_diff", "logprob_mismatch"),
        ("act_norm/layer.3", "activation_norm"),
        ("grad_norm/layer.0", "grad_norm"),
        ("tokens_per_s", "throughput"),
        ("step_time", "step_time"),
        ("step_time_ms", "step_time"),
    ],
)
def test_kind_is_inferred_from_framework_metric_names(metric, kind):
    assert infer_kind(metric) == kind


def test_mismatch_maxima_get_a_wider_tolerance_than_means():
    assert profile_for("sampling/sampling_logp_difference/max").abs_tolerance > profile_for(
        "sampling/sampling_logp_difference/mean"
    ).abs_tolerance


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown metric kind"):
        profile_for("loss", "temperature")


def test_learning_rate_and_epoch_are_not_vital_signs():
    assert not is_vital_sign("learning_rate") and not is_vital_sign("epoch") and is_vital_sign("grad_norm")


@pytest.mark.parametrize(
    ("metric", "kind"),
    [
        ("timing_s/step", "step_time"),
        ("timing_s/gen", "step_time"),
        ("timing_s/update_actor", "step_time"),
        ("perf/time_per_step", "step_time"),
        ("logprob_mismatch/abs_diff_mean", "logprob_mismatch"),
        ("logprob_mismatch/abs_diff_p99", "logprob_mismatch"),
        ("logprob_mismatch/abs_diff_max", "logprob_mismatch"),
        ("logprob_mismatch/frac_above_tol", "logprob_mismatch"),
        ("logprob_mismatch/kl_k3", "logprob_mismatch"),
        ("actor/grad_norm", "grad_norm"),
        ("perf/throughput", "throughput"),
        ("cross_entropy", "loss"),
        ("critic/vf_loss", "loss"),
    ],
)
def test_verl_and_holter_rl_names_are_watched_as_their_kind(metric, kind):
    assert recognised_kind(metric) == kind and infer_kind(metric) == kind and is_vital_sign(metric)


@pytest.mark.parametrize(
    "metric",
    [
        "training/rollout_actor_probs_pearson_corr",
        "reward",
        "critic/rewards/mean",
        "rewards/accuracy_reward",
        "critic/score/mean",
        "kl",
        "objective/kl",
        "actor/ppo_kl",
        "actor/kl_loss",
        "entropy",
        "actor/entropy",
        "clip_ratio/high_mean",
        "clip_ratio",
        "actor/pg_clipfrac",
        "actor/pg_loss",
        "accuracy",
        "eval_accuracy",
        "response_length/mean",
        "loss_scale",
    ],
)
def test_rl_statistics_that_are_not_losses_are_not_watched_nor_analysed(metric):
    assert recognised_kind(metric) is None and not is_vital_sign(metric)


def test_unknown_names_are_not_watched_live_but_analysed_as_a_loss():
    assert recognised_kind("my_metric") is None and is_vital_sign("my_metric") and infer_kind("my_metric") == "loss"


def test_step_counters_stay_bookkeeping_while_step_timings_are_step_times():
    assert recognised_kind("global_step") is None and not is_vital_sign("train/step")
    assert recognised_kind("timing_s/step") == "step_time"


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
