"""Real public training curves (../shared/curves) give their labelled result."""

import pytest

from holter_server.detect import classify_series, is_alarm, verdict

from detect_curves import load_curve

CASES = {
    "mng124m_valueembed_train_loss.csv": ("loss", {"spike"}),
    "mng124m_valueembed_step_time_ms.csv": ("step_time", {"sawtooth"}),
    "mng124m_valueembed_val_loss.csv": ("eval_loss", set()),
    "llmc_gpt2_124m_train_loss.csv": ("loss", set()),
    "llmc_gpt2_124m_grad_norm.csv": ("grad_norm", set()),
    "llmc_gpt2_124m_val_loss.csv": ("eval_loss", set()),
    "unsloth_grpo_qwen3_4b_grad_norm_nan.csv": ("grad_norm", {"divergence"}),
    "swift_grpo_zero_grad_norm.csv": ("grad_norm", {"plateau"}),
    "tinyllama_sft_train_loss.csv": ("loss", set()),
    "tinyllama_sft_eval_loss.csv": ("eval_loss", set()),
    "tinyllama_sft_grad_norm.csv": ("grad_norm", set()),
    "overfit_30ep_train_loss.csv": ("loss", {"too_good"}),
    "overfit_30ep_eval_loss.csv": ("eval_loss", {"divergence"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_curve_names_its_labelled_problem_and_nothing_else_alarms(curves_dir, name):
    kind, expected = CASES[name]
    steps, values = load_curve(curves_dir / name)
    events = classify_series(steps, values, metric=name.removesuffix(".csv"), kind=kind)
    assert expected <= {e.kind for e in events}
    assert {e.kind for e in events if e.severity != "info"} <= expected
    if not expected:
        assert not is_alarm(verdict(events))


def test_modded_nanogpt_spikes_are_found_at_the_labelled_steps(curves_dir):
    steps, values = load_curve(curves_dir / "mng124m_valueembed_train_loss.csv")
    events = classify_series(steps, values, metric="loss")
    assert {e.peak_step for e in events if e.kind == "spike"} == {918, 946}


def test_shard_loading_period_is_estimated_within_ten_percent(curves_dir):
    steps, values = load_curve(curves_dir / "mng124m_valueembed_step_time_ms.csv")
    saw = [e for e in classify_series(steps, values, metric="step_time_ms") if e.kind == "sawtooth"][0]
    assert abs(saw.period - 189) <= 18.9


def test_one_step_pretraining_spikes_are_never_called_divergence(curves_dir):
    steps, values = load_curve(curves_dir / "llmc_gpt2_124m_train_loss.csv")
    assert "divergence" not in {e.kind for e in classify_series(steps, values, metric="loss")}
