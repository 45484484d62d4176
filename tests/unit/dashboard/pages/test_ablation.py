"""The compare page's verdict card: the service's sentence and power sentence shown apart."""

from __future__ import annotations

from holter_dashboard.pages.ablation import signed, without_power


def test_the_power_sentence_is_shown_apart_from_the_verdict_sentence() -> None:
    power = "no detectable difference at 3 paired seeds; a difference of 0.0066 or more would be found 80% of the time"
    sentence = f"eval_loss 0.0005 higher at 5M tokens (95% CI -0.0045 to +0.0055; paired t-test, p = 0.69): {power}"
    assert (
        without_power(sentence, power)
        == "eval_loss 0.0005 higher at 5M tokens (95% CI -0.0045 to +0.0055; paired t-test, p = 0.69)"
    )
    assert without_power("eval_loss 0.03 lower: a real effect", None) == "eval_loss 0.03 lower: a real effect"


def test_a_difference_keeps_its_sign_and_a_missing_one_is_a_dash() -> None:
    assert (signed(-0.03119), signed(0.0005388), signed(None), signed(float("nan"))) == (
        "-0.03119",
        "+0.0005388",
        "—",
        "—",
    )
