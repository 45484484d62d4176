import pytest

from holter_server.detect import infer_kind, is_vital_sign, profile_for


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
