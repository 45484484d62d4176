"""Chart reads through the real server on SQLite and Postgres: downsampling that hides nothing,
rollups that stay exact through late and re-sent points, comparison and family reads."""

from __future__ import annotations

import math
from collections.abc import Iterator

import httpx
import msgpack
import numpy as np
import pytest
from holter_server.settings import Settings
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory
from holter_server.store.models import MetricRow, RollupRow
from holter_server.store.rollup_buckets import LEVELS, levels_of
from holter_server.store.rollups import read_point_ranges, read_rollup_pieces
from sqlalchemy import func, select

from tests.conftest import new_run_id

STEPS = 60_000


@pytest.fixture
def run_id(api: httpx.Client) -> str:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "reads"}).raise_for_status()
    return run_id


def wire(values: np.ndarray) -> list[float | str]:
    out: list[float | str] = []
    for value in values.tolist():
        out.append(
            value
            if math.isfinite(value)
            else ("NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity"))
        )
    return out


def send(api: httpx.Client, run_id: str, metric: str, steps: np.ndarray, values: np.ndarray) -> dict:
    answer = api.post(
        f"/runs/{run_id}/points", json={"metrics": {metric: {"steps": steps.tolist(), "values": wire(values)}}}
    )
    answer.raise_for_status()
    return answer.json()


def read(api: httpx.Client, run_id: str, metric: str, **params: int) -> dict:
    answer = api.get(f"/runs/{run_id}/metrics/{metric}/points", params=params)
    answer.raise_for_status()
    return answer.json()


def number(value: float | str | None) -> float | None:
    if isinstance(value, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[value]
    return value


def spiky_series(seed: int) -> tuple[np.ndarray, np.ndarray, dict[str, list[int]]]:
    """A noisy decaying curve with single-point spikes, dips, NaNs and infinities planted in it."""
    rng = np.random.default_rng(seed)
    steps = np.arange(STEPS)
    values = 2.0 * np.exp(-steps / 20_000) + rng.normal(0, 0.01, STEPS)
    planted = rng.choice(STEPS, 40, replace=False)
    kinds = {
        "spike": planted[:15].tolist(),
        "dip": planted[15:25].tolist(),
        "nan": planted[25:33].tolist(),
        "posinf": planted[33:37].tolist(),
        "neginf": planted[37:].tolist(),
    }
    values[kinds["spike"]] = 50.0 + rng.random(15)
    values[kinds["dip"]] = -50.0 - rng.random(10)
    values[kinds["nan"]] = math.nan
    values[kinds["posinf"]] = math.inf
    values[kinds["neginf"]] = -math.inf
    return steps, values, kinds


def load_shuffled(
    api: httpx.Client, run_id: str, metric: str, steps: np.ndarray, values: np.ndarray, seed: int
) -> None:
    """Send the series as batches in a shuffled order (late points), re-sending some of them."""
    rng = np.random.default_rng(seed)
    batches = np.array_split(np.arange(len(steps)), 12)
    for index in [*rng.permutation(len(batches)).tolist(), 3, 7]:
        send(api, run_id, metric, steps[batches[index]], values[batches[index]])


def assert_buckets_exact(body: dict, steps: np.ndarray, values: np.ndarray) -> None:
    """Every bucket of a downsampled read says exactly what the points in it say."""
    width, buckets = body["bucket_width"], body["buckets"]
    for i, bucket_start in enumerate(buckets["start"]):
        lo, hi = max(bucket_start, body["start"]), min(bucket_start + width - 1, body["end"])
        inside = values[(steps >= lo) & (steps <= hi)]
        finite = inside[np.isfinite(inside)]
        assert buckets["count"][i] == len(inside)
        assert buckets["nan"][i] == np.isnan(inside).sum()
        assert buckets["posinf"][i] == (inside == math.inf).sum()
        assert buckets["neginf"][i] == (inside == -math.inf).sum()
        assert buckets["max"][i] == (finite.max() if len(finite) else None)
        assert buckets["min"][i] == (finite.min() if len(finite) else None)


def test_every_planted_extreme_shows_at_every_zoom(api: httpx.Client, run_id: str) -> None:
    steps, values, planted = spiky_series(seed=1)
    load_shuffled(api, run_id, "loss", steps, values, seed=2)
    rng = np.random.default_rng(3)
    windows = [(0, STEPS - 1), (0, STEPS // 10), (STEPS // 3, STEPS // 3 + STEPS // 100)]
    windows += [tuple(sorted(rng.integers(0, STEPS, 2).tolist())) for _ in range(3)]
    for planted_step in (planted["spike"][0], planted["nan"][0]):  # zoom onto a planted point, 1% wide
        windows.append((max(0, planted_step - 300), planted_step + 300))
    for start, end in windows:
        if end - start < 400:
            continue
        body = read(api, run_id, "loss", start=start, end=end, max_points=200)
        assert body["downsampled"] and len(body["steps"]) <= 200
        assert_buckets_exact(body, steps, values)
        shown = dict(zip(body["steps"], body["values"]))
        column = {kind: body["buckets"][kind] for kind in ("nan", "posinf", "neginf")}
        for kind, where in planted.items():
            for step in where:
                if not start <= step <= end:
                    continue
                i = step // body["bucket_width"] - start // body["bucket_width"]
                if kind == "spike":  # its bucket peaks at least as high, drawn where it happened
                    peak = body["buckets"]["max"][i]
                    assert peak >= values[step] and peak in body["values"], (step, start, end)
                    assert peak != values[step] or shown.get(step) == peak
                elif kind == "dip":
                    trough = body["buckets"]["min"][i]
                    assert trough <= values[step] and (trough != values[step] or shown.get(step) == trough), (
                        step,
                        start,
                        end,
                    )
                else:
                    assert column[kind][i] >= 1, (kind, step, start, end)


def test_a_range_within_max_points_reads_plain_with_wall_times(api: httpx.Client, run_id: str) -> None:
    send(api, run_id, "loss", np.arange(0, 5000, 10), np.arange(500, dtype=float))
    body = read(api, run_id, "loss", start=1000, end=2000, max_points=200)
    assert body["downsampled"] is False and body["bucket_width"] is None
    assert body["steps"] == list(range(1000, 2001, 10)) and len(body["times"]) == 101


def test_a_downsampled_read_says_so_and_counts_the_points_behind_it(api: httpx.Client, run_id: str) -> None:
    send(api, run_id, "loss", np.arange(10_000), np.arange(10_000, dtype=float))
    body = read(api, run_id, "loss", start=17, end=9_001, max_points=100)
    assert body["downsampled"] is True and body["times"] is None
    assert body["points_in_range"] == 9_001 - 17 + 1 == sum(body["buckets"]["count"])
    assert body["bucket_width"] & (body["bucket_width"] - 1) == 0  # a power of two
    assert body["steps"][0] == 17 and body["steps"][-1] == 9_001


def test_a_downsampled_read_carries_the_wall_time_of_each_drawn_point_when_asked(
    api: httpx.Client, run_id: str
) -> None:
    steps = np.arange(10_000)
    times = 1.7e9 + steps * 0.25
    answer = api.post(
        f"/runs/{run_id}/points",
        json={
            "metrics": {
                "loss": {"steps": steps.tolist(), "values": np.sin(steps / 50.0).tolist(), "times": times.tolist()}
            }
        },
    )
    answer.raise_for_status()
    body = read(api, run_id, "loss", max_points=100, with_times=True)
    assert body["downsampled"] is True and len(body["times"]) == len(body["steps"])
    assert body["times"] == [1.7e9 + step * 0.25 for step in body["steps"]]


def test_series_reads_carry_wall_times_when_asked_and_leave_out_points_without_one(
    api: httpx.Client, run_id: str
) -> None:
    steps = np.arange(8_000)
    batch = {
        "metrics": {"loss": {"steps": steps.tolist(), "values": np.cos(steps / 40.0).tolist()}},
        "step_times": {"steps": steps[::2].tolist(), "times": (1.7e9 + steps[::2] * 0.5).tolist()},
    }
    api.post(f"/runs/{run_id}/points", json=batch).raise_for_status()
    body = api.get("/series", params={"run": run_id, "metric": "loss", "max_points": 200, "with_times": "true"}).json()
    series = body["data"][0]
    assert series["downsampled"] is True
    assert series["times"] == [1.7e9 + step * 0.5 if step % 2 == 0 else None for step in series["steps"]]
    plain = api.get("/series", params={"run": run_id, "metric": "loss", "max_points": 200}).json()["data"][0]
    assert plain["times"] is None  # not asked: no extra lookup


def test_downsampled_msgpack_carries_non_finite_values_natively(api: httpx.Client, run_id: str) -> None:
    values = np.ones(4096)
    values[2048:] = math.nan
    send(api, run_id, "loss", np.arange(4096), values)
    answer = api.get(
        f"/runs/{run_id}/metrics/loss/points", params={"max_points": 64}, headers={"accept": "application/msgpack"}
    )
    body = msgpack.unpackb(answer.content)
    assert body["downsampled"] and math.isnan(body["values"][-1]) and body["buckets"]["nan"][-1] > 0


@pytest.fixture
def store_sessions(store_url: str) -> Iterator:
    engine = make_engine(Settings(database_url=store_url).resolved_database_url())
    yield make_session_factory(engine)
    engine.dispose()


def assert_rollups_match_points(session_factory, run_id: str, metric: str) -> None:
    """Every stored rollup row equals a summary computed afresh from the stored points."""
    with session_factory() as session:
        metric_id = session.query(MetricRow.metric_id).filter_by(run_id=run_id, name=metric).scalar()
        steps, values = read_point_ranges(session=session, run_id=run_id, metric_ids=[metric_id], ranges=[(0, 2**62)])[
            metric_id
        ]
        for level, expected in levels_of(steps, values):
            stored = read_rollup_pieces(
                session=session, run_id=run_id, metric_ids=[metric_id], pieces=[(level, 0, 2**62)], to_level=level
            )[metric_id]
            for name in (
                "bucket",
                "count",
                "min_step",
                "max_step",
                "first_step",
                "last_step",
                "nan_count",
                "posinf_count",
                "neginf_count",
            ):
                assert getattr(stored, name).tolist() == getattr(expected, name).tolist(), (level, name)
            np.testing.assert_allclose(stored.finite_sum, expected.finite_sum, atol=1e-9)
            np.testing.assert_array_equal(stored.first_value, expected.first_value)


def test_rollups_stay_exact_through_late_resent_and_overlapping_batches(
    api: httpx.Client, run_id: str, store_sessions
) -> None:
    steps, values, _ = spiky_series(seed=4)
    send(api, run_id, "loss", steps[30_000:40_000], values[30_000:40_000])
    send(api, run_id, "loss", steps[:20_000], values[:20_000])  # late
    assert send(api, run_id, "loss", steps[30_000:40_000], values[30_000:40_000])["stored"] == 0  # re-sent
    overlap = send(api, run_id, "loss", steps[15_000:35_000], values[15_000:35_000] + 100.0)  # partly new, other values
    assert (overlap["received"], overlap["stored"], overlap["duplicates"]) == (20_000, 10_000, 10_000)
    assert [(c["metric"], c["steps"][0]) for c in overlap["conflicts"]] == [
        ("loss", 15_000)
    ]  # other values at stored steps
    repeated = np.r_[steps[50_000:50_100], steps[50_000:50_100]]  # the same steps twice in one batch: first kept
    send(api, run_id, "loss", repeated, np.r_[values[50_000:50_100], values[50_000:50_100] - 7.0])
    assert_rollups_match_points(store_sessions, run_id, "loss")
    body = read(api, run_id, "loss", max_points=100)
    assert max(v for v in body["buckets"]["max"] if v is not None) >= 100.0  # the +100 values of steps 20,000..29,999


def test_one_metric_across_runs_shares_one_step_range(api: httpx.Client, run_id: str) -> None:
    other = new_run_id()
    api.post("/runs", json={"id": other, "project": "reads"}).raise_for_status()
    send(api, run_id, "loss", np.arange(5000), np.ones(5000))
    send(api, other, "loss", np.arange(2000, 9000), np.ones(7000))
    answer = api.get("/series", params={"run": [run_id, other], "metric": ["loss", "nothing"], "max_points": 100})
    body = answer.json()
    assert [(s["run_id"], s["start"], s["end"]) for s in body["data"]] == [(run_id, 0, 4999), (other, 2000, 8999)]
    assert all(s["downsampled"] for s in body["data"])
    assert {(m["run_id"], m["metric"]) for m in body["missing"]} == {(run_id, "nothing"), (other, "nothing")}


def test_many_metrics_of_one_run_in_one_request(api: httpx.Client, run_id: str) -> None:
    api.post(
        f"/runs/{run_id}/points",
        json={"metrics": {"loss": {"steps": [1, 2], "values": [1.0, "NaN"]}, "lr": {"steps": [2], "values": [0.1]}}},
    )
    body = api.get("/series", params={"run": run_id, "metric": ["loss", "lr"]}).json()
    assert [(s["metric"], s["values"]) for s in body["data"]] == [("loss", [1.0, "NaN"]), ("lr", [0.1])]


def test_metrics_list_by_prefix_in_layer_order(api: httpx.Client, run_id: str) -> None:
    names = ["act_norm/layer.10", "act_norm/layer.2", "act_norm/layer.1", "grad_norm/layer.1", "ACT_NORM/layer.3"]
    api.post(f"/runs/{run_id}/points", json={"metrics": {name: {"steps": [0], "values": [1.0]} for name in names}})
    listed = api.get(f"/runs/{run_id}/metrics", params={"prefix": "act_norm/layer.*"}).json()
    assert [m["name"] for m in listed["data"]] == ["act_norm/layer.1", "act_norm/layer.2", "act_norm/layer.10"]


def test_a_family_reads_as_a_layers_by_buckets_matrix(api: httpx.Client, run_id: str) -> None:
    layers = {f"act_norm/layer.{i}": np.full(1000, float(i)) for i in range(12)}
    layers["act_norm/layer.7"][500] = 1e4  # one layer blows up at one step
    layers["act_norm/layer.3"][900] = math.nan
    api.post(
        f"/runs/{run_id}/points",
        json={"metrics": {name: {"steps": list(range(1000)), "values": wire(v)} for name, v in layers.items()}},
    )
    family = api.get(f"/runs/{run_id}/family", params={"prefix": "act_norm/layer.", "max_buckets": 10}).json()
    assert family["metrics"][:3] == ["act_norm/layer.0", "act_norm/layer.1", "act_norm/layer.2"]
    assert len(family["values"]) == 12 and all(
        len(row) == len(family["bucket_starts"]) <= 10 for row in family["values"]
    )
    column = 500 // family["bucket_width"]
    assert family["values"][7][column] == 1e4 and family["values"][6][column] == 6.0
    assert family["nonfinite"][3][900 // family["bucket_width"]] == 1


def test_a_deleted_run_leaves_no_rollups_behind(api: httpx.Client, run_id: str, store_sessions) -> None:
    send(api, run_id, "loss", np.arange(1000), np.ones(1000))
    with store_sessions() as session:
        runs_store.delete_run(session=session, run_id=run_id)
        session.commit()
        assert session.scalar(select(func.count()).select_from(RollupRow).where(RollupRow.run_id == run_id)) == 0


def assert_reads_exact_at_every_width(api: httpx.Client, run_id: str, steps: np.ndarray, values: np.ndarray) -> None:
    """Downsampled reads of the whole series and of windows, at bucket widths from below the
    finest rollup level to above the coarsest one holding anything, say what the points say."""
    order = np.argsort(steps)
    steps, values = steps[order], values[order]
    windows = [(None, None), (int(steps[1]), int(steps[-2])), (int(steps[len(steps) // 3]), int(steps[-1]))]
    for start, end in windows:
        for max_points in (4, 16, 100, 400, 2_000):
            params = {"max_points": max_points} | ({} if start is None else {"start": start, "end": end})
            body = read(api, run_id, "loss", **params)
            if body.get("downsampled"):
                assert_buckets_exact(body, steps, values)
                assert body["points_in_range"] == len(steps[(steps >= body["start"]) & (steps <= body["end"])]), params


def test_a_run_growing_across_every_level_reads_exactly_at_every_width(
    api: httpx.Client, run_id: str, store_sessions
) -> None:
    rng = np.random.default_rng(11)
    # Dense at first, then sparser: its last step passes 2**6, 2**10, 2**14, 2**18 and 2**22 in turn.
    steps = np.unique(
        np.r_[np.arange(0, 2_000), rng.integers(2_000, 70_000, 3_000), rng.integers(70_000, 5_000_000, 3_000)]
    )
    values = rng.normal(size=len(steps))
    values[rng.integers(0, len(steps), 30)] = rng.choice([1e6, -1e6, math.nan, math.inf, -math.inf], 30)
    edges = [0, 10, 70, 1_100, 1_990, 2_300, 5_000, len(steps) - 1_000, len(steps)]
    for lo, hi in zip(edges, edges[1:]):
        send(api, run_id, "loss", steps[lo:hi], values[lo:hi])
        assert_rollups_match_points(store_sessions, run_id, "loss")
        assert_reads_exact_at_every_width(api, run_id, steps[:hi], values[:hi])


def test_a_first_batch_at_a_huge_step_then_late_and_resent_ones_read_exactly(
    api: httpx.Client, run_id: str, store_sessions
) -> None:
    rng = np.random.default_rng(12)
    late = np.arange(0, 3_000, 3)
    huge = 10**9 + np.arange(5_000)
    steps = np.r_[late, huge]
    values = rng.normal(size=len(steps))
    values[[7, 1_500, 4_000]] = [1e6, -1e6, math.nan]
    send(api, run_id, "loss", huge, values[len(late) :])
    assert_rollups_match_points(store_sessions, run_id, "loss")
    assert_reads_exact_at_every_width(api, run_id, huge, values[len(late) :])
    send(api, run_id, "loss", late[500:], values[500 : len(late)])  # late: out of order
    send(api, run_id, "loss", late[:600], values[:600])  # partly re-sent: rebuilt from the points
    assert send(api, run_id, "loss", huge[:100], values[len(late) : len(late) + 100])["stored"] == 0
    assert_rollups_match_points(store_sessions, run_id, "loss")
    assert_reads_exact_at_every_width(api, run_id, steps, values)


def test_bucket_0_rows_left_above_the_finest_level_by_an_older_version_are_never_read(
    api: httpx.Client, run_id: str, store_sessions
) -> None:
    rng = np.random.default_rng(13)
    steps = np.unique(rng.integers(0, 400_000, 6_000))
    values = rng.normal(size=len(steps))
    send(api, run_id, "loss", steps[:4_000], values[:4_000])
    with store_sessions() as session:  # what main wrote (bucket 0 at every level), gone stale: wrong on purpose
        metric_id = session.query(MetricRow.metric_id).filter_by(run_id=run_id, name="loss").scalar()
        stale = dict(count=1, finite_sum=1e12, min_value=-1e12, min_step=1, max_value=1e12, max_step=1)
        stale |= dict(first_step=1, first_value=1e12, last_step=1, last_value=1e12)
        stale |= dict(nan_count=7, posinf_count=7, neginf_count=7)
        session.add_all(
            RollupRow(run_id=run_id, metric_id=metric_id, level=level, bucket=0, **stale) for level in LEVELS[1:]
        )
        session.commit()
    send(api, run_id, "loss", steps[3_000:], values[3_000:])  # partly re-sent: rebuilt from the points
    assert_reads_exact_at_every_width(api, run_id, steps, values)
