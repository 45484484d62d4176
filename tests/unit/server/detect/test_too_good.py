import numpy as np
from detect_curves import decaying_loss
from holter_server.detect import classify_series


def test_lm_loss_falling_to_hundredths_is_too_good():
    t = np.arange(1000)
    values = 0.03 + 10.8 * np.exp(-t / 100)
    events = classify_series(t, values, metric="loss")
    assert [e.kind for e in events] == ["too_good"]


def test_loss_below_the_expected_floor_is_too_good():
    values = decaying_loss(floor=1.5)
    events = classify_series(np.arange(800), values, metric="loss", expected_floor=2.5)
    assert [e.kind for e in events] == ["too_good"] and "expected floor 2.5" in events[0].summary


def test_loss_at_its_expected_floor_is_fine():
    values = decaying_loss(floor=2.5)
    assert classify_series(np.arange(800), values, metric="loss", expected_floor=2.5) == []


def test_rl_loss_near_zero_is_not_too_good():
    values = np.random.default_rng(0).normal(0.0, 0.02, 500)
    assert "too_good" not in [e.kind for e in classify_series(np.arange(500), values, metric="loss")]


def test_small_vocabulary_model_from_scratch_at_hundredths_is_too_good():
    t = np.arange(300)
    values = (0.05 + 3.3 * np.exp(-t / 30)) * (1 + np.random.default_rng(1).normal(0, 0.03, 300))  # ln 26 at init
    assert "too_good" in [e.kind for e in classify_series(t, values, metric="loss")]


def test_fine_tune_ending_at_a_few_hundredths_is_not_too_good():
    t = np.arange(300)
    values = (0.02 + 1.3 * np.exp(-t / 20)) * (1 + np.random.default_rng(1).normal(0, 0.1, 300))  # a verifier SFT
    assert "too_good" not in [e.kind for e in classify_series(t, values, metric="loss")]


def test_loss_sitting_at_its_last_printed_digit_is_too_good_not_frozen():
    t = np.arange(400)
    values = np.round(0.0001 + 0.4 * np.exp(-t / 30), 4)  # printed to 4 decimals: 0.0001 from step ~270
    kinds = [(e.kind, e.details.get("cause")) for e in classify_series(t, values, metric="loss")]
    assert ("too_good", None) in kinds and ("plateau", "frozen") not in kinds
