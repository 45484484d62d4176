import numpy as np
import pytest
from detect_curves import decaying_loss, flat
from holter_server.detect import classify_series


def test_step_time_spike_every_n_steps_is_a_sawtooth_with_its_period():
    values = flat(1500, 170, 0.01)
    values[np.arange(100, 1500, 189)] = 320
    events = classify_series(np.arange(1500), values, metric="step_time_ms")
    saws = [e for e in events if e.kind == "sawtooth"]
    assert len(saws) == 1 and abs(saws[0].period - 189) <= 0.05 * 189


def test_sawtooth_gives_the_chance_of_its_regularity():
    values = flat(1500, 170, 0.01)
    values[np.arange(100, 1500, 189)] = 320
    (saw,) = classify_series(np.arange(1500), values, metric="step_time_ms")
    assert saw.details["p_value"] < 1e-3 and "p = " in saw.summary


def random_spikes(n: int, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A healthy gradient norm with `count` one-step spikes at random steps."""
    rng = np.random.default_rng(seed)
    values = 0.3 * np.exp(rng.normal(0, 0.05, n))
    at = rng.choice(np.arange(200, n), count, replace=False)
    values[at] *= rng.uniform(2.0, 4.0, count)
    return values, np.sort(at)


def test_four_evenly_spaced_spikes_among_dozens_in_a_long_run_are_not_a_sawtooth():
    values, at = random_spikes(20_000, 40, seed=3)
    quiet = (at < 9_000) | (at > 10_400)
    values = 0.3 * np.exp(np.random.default_rng(4).normal(0, 0.05, 20_000))
    values[at[quiet]] *= 3.0
    values[[9_100, 9_500, 9_885, 10_297]] *= 3.0  # four in a row, gaps of 400, 385 and 412 steps by chance
    assert "sawtooth" not in [e.kind for e in classify_series(np.arange(20_000), values, metric="grad_norm")]


@pytest.mark.parametrize("seed", range(8))
def test_dozens_of_random_spikes_in_a_long_run_are_never_a_sawtooth(seed):
    values, _ = random_spikes(20_000, 60, seed)
    assert "sawtooth" not in [e.kind for e in classify_series(np.arange(20_000), values, metric="grad_norm")]


def test_periodic_spikes_among_dozens_of_random_ones_are_a_sawtooth():
    values, _ = random_spikes(20_000, 40, seed=5)
    values[np.arange(1_000, 20_000, 2_300)] *= 3.0
    saws = [e for e in classify_series(np.arange(20_000), values, metric="grad_norm") if e.kind == "sawtooth"]
    assert len(saws) == 1 and abs(saws[0].period - 2_300) <= 0.05 * 2_300


def test_eval_pauses_and_shard_loads_on_throughput_are_two_sawtooths_with_their_periods():
    values = flat(6_000, 52_000, 0.02)
    values[np.arange(500, 6_000, 500)] *= 0.3  # an eval every 500 steps
    values[np.arange(100, 6_000, 189)] *= 0.6  # a data shard loaded every 189 steps
    saws = [e for e in classify_series(np.arange(6_000), values, metric="tokens_per_s") if e.kind == "sawtooth"]
    assert sorted(round(e.period) for e in saws) == [189, 500]


def test_periodic_spikes_are_folded_into_the_sawtooth_not_listed_one_by_one():
    values = flat(1500, 170, 0.01)
    values[np.arange(100, 1500, 189)] = 320
    events = classify_series(np.arange(1500), values, metric="step_time_ms")
    assert [e.kind for e in events] == ["sawtooth"]


def test_logprob_mismatch_spiking_every_12_steps_is_a_sawtooth():
    values = np.abs(np.random.default_rng(0).normal(0.004, 0.001, 300))
    values[np.arange(12, 300, 12)] = 0.11
    events = classify_series(np.arange(300), values, metric="training/rollout_probs_diff_mean")
    saw = [e for e in events if e.kind == "sawtooth"]
    assert saw and abs(saw[0].period - 12) <= 1.2


def test_epoch_zigzag_on_the_loss_is_a_sawtooth_with_its_period():
    n, period = 2000, 100
    values = decaying_loss(n, noise=0.003) * (1 + 0.06 * ((np.arange(n) % period) / period - 0.5))
    saw = [e for e in classify_series(np.arange(n) * 5, values, metric="loss") if e.kind == "sawtooth"]
    assert saw and abs(saw[0].period - 500) <= 50


def test_irregular_spikes_are_not_a_sawtooth():
    values = flat(1500, 170, 0.01)
    values[[100, 260, 300, 700, 1290]] = 320
    assert "sawtooth" not in [e.kind for e in classify_series(np.arange(1500), values, metric="step_time")]


def test_spikes_six_steps_apart_are_a_sawtooth_with_that_period_not_one_merged_spike():
    values = np.abs(np.random.default_rng(0).normal(0.004, 0.001, 300))
    values[np.arange(60, 114, 6)] = 0.11  # 9 spikes, closer than the spike merge gap
    events = classify_series(np.arange(300), values, metric="logprob_mismatch/abs_diff_mean")
    assert [e.kind for e in events] == ["sawtooth"]
    assert events[0].period == 6 and events[0].start_step == 60 and "every 6 steps" in events[0].summary


def test_step_time_spiking_every_3_steps_is_a_sawtooth():
    values = flat(600, 170, 0.01)
    values[np.arange(200, 320, 3)] = 330
    events = classify_series(np.arange(600) * 10, values, metric="step_time")
    saws = [e for e in events if e.kind == "sawtooth"]
    assert saws and saws[0].period == 30 and "spike" not in [e.kind for e in events]


def test_close_spikes_at_irregular_gaps_stay_one_spike_event():
    values = flat(600, 170, 0.01)
    values[[300, 303, 307, 309, 314, 316]] = 330
    assert [e.kind for e in classify_series(np.arange(600), values, metric="step_time")] == ["spike"]


def test_four_close_periodic_spikes_are_too_few_for_a_sawtooth():
    values = flat(600, 170, 0.01)
    values[[300, 306, 312, 318]] = 330
    assert [e.kind for e in classify_series(np.arange(600), values, metric="step_time")] == ["spike"]


def test_epoch_zigzag_gives_the_chance_of_its_periodogram_peak():
    n, period = 2000, 100
    values = decaying_loss(n, noise=0.003) * (1 + 0.06 * ((np.arange(n) % period) / period - 0.5))
    (saw,) = [e for e in classify_series(np.arange(n), values, metric="loss") if e.kind == "sawtooth"]
    assert saw.details["source"] == "autocorrelation" and saw.details["p_value"] < 1e-3


def test_hundreds_of_random_spikes_are_not_a_sawtooth():
    values, _ = random_spikes(20_000, 300, seed=11)
    assert "sawtooth" not in [e.kind for e in classify_series(np.arange(20_000), values, metric="grad_norm")]


@pytest.mark.parametrize("seed", [15, 19, 20])  # seeds where four gaps agreeing within 10% made a "period"
def test_bursts_of_spikes_are_not_a_sawtooth(seed):
    rng = np.random.default_rng(seed)
    values = 0.3 * np.exp(rng.normal(0, 0.05, 20_000))
    for center in (1_000, 6_000, 9_500, 14_000, 17_500):  # five unstable phases of dense spikes
        values[center + rng.choice(1_500, 15, replace=False)] *= 3.0
    assert "sawtooth" not in [e.kind for e in classify_series(np.arange(20_000), values, metric="grad_norm")]


@pytest.mark.parametrize(("n", "period"), [(300, 40), (200, 25), (560, 40)])
def test_a_data_order_zigzag_on_a_short_run_is_a_sawtooth_with_its_period(n: int, period: int) -> None:
    # the CPU runs: 300-560 logged steps, a zigzag locked to the epoch (40 steps) or the
    # eval interval (25); at least 4 periods fit, and two checks agree, well before 512 points
    values = decaying_loss(n, noise=0.003) * (1 + 0.06 * ((np.arange(n) % period) / period - 0.5))
    saw = [e for e in classify_series(np.arange(n), values, metric="loss") if e.kind == "sawtooth"]
    assert saw and abs(saw[0].period - period) <= 0.05 * period, saw


@pytest.mark.parametrize("seed", range(20))
def test_a_short_healthy_loss_is_no_sawtooth(seed: int) -> None:
    n = int(np.random.default_rng(seed).integers(150, 520))
    values = decaying_loss(n, seed=seed, noise=0.01)
    assert "sawtooth" not in [e.kind for e in classify_series(np.arange(n), values, metric="loss")]


# --- a sawtooth's own teeth are not "too good", divergences or level shifts ------------------------


def epoch_dives(seed: int, *, period: int = 40, dive_steps: int = 8, depth: float = 0.55, n: int = 560) -> np.ndarray:
    """A from-scratch loss (ln 20 and up) that dives at each epoch's first batches, seen before, and
    climbs back: the data order's sawtooth."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    base = 0.6 + 3.0 * np.exp(-steps / 60)
    dive = np.where(steps % period < dive_steps, -depth, 0.0)
    return np.maximum(base + dive + rng.normal(0, 0.02, n), 0.001)


@pytest.mark.parametrize(
    ("seed", "period", "dive_steps", "depth"), [(0, 40, 8, 0.55), (1, 40, 10, 0.5), (2, 48, 8, 0.5), (3, 40, 6, 0.5)]
)
def test_the_dives_of_an_epoch_sawtooth_are_neither_too_good_nor_a_divergence(
    seed: int, period: int, dive_steps: int, depth: float
) -> None:
    values = epoch_dives(seed, period=period, dive_steps=dive_steps, depth=depth)
    events = classify_series(np.arange(values.size), values, metric="loss")
    (saw,) = [e for e in events if e.kind == "sawtooth"]
    assert abs(saw.period - period) < 1
    assert not [e for e in events if e.kind in ("too_good", "divergence", "level_shift")]


def test_a_dip_sawtooth_s_climbs_from_its_minima_are_not_a_divergence() -> None:
    rng = np.random.default_rng(1)
    steps = np.arange(560)
    values = 1.2 + 1.8 * np.exp(-steps / 120) - 0.8 * (steps % 40 < 4) + rng.normal(0, 0.02, steps.size)
    events = classify_series(steps, values, metric="loss")
    assert [e.kind for e in events if e.kind == "sawtooth"] == ["sawtooth"]
    assert not [e for e in events if e.kind == "divergence"]


def test_a_real_divergence_during_a_sawtooth_is_still_told() -> None:
    values = epoch_dives(0)
    values[420:] += np.linspace(0, 6, values.size - 420)  # climbs far past the sawtooth's swing
    events = classify_series(np.arange(values.size), values, metric="loss")
    assert [e for e in events if e.kind == "divergence" and e.start_step >= 400]


def test_a_loss_that_holds_too_low_during_a_sawtooth_is_still_too_good() -> None:
    values = epoch_dives(0)
    values[440:] = 0.02 + np.random.default_rng(5).normal(0, 0.002, values.size - 440)  # a leak: it holds there
    events = classify_series(np.arange(values.size), values, metric="loss")
    assert [e for e in events if e.kind == "too_good" and e.end_step - e.start_step >= 40]


@pytest.mark.parametrize("period, depth", [(120, 0.08), (200, 0.1), (60, 0.06)])
def test_the_teeth_of_a_loss_sawtooth_are_not_also_reported_as_spikes(period, depth):
    # each tooth climbs a few percent for most of a period and drops back: the sawtooth names them
    n = 2500
    values = decaying_loss(n, noise=0.003) * (1 + depth * ((np.arange(n) % period) / period - 0.5))
    events = classify_series(np.arange(n), values, metric="loss")
    assert "sawtooth" in [e.kind for e in events]
    assert [e for e in events if e.kind == "spike"] == []


def test_a_short_periodic_mismatch_glitch_of_three_cycles_is_one_sawtooth_not_three_spikes() -> None:
    # issue 46: 100 points, a glitch every 32 steps, was named as three warning spikes
    import numpy as np
    from holter_server.detect import IncrementalDetector, classify_series

    for seed in range(5):
        rng = np.random.default_rng(seed)
        steps = np.arange(100)
        values = np.abs(rng.normal(0, 0.002, 100))
        values[[10, 42, 74]] = 0.11
        (found,) = classify_series(steps, values, metric="logprob_mismatch", kind="logprob_mismatch")
        assert found.kind == "sawtooth" and found.period == 32.0 and found.details["members"] == [10, 42, 74]
        live = IncrementalDetector("logprob_mismatch", kind="logprob_mismatch")
        for lo in range(0, 100, 7):
            live.add(steps[lo : lo + 7], values[lo : lo + 7])
        assert [(e.kind, e.period) for e in live.events] == [("sawtooth", 32.0)]


def test_three_evenly_spaced_loss_spikes_are_no_period_for_a_loss() -> None:
    # a loss's period must beat a chance of 0.001: three spikes in 100 points (1.5%) do not
    import numpy as np
    from holter_server.detect import classify_series

    steps = np.arange(100)
    values = 2.0 + 0.01 * np.random.default_rng(0).standard_normal(100)
    values[[10, 42, 74]] = 6.0
    assert all(e.kind != "sawtooth" for e in classify_series(steps, values, metric="loss", kind="loss"))


def test_the_share_of_evenly_spaced_triples_is_counted_exactly() -> None:
    from math import comb

    from holter_server.detect.sawtooth import evenly_spaced_share

    assert evenly_spaced_share(3) == 1 / comb(3, 3)
    assert evenly_spaced_share(5) == 4 / comb(5, 3)  # (0,1,2) (1,2,3) (2,3,4) (0,2,4)
    assert abs(evenly_spaced_share(100) - 2450 / 161700) < 1e-12
