"""Property-based test of the ingest path against a real server, on SQLite and Postgres.

Hypothesis draws batches with random metric names (framework names, odd Unicode, control
characters, names too long), random steps with repeats inside a batch and across batches,
values with NaN and ±Inf, malformed series, verbatim re-sends, three encodings (JSON with the
non-finite values spelled as strings, JSON with bare NaN/Infinity tokens, msgpack), and
concurrent senders. Whatever it draws, the store holds exactly the accepted points: for each
accepted metric and step, the value sent first; nothing of a refused metric; and every answer
counts, refuses and reports conflicts as it should.

The model of what is accepted is written here from the API's contract, not taken from the
server's code. Bounded: HOLTER_PROPERTY_EXAMPLES examples per store (default 12).
"""

from __future__ import annotations

import json
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import new_run_id
from tests.servers import ServerProcess

EXAMPLES = int(os.environ.get("HOLTER_PROPERTY_EXAMPLES", "12"))

# A name is refused when empty, longer than 256 characters, or holding a control character
# (C0, DEL, C1), a lone surrogate or a line/paragraph separator.
UNFIT = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")
NAMES = st.one_of(
    st.sampled_from(
        ["loss", "grad_norm", "mfu(%)", "lm loss", "eval/acc@1 (%)", "损失", "x" * 256, "a.b/../c", "q?x=1#f"]
    ),
    st.text(max_size=6),  # includes "", spaces, control characters, any plane
    st.sampled_from(["", "x" * 257, "tab\there", "nul\x00", "lone\ud800", "line\u2028sep"]),
)
STEPS = st.integers(min_value=0, max_value=25)
VALUES = st.floats(allow_nan=True, allow_infinity=True)


def name_is_fit(name: str) -> bool:
    return 0 < len(name) <= 256 and UNFIT.search(name) is None


@st.composite
def series(draw: st.DrawFn) -> dict[str, list[Any]]:
    steps = draw(st.lists(STEPS, max_size=8))
    values = draw(st.lists(VALUES, min_size=len(steps), max_size=len(steps)))
    if steps and draw(st.integers(0, 9)) == 0:
        values = values[:-1]  # a malformed series: the metric is refused, the others are not
    return {"steps": steps, "values": values}


BATCHES = st.dictionaries(NAMES, series(), max_size=5)


@dataclass
class Store:
    """What the store must hold: (metric, step) -> the value sent first, for accepted metrics."""

    points: dict[tuple[str, int], float] = field(default_factory=dict)
    metrics: set[str] = field(default_factory=set)

    def expect(self, batch: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
        """Take a batch in as the service must; return what its answer must say."""
        accepted = {name: s for name, s in batch.items() if name_is_fit(name) and len(s["steps"]) == len(s["values"])}
        refused = sorted(name for name in batch if name not in accepted)
        received = sum(len(s["steps"]) for s in accepted.values())
        if refused and not received:  # nothing to store and something refused: the request as a whole is
            return {"status": 422, "refused": refused}
        stored, conflicts = 0, {}
        for name, s in accepted.items():
            self.metrics.add(name)
            for step, value in zip(s["steps"], s["values"]):
                if (name, step) not in self.points:
                    self.points[(name, step)] = value
                    stored += 1
                elif not same(self.points[(name, step)], value):
                    conflicts[name] = conflicts.get(name, 0) + 1
        return {"status": 200, "received": received, "stored": stored, "refused": refused, "conflicts": conflicts}


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def shown(name: str) -> str:
    """A refused name as the answer shows it: unfit characters escaped."""
    return UNFIT.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), name)


def encode(batch: dict[str, dict[str, list[Any]]], how: str) -> tuple[bytes, str]:
    if how == "msgpack" and not any(
        re.search(r"[\ud800-\udfff]", name) for name in batch
    ):  # msgpack's UTF-8 has no lone surrogates
        return msgpack.packb({"metrics": batch}), "application/msgpack"
    if how == "bare":  # Python's json writes NaN and Infinity as bare tokens
        return json.dumps({"metrics": batch}).encode(), "application/json"
    spelled = {
        name: {
            "steps": s["steps"],
            "values": [
                v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))
                for v in s["values"]
            ],
        }
        for name, s in batch.items()
    }
    return json.dumps({"metrics": spelled}, allow_nan=False).encode(), "application/json"


def post(api: httpx.Client, run_id: str, batch: dict[str, Any], how: str) -> httpx.Response:
    body, content_type = encode(batch, how)
    return api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": content_type})


def check_answer(answer: httpx.Response, expected: dict[str, Any]) -> None:
    assert answer.status_code == expected["status"], answer.text
    body = answer.json()
    if expected["status"] == 422:
        assert sorted(e["loc"][-1] for e in body["detail"]) == sorted(shown(n) for n in expected["refused"])
        return
    assert (body["received"], body["stored"]) == (expected["received"], expected["stored"])
    assert body["duplicates"] == expected["received"] - expected["stored"]
    assert sorted(r["metric"] for r in body["refused"]) == sorted(shown(n) for n in expected["refused"])
    assert {c["metric"]: c["count"] for c in body["conflicts"]} == expected["conflicts"]


def check_store(api: httpx.Client, run_id: str, store: Store) -> None:
    metrics = {m["name"]: m for m in api.get(f"/runs/{run_id}").json()["metrics"]}
    assert set(metrics) == store.metrics
    for name in store.metrics:
        expected = sorted((step, value) for (metric, step), value in store.points.items() if metric == name)
        path = quote(name, safe="/").replace(".", "%2E")  # "." too, or "../" would read as a step up
        read = api.get(f"/runs/{run_id}/metrics/{path}/points", headers={"accept": "application/msgpack"})
        assert read.status_code == 200, (name, read.text)
        series = msgpack.unpackb(read.content)
        assert series["steps"] == [step for step, _ in expected], name
        assert all(same(got, want) for got, (_, want) in zip(series["values"], expected)), name
        assert metrics[name]["count"] == len(expected)


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
@given(
    sequential=st.lists(
        st.tuples(BATCHES, st.sampled_from(["spelled", "bare", "msgpack"]), st.booleans()), min_size=1, max_size=5
    ),
    concurrent=st.lists(
        st.lists(
            st.sets(st.tuples(st.sampled_from(["loss", "mfu(%)", "损失", "new/a", "new/b"]), STEPS), max_size=6),
            min_size=1,
            max_size=2,
        ),
        min_size=2,
        max_size=4,
    ),
)
def test_the_store_holds_exactly_the_accepted_points(server: ServerProcess, sequential: list, concurrent: list) -> None:
    run_id = new_run_id()
    store = Store()
    with server.api() as api:
        api.post("/runs", json={"id": run_id, "project": "properties"}).raise_for_status()
        for batch, how, resend in sequential:
            check_answer(post(api, run_id, batch, how), store.expect(batch))
            if resend:  # a retry of the same request: nothing new, nothing refused twice into the store
                check_answer(post(api, run_id, batch, how), store.expect(batch))

        # Concurrent senders (ranks of one job) racing to add the same new metrics; a point's value is
        # a function of its metric and step, so whichever sender wins a step stores the same value.
        def value_of(name: str, step: int) -> float:
            return step * 0.5 + len(name)

        def send(batches: list[set[tuple[str, int]]]) -> list[httpx.Response]:
            with server.api() as client:
                answers = []
                for points in batches:
                    batch: dict[str, dict[str, list[Any]]] = {}
                    for name, step in sorted(points):
                        batch.setdefault(name, {"steps": [], "values": []})
                        batch[name]["steps"].append(step)
                        batch[name]["values"].append(value_of(name, step))
                    answers.append(post(client, run_id, batch, "spelled"))
                return answers

        with ThreadPoolExecutor(max_workers=len(concurrent)) as pool:
            answers = [a for sender in pool.map(send, concurrent) for a in sender]
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers if a.status_code != 200]
        sent = {(name, step) for sender in concurrent for points in sender for name, step in points}
        new = {(name, step) for name, step in sent if (name, step) not in store.points}
        assert sum(a.json()["stored"] for a in answers) == len(new)
        for name, step in sorted(sent):
            store.metrics.add(name)
            store.points.setdefault((name, step), value_of(name, step))
        check_store(api, run_id, store)
