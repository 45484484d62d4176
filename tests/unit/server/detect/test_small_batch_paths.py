"""The scalar paths for small batches compute exactly what the vectorised paths compute.

Points arriving a few at a time take plain-Python paths (`BlockBaseline._update_few`,
`decimals_of`) because numpy's per-call overhead is most of the cost there. Their results must
be the same bits as the vectorised paths', or the batch and live entry points would drift
apart; these tests feed both the same awkward series and compare.
"""

import numpy as np
import pytest
from holter_server.detect import IncrementalDetector
from holter_server.detect import baseline as baseline_module
from holter_server.detect import level_shift as level_shift_module
from holter_server.detect import runs as runs_module
from holter_server.detect.baseline import MAX_DECIMALS, BlockBaseline, decimals, decimals_of, rolling_level
from holter_server.detect.runs import true_segments

TAIL = 1024


def vectorised_only(monkeypatch):
    """Turn every scalar path off: what the detector computed before they existed."""
    monkeypatch.setattr(baseline_module, "SCALAR_MAX_BLOCKS", -1)
    monkeypatch.setattr(baseline_module, "SCALAR_FIRST_POINTS", False)
    monkeypatch.setattr(level_shift_module, "SCALAR_MAX_BLOCKS", -1)
    monkeypatch.setattr(runs_module, "SMALL_MASK", -1)


def awkward_series(seed: int, n: int = 1500) -> dict[str, np.ndarray]:
    """Series that stress the scalar path: many printed decimals, rounded prints, exact and
    negative zeros, negative values, level shifts (history restarts), huge and tiny values."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    noisy = 2.0 * np.exp(-t / 500) + 0.05 * rng.standard_normal(n)
    shifted = 5e4 * (1 + 0.02 * rng.standard_normal(n))
    shifted[n // 3 :] *= 0.6
    shifted[2 * n // 3 :] *= 3.0
    zeros = np.round(0.01 * rng.standard_normal(n), 2)
    zeros[rng.random(n) < 0.3] = 0.0
    signed_zeros = zeros.copy()
    signed_zeros[rng.random(n) < 0.2] = -0.0
    steps_of_zero = np.where(rng.random(n) < 0.5, 0.0, 1.0)
    huge = 1e305 * (1 + rng.standard_normal(n))
    huge[: n // 2] = rng.standard_normal(n // 2)
    return {
        "many_decimals": noisy,
        "rounded_2": np.round(noisy, 2),
        "rounded_4": np.round(noisy, 4),
        "float32": noisy.astype(np.float32).astype(float),
        "negative": -noisy - 3.0,
        "level_shifts": shifted,
        "zeros": zeros,
        "signed_zeros": signed_zeros,
        "zero_one": steps_of_zero,
        "constant": np.full(n, 0.125),
        "huge_after_a_while": huge,
        "tiny": 1e-300 * (1 + 0.1 * rng.standard_normal(n)),
    }


def feed_baseline(values: np.ndarray, sizes: list[int]) -> list[tuple]:
    """Feed a `BlockBaseline` the way `IncrementalDetector` does (a bounded tail plus the new
    points); every output array's bits, the state and the completed blocks, per call."""
    baseline = BlockBaseline(1e-12)
    tail = np.empty(0)
    seen = 0
    out = []
    i = 0
    for size in sizes:
        new = values[i : i + size]
        i += size
        if not len(new):
            break
        all_values = np.concatenate([tail, new])
        new_from = len(tail)
        result = baseline.update(all_values, new_from, seen - new_from)
        first, meds, mads = baseline.new_blocks
        out.append(
            (
                [(a.dtype.str, a.tobytes()) for a in result],
                baseline.state(),
                (first, meds.tobytes(), mads.tobytes()),
            )
        )
        seen += len(new)
        tail = all_values[-TAIL:]
    return out


def batch_sizes(seed: int, n: int) -> list[int]:
    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(1, 300))]  # a first batch that takes the vectorised path
    while sum(sizes) < n:
        # mostly a few points (the live case), sometimes a batch crossing many blocks
        sizes.append(int(rng.choice([1, 2, 3, 7, 8, 9, 10, 16, 17, 64, 130])))
    return sizes


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", list(awkward_series(0)))
def test_scalar_baseline_path_gives_the_same_bits_as_the_vectorised_one(name, seed, monkeypatch):
    values = awkward_series(seed)[name]
    sizes = batch_sizes(seed, len(values))
    fast = feed_baseline(values, sizes)
    vectorised_only(monkeypatch)
    slow = feed_baseline(values, sizes)
    assert len(fast) == len(slow)
    for call, (a, b) in enumerate(zip(fast, slow)):
        assert a == b, f"call {call} differs"


# a new series read as it arrives: a point or a few at a time, or a second's worth (10 steps)
FIRST_SIZES = [[1] * 20, [1, 2, 3, 4, 5, 6], [3, 3, 3, 3, 3, 3], [10, 10, 10], [7, 9, 17], [16, 1], [40]]


@pytest.mark.parametrize("sizes", FIRST_SIZES, ids=lambda sizes: "-".join(map(str, sizes)))
@pytest.mark.parametrize("name", list(awkward_series(0)))
def test_a_new_series_first_points_give_the_same_bits_in_plain_python(name, sizes, monkeypatch):
    """The early points (before two blocks of history) and the first levels, however the first
    points are batched, on every awkward series (its start and a stretch from its middle)."""
    series = awkward_series(4)[name]
    for values in (series[:60], series[700:760]):
        fast = feed_baseline(values, sizes)
        fast_levels = [rolling_level(values[: n + 1], n, 0).tobytes() for n in range(8)]
        with monkeypatch.context() as off:
            vectorised_only(off)
            slow = feed_baseline(values, sizes)
            slow_levels = [rolling_level(values[: n + 1], n, 0).tobytes() for n in range(8)]
        assert fast == slow
        assert fast_levels == slow_levels


def test_the_plain_first_points_path_is_taken(monkeypatch):
    """Guards the test above: the early points of a plain series do not reach numpy's median."""
    calls = []
    monkeypatch.setattr(baseline_module.np, "median", lambda *a, **k: calls.append(1) or np.nan)
    feed_baseline(awkward_series(0)["many_decimals"][:40], [10, 10, 10, 10])
    assert not calls


def test_the_scalar_path_is_taken_for_small_batches(monkeypatch):
    """Guards the test above: it compares two paths only if the fast one actually runs."""
    taken = []
    original = BlockBaseline._update_few

    def spy(self, *args):
        result = original(self, *args)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(BlockBaseline, "_update_few", spy)
    feed_baseline(awkward_series(0)["many_decimals"], [200] + [10] * 50)  # 25 blocks at first: vectorised
    assert not taken[0] and all(taken[1:])


def test_decimals_of_one_value_matches_the_vectorised_count():
    rng = np.random.default_rng(3)
    values = np.concatenate(
        [
            [
                0.0,
                -0.0,
                0.25,
                0.29,
                -0.29,
                2.5,
                1e-13,
                1e-12,
                5e-324,
                1.0,
                123456.789,
                2.0**53 + 2,
                1e300,
                1.7e308,
                -1e-7,
                0.1 + 0.2,
                1 / 3,
            ],
            [round(float(x), int(d)) for x, d in zip(rng.standard_normal(200), rng.integers(0, MAX_DECIMALS + 2, 200))],
            rng.standard_normal(100).astype(np.float32).astype(float),
            10.0 ** rng.uniform(-15, 300, 100),
        ]
    )
    assert [decimals_of(float(v)) for v in values] == decimals(values).tolist()


def test_quanta_table_is_numpys_power():
    for d in range(MAX_DECIMALS + 1):
        one = 10.0 ** -np.maximum(np.array([d]), 0).astype(float)
        assert baseline_module._QUANTA[d] == float(one[0])


def tricky_stream(seed: int, n: int = 2500) -> np.ndarray:
    """A loss with every awkward feature at once: long decimals, a rounded stretch, zeros and
    negative zeros, a level shift, spikes, NaN and ±Inf."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    v = 2.0 * np.exp(-t / 700) + 0.3 + 0.01 * rng.standard_normal(n)
    v[400:700] = np.round(v[400:700], 3)
    v[900:960] = 0.0
    v[rng.choice(np.arange(900, 960), 10)] = -0.0
    v[1200:] += 1.5
    v[rng.choice(n, 12)] *= 4.0
    v[rng.choice(n, 6)] = np.nan
    v[1800] = np.inf
    v[1801] = -np.inf
    v[2200:2230] = np.nan
    return v


def shifting_stream(seed: int, n: int = 2500) -> np.ndarray:
    """A throughput that drops, recovers and drops again, with rounded prints and a NaN."""
    rng = np.random.default_rng(seed)
    v = np.round(5e4 * (1 + 0.01 * rng.standard_normal(n)), 1)
    v[700:1300] *= 0.6
    v[1800:] *= 0.5
    v[1500] = np.nan
    return v


def abrupt_norm_stream(seed: int, n: int = 2500) -> np.ndarray:
    """A gradient norm that jumps to a new regime and stays, with a spike and zeros."""
    rng = np.random.default_rng(seed)
    v = 0.3 * np.exp(rng.normal(0, 0.03, n))
    v[1000:] *= 2.5
    v[1600] = 9.0
    v[2000:2010] = 0.0
    return v


CASES = [
    ("train/loss", tricky_stream),
    ("train/grad_norm", tricky_stream),
    ("throughput/tokens_per_s", tricky_stream),
    ("eval/loss", tricky_stream),
    ("throughput/tokens_per_s", shifting_stream),
    ("train/grad_norm", abrupt_norm_stream),
]


def feed_detector(metric: str, values: np.ndarray, sizes: list[int]) -> IncrementalDetector:
    detector = IncrementalDetector(metric)
    steps = np.arange(len(values)) * 2
    i = 0
    for size in sizes:
        detector.add(steps[i : i + size], values[i : i + size])
        i += size
    return detector


@pytest.mark.parametrize("seed", [7, 8])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1].__name__}")
def test_detector_events_are_the_same_with_the_scalar_paths_off(case, seed, monkeypatch):
    metric, make = case
    values = make(seed)
    sizes = batch_sizes(seed, len(values))
    fast = feed_detector(metric, values, sizes)
    vectorised_only(monkeypatch)
    slow = feed_detector(metric, values, sizes)
    assert [e.to_dict() for e in fast.events] == [e.to_dict() for e in slow.events]
    assert fast.state() == slow.state()


@pytest.mark.parametrize(
    "metric, make", [("throughput/tokens_per_s", shifting_stream), ("train/grad_norm", abrupt_norm_stream)]
)
def test_the_streams_above_hold_level_shifts(metric, make):
    """Guards the test above: the level shift's scalar path must have something to find."""
    detector = feed_detector(metric, make(7), batch_sizes(7, 2500))
    assert any(e.kind == "level_shift" for e in detector.events)


def test_true_segments_walked_in_python_match_the_edge_search(monkeypatch):
    rng = np.random.default_rng(5)
    masks = [np.zeros(0, dtype=bool), np.ones(1, dtype=bool), np.zeros(1, dtype=bool), np.ones(64, dtype=bool)]
    masks += [rng.random(int(rng.integers(1, 65))) < p for p in rng.random(300)]
    fast = [true_segments(m) for m in masks]
    monkeypatch.setattr(runs_module, "SMALL_MASK", -1)
    assert fast == [true_segments(m) for m in masks]
