import numpy as np
from detect_curves import decaying_loss
from holter_server.detect import classify_series


def test_nan_is_divergence_naming_nan_and_the_first_bad_step():
    values = decaying_loss()
    values[600:] = np.nan
    events = classify_series(np.arange(800), values, metric="loss")
    assert [e.kind for e in events] == ["divergence"]
    assert events[0].start_step == 600 and events[0].severity == "critical"
    assert "became NaN at step 600" in events[0].summary


def test_positive_infinity_is_named_as_such():
    values = decaying_loss()
    values[600] = np.inf
    values[601:] = np.nan
    events = classify_series(np.arange(800), values, metric="loss")
    assert "became +Inf at step 600" in events[0].summary


def test_loss_that_shoots_up_and_stays_is_divergence_not_spike():
    values = decaying_loss()
    values[500:] *= 3.0
    events = classify_series(np.arange(800), values, metric="loss")
    assert [e.kind for e in events] == ["divergence"]
    assert "has not come back" in events[0].summary


def test_gradient_norm_growing_toward_inf_is_divergence():
    rng = np.random.default_rng(1)
    values = 0.3 * np.exp(rng.normal(0, 0.05, 1000))
    values[400:] *= np.exp(0.02 * np.arange(600))
    events = classify_series(np.arange(1000), values, metric="grad_norm")
    assert "divergence" in [e.kind for e in events]


def test_eval_loss_turning_up_is_divergence_on_the_eval_series():
    t = np.arange(40) / 40
    values = 1.2 + 2.5 * np.exp(-t / 0.05) + np.where(t > 0.25, (t - 0.25) * 3, 0)
    events = classify_series(np.arange(40) * 400, values, metric="eval_loss")
    assert [e.kind for e in events] == ["divergence"] and events[0].severity == "warning"


def test_gradient_norm_drifting_up_slowly_is_not_divergence():
    rng = np.random.default_rng(2)
    values = np.linspace(1.0, 2.6, 190) * np.exp(rng.normal(0, 0.1, 190))
    events = classify_series(np.arange(190) * 15, values, metric="grad_norm")
    assert all(e.severity == "info" for e in events)


def memorising_loss(n: int = 1500) -> np.ndarray:
    """A train loss driven to ~0.002 by memorisation, with its noise."""
    t = np.arange(n)
    return (0.002 + 2.0 * np.exp(-t / 60)) * (1 + np.random.default_rng(6).normal(0, 0.05, n))


def test_small_hump_on_a_memorising_loss_near_zero_that_recovered_is_not_a_divergence():
    values = memorising_loss()
    values[900:960] += 0.004 * np.hanning(60)  # 0.002 -> 0.006 -> 0.002
    events = classify_series(np.arange(1500), values, metric="loss")
    assert "divergence" not in [e.kind for e in events]


def test_memorising_loss_climbing_back_up_for_good_is_a_divergence():
    values = memorising_loss()
    values[900:] += 1.0
    events = classify_series(np.arange(1500), values, metric="loss")
    assert [e.kind for e in events if e.severity == "critical"] == ["divergence"]


def test_loss_rise_that_came_back_down_within_a_few_hundred_steps_is_a_spike_that_recovered():
    # up 3x for forty steps and back: an excursion, however wide, not a divergence (issue 29)
    values = decaying_loss()
    values[400:440] *= 3.0
    events = classify_series(np.arange(800), values, metric="loss")
    assert [e.kind for e in events if e.kind == "divergence"] == []
    (spike,) = [e for e in events if e.kind == "spike"]
    assert spike.severity == "info" and 400 <= spike.start_step <= 402 and spike.details["recovered_step"] <= 445
    assert "came back by step" in spike.summary


def test_loss_rise_that_came_back_after_more_than_a_few_hundred_steps_is_a_warning_not_critical():
    values = decaying_loss(1600)
    values[400:800] *= 3.0
    (event,) = [e for e in classify_series(np.arange(1600), values, metric="loss") if e.kind == "divergence"]
    assert event.severity == "warning" and "came back below" in event.summary


def test_nan_streak_that_finite_values_ended_is_a_warning():
    values = decaying_loss()
    values[400:420] = np.nan
    (event,) = classify_series(np.arange(800), values, metric="grad_norm")
    assert (
        event.kind == "divergence" and event.severity == "warning" and "before finite values returned" in event.summary
    )


# The loss of `holter demo --real lr_too_high` (a tiny GPT warmed up to a learning rate of 1.0,
# no clipping) as one CPU trained it: from ~3.2 up to 270 within 60 steps, then swinging between
# 90 and 270. The swings widened the series' own noise band until the rise detector stopped
# counting the level "above" at 55, 77 and 140, at 28-52x the minimum.
EXPLODED_LOSS = [
    3.446,
    3.055,
    3.159,
    3.196,
    3.597,
    3.424,
    3.75,
    4.263,
    3.729,
    3.391,
    3.195,
    3.094,
    3.364,
    3.459,
    3.109,
    3.487,
    3.313,
    3.22,
    3.24,
    3.088,
    3.177,
    3.174,
    3.42,
    3.62,
    3.251,
    4.088,
    3.723,
    3.743,
    4.671,
    4.951,
    4.436,
    5.618,
    5.603,
    5.973,
    10.189,
    7.075,
    6.523,
    6.823,
    11.239,
    10.522,
    20.792,
    27.837,
    26.759,
    31.604,
    48.769,
    42.053,
    30.488,
    44.637,
    52.434,
    47.007,
    86.185,
    137.449,
    159.648,
    70.775,
    42.887,
    105.769,
    99.319,
    106.805,
    126.413,
    123.949,
    134.221,
    137.619,
    152.53,
    72.359,
    197.403,
    244.174,
    255.957,
    128.36,
    266.111,
    226.393,
    169.87,
    259.277,
    257.537,
    280.241,
    245.17,
    277.958,
    150.5,
    164.536,
    154.521,
    187.607,
    220.962,
    197.171,
    236.915,
    303.522,
    320.318,
    203.151,
    230.291,
    243.308,
    200.44,
    226.326,
    236.593,
    289.769,
    258.134,
    229.04,
    216.518,
    165.045,
    152.665,
    271.199,
    297.04,
    268.555,
    269.426,
    233.863,
    160.387,
    246.387,
    217.176,
    242.327,
    252.418,
    220.057,
    207.682,
    151.252,
    239.87,
    155.193,
    161.601,
    136.766,
    157.912,
    114.276,
    120.165,
    139.79,
    96.567,
    139.29,
    128.402,
    140.638,
    155.054,
    159.807,
    197.447,
    114.406,
    167.625,
    217.224,
    206.766,
    185.43,
    167.784,
    121.005,
    160.768,
    199.536,
    188.401,
    124.312,
    125.232,
    102.258,
    141.194,
    133.22,
    88.982,
    93.928,
    130.565,
    110.083,
    104.598,
    99.36,
    82.404,
    95.446,
    75.136,
    92.142,
]


def test_a_loss_that_exploded_and_widened_its_own_noise_is_a_divergence_not_recovered_spikes() -> None:
    events = classify_series(list(range(len(EXPLODED_LOSS))), EXPLODED_LOSS, metric="loss")
    assert "divergence" in {e.kind for e in events if e.severity != "info"}
    assert not [e for e in events if e.kind == "spike" and e.details.get("recovered")]


def test_a_jump_inside_a_divergences_course_is_no_spike_of_its_own() -> None:
    # issue 46: a spike rode on most grad-norm divergences
    import numpy as np
    from holter_server.detect import classify_series

    for seed in range(4):
        rng = np.random.default_rng(seed)
        steps = np.arange(600)
        values = np.where(steps < 300, 1.0, np.exp((steps - 300) / 80.0)) * (1 + 0.03 * rng.standard_normal(600))
        values[420] *= 3
        values[500] *= 2.5
        events = classify_series(steps, values, metric="grad_norm", kind="grad_norm")
        assert [e.kind for e in events] == ["divergence"], events
