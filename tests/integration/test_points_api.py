"""The points wire format through the real server, on SQLite and Postgres."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import httpx
import msgpack
import pytest

from tests.conftest import new_run_id


@pytest.fixture
def run_id(api: httpx.Client) -> str:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "points"}).raise_for_status()
    return run_id


def read(api: httpx.Client, run_id: str, metric: str, **params: int) -> dict:
    answer = api.get(f"/runs/{run_id}/metrics/{metric}/points", params=params)
    answer.raise_for_status()
    return answer.json()


def test_json_batch_round_trips_nan_and_infinities_exactly(api: httpx.Client, run_id: str) -> None:
    values = [2.31, "NaN", "Infinity", "-Infinity", 1e-300, -0.5]
    stored = api.post(
        f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [0, 1, 2, 3, 4, 5], "values": values}}}
    )
    assert stored.json() == {"received": 6, "stored": 6, "duplicates": 0, "refused": [], "conflicts": []}
    assert read(api, run_id, "loss")["values"] == values


def test_every_double_is_stored_bit_for_bit_with_its_wall_time_and_summary(api: httpx.Client, run_id: str) -> None:
    """Postgres takes a small batch's arrays as text (store/backends/postgres.array_text): the
    shortest decimal of each double must read back as the same double, down to the subnormals
    and a value's last bit (-0.0 is left out: SQLite keeps a whole-valued REAL as an integer, 0), a
    wall time left out must stay missing, and the metric's summary (filled from the same arrays)
    must name the last value exactly."""
    values = [
        0.1 + 0.2,
        5e-324,
        -2.2250738585072014e-308,
        1.7976931348623157e308,
        -1e-310,
        1 / 3,
        123456789.12345679,
        2.0**-1074 * 3,
    ]
    steps = list(range(len(values)))
    times = [
        1_700_000_000.123456,
        None,
        1_700_000_001.5,
        None,
        1_700_000_002.25,
        1_700_000_003.0,
        None,
        1_700_000_004.75,
    ]
    answer = api.post(
        f"/runs/{run_id}/points",
        content=msgpack.packb({"metrics": {"odd": {"steps": steps, "values": values, "times": times}}}),
        headers={"content-type": "application/msgpack"},
    )
    assert answer.status_code == 200 and answer.json()["stored"] == len(values), answer.text
    back = msgpack.unpackb(
        api.get(f"/runs/{run_id}/metrics/odd/points", headers={"accept": "application/msgpack"}).content
    )
    assert [float.hex(v) for v in back["values"]] == [float.hex(v) for v in values]
    assert back["times"] == times
    metric = next(m for m in api.get(f"/runs/{run_id}").json()["metrics"] if m["name"] == "odd")
    assert (metric["count"], metric["first_step"], metric["last_step"], metric["last_value"]) == (
        len(values),
        0,
        len(values) - 1,
        values[-1],
    )


def test_bare_nan_tokens_from_python_json_are_accepted(api: httpx.Client, run_id: str) -> None:
    body = b'{"metrics": {"loss": {"steps": [0, 1], "values": [NaN, -Infinity]}}}'
    assert (
        api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": "application/json"}).status_code
        == 200
    )
    assert read(api, run_id, "loss")["values"] == ["NaN", "-Infinity"]


def test_msgpack_batch_and_msgpack_read_carry_floats_natively(api: httpx.Client, run_id: str) -> None:
    body = msgpack.packb(
        {
            "metrics": {
                "grad_norm": {"steps": [10, 20, 30], "values": [0.8, math.nan, math.inf], "times": [1.5, 2.5, 3.5]}
            }
        }
    )
    stored = api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": "application/msgpack"})
    assert stored.json()["stored"] == 3
    answer = api.get(f"/runs/{run_id}/metrics/grad_norm/points", headers={"accept": "application/msgpack"})
    assert answer.headers["content-type"] == "application/msgpack"
    series = msgpack.unpackb(answer.content)
    assert series["steps"] == [10, 20, 30]
    assert series["values"][0] == 0.8 and math.isnan(series["values"][1]) and series["values"][2] == math.inf
    assert series["times"] == [1.5, 2.5, 3.5]


def test_step_times_give_wall_times_to_metrics_without_their_own(api: httpx.Client, run_id: str) -> None:
    batch = {
        "metrics": {
            "loss": {"steps": [1, 2], "values": [1.0, 2.0]},
            "lr": {"steps": [2], "values": [0.1], "times": [99.0]},
        },
        "step_times": {"steps": [1, 2], "times": [10.5, 11.5]},
    }
    api.post(f"/runs/{run_id}/points", json=batch).raise_for_status()
    assert read(api, run_id, "loss")["times"] == [10.5, 11.5]
    assert read(api, run_id, "lr")["times"] == [99.0]


def test_resent_batch_stores_nothing_twice(api: httpx.Client, run_id: str) -> None:
    batch = {
        "metrics": {
            "loss": {"steps": list(range(100)), "values": [float(i) for i in range(100)]},
            "lr": {"steps": [0], "values": [0.1]},
        }
    }
    assert api.post(f"/runs/{run_id}/points", json=batch).json()["stored"] == 101
    assert api.post(f"/runs/{run_id}/points", json=batch).json() == {
        "received": 101,
        "stored": 0,
        "duplicates": 101,
        "refused": [],
        "conflicts": [],
    }
    assert len(read(api, run_id, "loss")["steps"]) == 100
    metrics = {m["name"]: m for m in api.get(f"/runs/{run_id}").json()["metrics"]}
    assert metrics["loss"]["count"] == 100


def test_same_step_with_another_value_keeps_the_first_and_says_so(api: httpx.Client, run_id: str) -> None:
    api.post(
        f"/runs/{run_id}/points",
        json={"metrics": {"loss": {"steps": [5], "values": [1.0]}, "lr": {"steps": [5], "values": [0.1]}}},
    )
    batch = {
        "metrics": {"loss": {"steps": [5, 6], "values": [9.0, 2.0]}, "lr": {"steps": [5, 6], "values": [0.1, 0.1]}}
    }
    again = api.post(f"/runs/{run_id}/points", json=batch).json()
    assert again == {
        "received": 4,
        "stored": 2,
        "duplicates": 2,
        "refused": [],
        "conflicts": [{"metric": "loss", "count": 1, "steps": [5]}],
    }
    assert read(api, run_id, "loss")["values"] == [1.0, 2.0]


def test_a_resend_of_nan_and_infinities_is_no_conflict(api: httpx.Client, run_id: str) -> None:
    batch = {"metrics": {"loss": {"steps": [0, 1, 2], "values": ["NaN", "Infinity", "-Infinity"]}}}
    api.post(f"/runs/{run_id}/points", json=batch).raise_for_status()
    assert api.post(f"/runs/{run_id}/points", json=batch).json()["conflicts"] == []


def test_a_step_twice_in_one_batch_with_two_values_is_a_conflict(api: httpx.Client, run_id: str) -> None:
    answer = api.post(
        f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [3, 3], "values": [1.0, 5.0]}}}
    ).json()
    assert answer["stored"] == 1 and answer["conflicts"] == [{"metric": "loss", "count": 1, "steps": [3]}]
    assert read(api, run_id, "loss")["values"] == [1.0]


def test_run_summary_tracks_counts_and_latest_values(api: httpx.Client, run_id: str) -> None:
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [3, 4], "values": [3.0, 4.0]}}})
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [1], "values": [1.0]}}})  # late arrival
    run = api.get(f"/runs/{run_id}").json()
    assert run["last_step"] == 4
    summary = {k: run["metrics"][0][k] for k in ("name", "count", "first_step", "last_step", "last_value")}
    assert len(run["metrics"]) == 1 and summary == {
        "name": "loss",
        "count": 3,
        "first_step": 1,
        "last_step": 4,
        "last_value": 4.0,
    }


def test_range_read_honours_start_end_and_limit(api: httpx.Client, run_id: str) -> None:
    api.post(
        f"/runs/{run_id}/points",
        json={"metrics": {"loss": {"steps": list(range(0, 1000, 10)), "values": list(range(100))}}},
    )
    window = read(api, run_id, "loss", start=100, end=200)
    assert window["steps"] == list(range(100, 201, 10))
    limited = read(api, run_id, "loss", start=100, limit=3)
    assert limited["steps"] == [100, 110, 120] and limited["truncated"] is True


def test_metric_names_with_slashes_are_readable(api: httpx.Client, run_id: str) -> None:
    api.post(f"/runs/{run_id}/points", json={"metrics": {"act_norm/layer.3": {"steps": [1], "values": [2.0]}}})
    assert read(api, run_id, "act_norm/layer.3")["values"] == [2.0]


def test_unknown_metric_read_is_404(api: httpx.Client, run_id: str) -> None:
    answer = api.get(f"/runs/{run_id}/metrics/nothing/points")
    assert answer.status_code == 404 and "nothing" in answer.json()["detail"]


def test_points_for_an_unknown_run_are_404_and_store_nothing(api: httpx.Client) -> None:
    answer = api.post("/runs/ghost-run/points", json={"metrics": {"loss": {"steps": [1], "values": [1.0]}}})
    assert answer.status_code == 404
    assert "ghost-run" in answer.json()["detail"]
    assert api.get("/runs/ghost-run").status_code == 404


BAD_BATCHES = {
    "malformed JSON": (b'{"metrics": {"loss": ', 400, "malformed JSON"),
    "empty body": (b"", 400, "empty"),
    "non-integer step": (
        b'{"metrics": {"loss": {"steps": [1.5], "values": [1]}}}',
        422,
        "steps[0]: a step is an integer",
    ),
    "string step": (b'{"metrics": {"loss": {"steps": ["7"], "values": [1]}}}', 422, "steps[0]: a step is an integer"),
    "negative step": (b'{"metrics": {"loss": {"steps": [-1], "values": [1]}}}', 422, "an integer from 0"),
    "lengths differ": (b'{"metrics": {"loss": {"steps": [1, 2], "values": [1]}}}', 422, "values has 1"),
    "value not a number": (b'{"metrics": {"loss": {"steps": [1], "values": ["abc"]}}}', 422, "number"),
    "unknown field": (b'{"metrics": {}, "extra": 1}', 422, "Extra inputs"),
    "control character in a name": (
        b'{"metrics": {"bad\\nname": {"steps": [1], "values": [1]}}}',
        422,
        "control character \\\\n",
    ),
    "NaN step": (b'{"metrics": {"loss": {"steps": [NaN], "values": [1]}}}', 422, "steps[0]: a step is an integer"),
    "duplicate key": (
        b'{"metrics": {"loss": {"steps": [5], "values": [1]}, "loss": {"steps": [6], "values": [2]}}}',
        422,
        "'loss' appears twice",
    ),
    "duplicate field": (
        b'{"metrics": {"loss": {"steps": [5], "values": [1], "values": [2]}}}',
        422,
        "'values' appears twice",
    ),
    "number beyond a float": (b'{"metrics": {"loss": {"steps": [5], "values": [1e400]}}}', 422, "1e400 is too large"),
    "deeply nested": (b'{"metrics": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "nested too deeply"),
    "nested past orjson's limit": (
        b'{"metrics": {"loss": {"steps": ' + b"[" * 5_000 + b"]" * 5_000 + b"}}}",
        400,
        "nested too deeply",
    ),
}


@pytest.mark.parametrize("body,status,says", BAD_BATCHES.values(), ids=BAD_BATCHES.keys())
def test_bad_batch_gets_a_clear_4xx_and_disturbs_nothing(
    api: httpx.Client, run_id: str, body: bytes, status: int, says: str
) -> None:
    good = {"metrics": {"loss": {"steps": [0, 1], "values": [1.0, 2.0]}}}
    api.post(f"/runs/{run_id}/points", json=good).raise_for_status()
    answer = api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == status
    assert says in str(answer.json()["detail"])
    assert read(api, run_id, "loss")["values"] == [1.0, 2.0]
    assert [m["count"] for m in api.get(f"/runs/{run_id}").json()["metrics"]] == [2]


def test_malformed_msgpack_is_400(api: httpx.Client, run_id: str) -> None:
    answer = api.post(f"/runs/{run_id}/points", content=b"\xc1\xc1", headers={"content-type": "application/msgpack"})
    assert answer.status_code == 400 and "msgpack" in answer.json()["detail"]


def test_a_msgpack_timestamp_for_a_value_is_422_naming_it(api: httpx.Client, run_id: str) -> None:
    body = msgpack.packb({"metrics": {"loss": {"steps": [1], "values": [msgpack.Timestamp(1, 0)]}}}, datetime=False)
    answer = api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": "application/msgpack"})
    assert answer.status_code == 422
    assert (
        answer.json()["detail"][0]["loc"] == ["body", "metrics", "loss"]
        and "values[0]: a value is a number" in answer.json()["detail"][0]["msg"]
    )


def test_a_msgpack_map_with_a_key_twice_is_422(api: httpx.Client, run_id: str) -> None:
    # msgpack.packb cannot write a map with a repeated key: write the map header and pairs by hand
    pair = msgpack.packb("loss") + msgpack.packb({"steps": [1], "values": [1.0]})
    body = b"\x81" + msgpack.packb("metrics") + b"\x82" + pair + pair
    answer = api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": "application/msgpack"})
    assert answer.status_code == 422 and "'loss' appears twice" in answer.json()["detail"]


def test_batch_over_the_point_limit_is_413_and_stores_nothing(api: httpx.Client, run_id: str) -> None:
    steps = list(range(200_001))  # the test server allows 200,000 points per batch
    answer = api.post(
        f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": steps, "values": [0.0] * len(steps)}}}
    )
    assert answer.status_code == 413
    assert "200000" in answer.json()["detail"]
    assert api.get(f"/runs/{run_id}").json()["metrics"] == []


def test_openapi_documents_the_batch_in_json_and_msgpack(api: httpx.Client, server) -> None:
    schema = httpx.get(f"{server.url}/openapi.json").json()
    body = schema["paths"]["/api/v1/runs/{run_id}/points"]["post"]["requestBody"]["content"]
    assert set(body) == {"application/json", "application/msgpack"}
    batch = schema["components"]["schemas"]["PointsBatch"]
    assert "#/components/schemas/SeriesPoints" in str(batch["properties"]["metrics"])
    assert "NaN" in str(schema["components"]["schemas"]["SeriesPoints"])


# Names as training frameworks log them, none of which the old name pattern let through.
FRAMEWORK_NAMES = [
    "mfu(%)",  # pytorch/torchtitan:torchtitan/components/metrics.py (MetricsProcessor.log)
    "memory/max_reserved(%)",  # same file
    "lm loss",  # NVIDIA/Megatron-LM:pretrain_gpt.py (loss_func reports {'lm loss': ...})
    "throughput(tps)",  # pytorch/torchtitan:torchtitan/components/metrics.py
    "train/loss#2",
    "acc@1 (%)",
    "loss?",
    "a&b",
    "x=1;y=2",
    "损失/训练",
    "lr 🚀",
    "../../etc",
    "<script>",
    "percent%25",
    "x" * 256,
]


def test_any_printable_metric_name_is_stored_and_read_back(api: httpx.Client, run_id: str) -> None:
    batch = {"metrics": {name: {"steps": [1], "values": [float(i)]} for i, name in enumerate(FRAMEWORK_NAMES)}}
    answer = api.post(f"/runs/{run_id}/points", json=batch).json()
    assert answer["stored"] == len(FRAMEWORK_NAMES) and answer["refused"] == []
    for i, name in enumerate(FRAMEWORK_NAMES):
        # in a path "." too is escaped, or the client would read "../" as a step up
        assert read(api, run_id, quote(name, safe="/").replace(".", "%2E"))["values"] == [float(i)], name
    assert sorted(m["name"] for m in api.get(f"/runs/{run_id}").json()["metrics"]) == sorted(FRAMEWORK_NAMES)


def test_a_bad_metric_is_refused_alone_and_the_others_are_stored(api: httpx.Client, run_id: str) -> None:
    batch = {
        "metrics": {
            "loss": {"steps": [0, 1], "values": [2.0, 1.9]},
            "mfu(%)": {"steps": [0, 1], "values": [41.0, 42.0]},
            "bad\nname": {"steps": [0, 1], "values": [1.0, 1.0]},
            "x" * 257: {"steps": [0], "values": [1.0]},
            "": {"steps": [0], "values": [1.0]},
            "lr": {"steps": [0, 1], "values": [0.1]},
            "tokens": {"steps": [-1], "values": [5.0]},
        }
    }
    answer = api.post(f"/runs/{run_id}/points", json=batch)
    assert answer.status_code == 200
    body = answer.json()
    assert body["received"] == 4 and body["stored"] == 4
    reasons = {refused["metric"]: refused for refused in body["refused"]}
    assert set(reasons) == {"bad\\nname", "x" * 257, "", "lr", "tokens"}
    assert "control character \\n" in reasons["bad\\nname"]["reason"]
    assert "at most 256 characters" in reasons["x" * 257]["reason"]
    assert "empty" in reasons[""]["reason"]
    assert "values has 1" in reasons["lr"]["reason"] and reasons["lr"]["points"] == 2
    assert "steps[0]: a step is an integer from 0" in reasons["tokens"]["reason"]
    assert {m["name"]: m["count"] for m in api.get(f"/runs/{run_id}").json()["metrics"]} == {"loss": 2, "mfu(%)": 2}


def test_text_no_store_can_hold_is_refused_per_metric(api: httpx.Client, run_id: str) -> None:
    body = (
        b'{"metrics": {"lo\\u0000ss": {"steps": [1], "values": [1]}, "a\\ud800": {"steps": [1], "values": [1]}, '
        b'"ok": {"steps": [1], "values": [1]}}}'
    )
    answer = api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": "application/json"}).json()
    assert answer["stored"] == 1
    assert sorted(refused["metric"] for refused in answer["refused"]) == ["a\\ud800", "lo\\x00ss"]
    assert [m["name"] for m in api.get(f"/runs/{run_id}").json()["metrics"]] == ["ok"]


def test_parallel_batches_adding_metrics_to_one_run_all_store_every_point_once(server, run_id: str) -> None:
    # 64 writers (ranks, threads) of one job, each adding metrics of its own and the same shared ones
    def send(rank: int) -> httpx.Response:
        metrics = {f"rank{rank}/m{j}": {"steps": list(range(10)), "values": [float(rank)] * 10} for j in range(3)}
        metrics |= {f"shared/m{j}": {"steps": list(range(10)), "values": [1.0] * 10} for j in range(3)}
        with server.api() as client:
            return client.post(f"/runs/{run_id}/points", json={"metrics": metrics})

    with ThreadPoolExecutor(max_workers=64) as pool:
        answers = list(pool.map(send, range(64)))
    assert [a.status_code for a in answers] == [200] * 64, [a.text for a in answers if a.status_code != 200][:3]
    assert sum(a.json()["stored"] for a in answers) == 64 * 3 * 10 + 3 * 10
    assert all(a.json()["conflicts"] == [] and a.json()["refused"] == [] for a in answers)
    with server.api() as client:
        metrics = client.get(f"/runs/{run_id}").json()["metrics"]
    assert len(metrics) == 64 * 3 + 3 and {m["count"] for m in metrics} == {10}


def test_a_batch_naming_more_metrics_than_a_run_may_have_is_422(api: httpx.Client, run_id: str) -> None:
    # 70,000 names: more than Postgres' 65,535 parameters, had they gone into one statement
    body = {"metrics": {f"m{i}": {"steps": [0], "values": [1.0]} for i in range(70_000)}}
    answer = api.post(f"/runs/{run_id}/points", json=body)
    assert answer.status_code == 422 and "70,000 metrics" in answer.json()["detail"]
    assert api.get(f"/runs/{run_id}").json()["metrics"] == []


def test_the_dashboards_client_reads_a_metric_of_any_name(api: httpx.Client, run_id: str, server) -> None:
    import asyncio

    from holter_dashboard.api import HolterAPI

    names = ["mfu(%)", "loss?", "a#b", "../x", "100%", "lm loss"]
    api.post(
        f"/runs/{run_id}/points",
        json={"metrics": {name: {"steps": [1], "values": [float(i)]} for i, name in enumerate(names)}},
    )

    async def read_all() -> list[dict]:
        client = HolterAPI(server.url)
        return [await client.points(run_id, name) for name in names]

    reads = asyncio.run(read_all())
    assert [(read["metric"], read["values"]) for read in reads] == [(name, [float(i)]) for i, name in enumerate(names)]
