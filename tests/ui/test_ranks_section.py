"""The run page's Ranks section in a real browser, for a job of four ranks on two hosts made
through the API as its ranks would make it (each joins the run, logs its timings under
`holter/dist/`, beats): rank 2 computes four times longer than its peers before the collectives
(the straggler), and the job has stood still for minutes with ranks 0-2 inside the gradients'
all-reduce while rank 3's main thread waits on its data queue (a hung job, with rank 3's stack).

The section is there only for a job's run; opened, it draws every rank's timing as a heatmap
row, lists the ranks under their hosts, and shows rank 3's stack with its innermost frame; the
events link to their ranks; rank 0's timings are none of the main charts; it reads again while
the job is alive, and no more once it has ended."""

from __future__ import annotations

import json
import math
import random
import uuid

import httpx
import pytest

from tests.servers import InProcessServer
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

WORLD = 4
STEPS = 300
HOST = {0: "node-0", 1: "node-0", 2: "node-1", 3: "node-1"}
TIMINGS = ("holter/dist/compute_s", "holter/dist/wait_s", "holter/dist/step_s")
TRAIN = [
    {"file": "/work/train.py", "line": 120, "function": "main", "code": "train(model, loader)"},
    {"file": "/work/train.py", "line": 88, "function": "train", "code": "loss.backward()"},
]
STUCK = [
    TRAIN[0],
    {"file": "/work/data.py", "line": 41, "function": "next_batch", "code": "batch = queue.get()"},
    {"file": "/usr/lib/python3.11/queue.py", "line": 171, "function": "get", "code": "self.not_empty.wait()"},
]


def series(rank: int, prefix: str, name: str) -> str:
    """A rank's series as its client names it: rank 0's under the name itself (vocabulary/ranks.py)."""
    return name if rank == 0 else f"{prefix}{rank}/{name}"


def timings(steps: range, seed: int) -> dict[str, dict[str, list]]:
    """Every rank's timings and loss at `steps`: rank 2 computes 50 ms where the others take 12,
    and waits 7 ms in the all-reduce where they wait 45 (every rank's step lasts the same 57 ms)."""
    rng = random.Random(seed)
    metrics: dict[str, dict[str, list]] = {}
    for rank in range(WORLD):
        compute = [(0.050 if rank == 2 else 0.012) + rng.gauss(0, 0.0005) for _ in steps]
        wait = [0.057 - c for c in compute]
        columns = {
            "holter/dist/compute_s": compute,
            "holter/dist/wait_s": wait,
            "holter/dist/step_s": [c + w for c, w in zip(compute, wait)],
            "loss": [2.5 * math.exp(-s / 150) + 0.5 + rng.gauss(0, 0.02) for s in steps],
        }
        for name, values in columns.items():
            metrics[series(rank, "holter/rank/", name)] = {"steps": list(steps), "values": values}
    return metrics


def make_job(api: httpx.Client, *, project: str, hung: bool = True) -> str:
    """A job of four ranks on two hosts, through the API: joined, its timings logged, and each
    rank's beat. `hung`: every rank has stood still at step 300 for 150 s, ranks 0-2 inside the
    all-reduce and rank 3 on its data queue; the beats promise the next in a minute, so the ranks
    stay alive while the module's tests run."""
    run_id = f"job{uuid.uuid4().hex[:10]}"
    for rank in range(WORLD):
        join = {"rank": rank, "world_size": WORLD, "host": HOST[rank], "local_rank": rank % 2, "launcher": "torchrun"}
        api.post("/runs", json={"id": run_id, "project": project, "name": "ddp-4", "rank": join}).raise_for_status()
    api.post(f"/runs/{run_id}/points", json={"metrics": timings(range(1, STEPS + 1), seed=3)}).raise_for_status()
    for rank in range(WORLD):
        timing = {
            "steps": 200,
            "first_step": STEPS - 199,
            "last_step": STEPS,
            "step_s": 0.057,
            "wait_s": 0.007 if rank == 2 else 0.045,
            "compute_s": 0.050 if rank == 2 else 0.012,
        }
        beat: dict = {"step": STEPS, "quiet_s": 150.0 if hung else 0.1, "interval_s": 60, "timing": timing}
        if hung and rank == 3:
            beat["stack"] = STUCK
        elif hung:
            beat |= {"collective": {"name": "all_reduce (DDP gradients)", "since_s": 150.0}, "stack": TRAIN}
        api.post(f"/runs/{run_id}/ranks/{rank}/beat", json=beat).raise_for_status()
    return run_id


@pytest.fixture(scope="module")
def api(ui_server: InProcessServer):  # type: ignore[no-untyped-def]
    with ui_server.api() as client:
        yield client


@pytest.fixture(scope="module")
def job(api: httpx.Client) -> str:
    """The hung job with its straggler, once the ranks watch has named both."""
    run_id = make_job(api, project="ranks")

    def named() -> dict[str, list[int]]:
        found = {e["kind"]: e["details"]["ranks"] for e in api.get(f"/runs/{run_id}/events").json()["data"]}
        return found if {"straggler", "rank_hung"} <= set(found) else {}

    assert wait_until(named, timeout=30) == {"straggler": [2], "rank_hung": [3]}
    return run_id


@pytest.fixture(scope="module")
def ended_job(api: httpx.Client) -> str:
    """A job whose four ranks all finished."""
    run_id = make_job(api, project="ranks", hung=False)
    for rank in range(WORLD):
        api.post(f"/runs/{run_id}/finish", json={"rank": rank}).raise_for_status()
    assert api.get(f"/runs/{run_id}").json()["status"] == "finished"
    return run_id


def open_section(page) -> None:  # type: ignore[no-untyped-def]
    page.locator("#run-ranks-open button").first.click()
    page.locator("#run-ranks-heatmap .js-plotly-plot").wait_for()


def heatmap(page) -> dict:  # type: ignore[no-untyped-def]
    """The heatmap as the browser holds it: its rows, their labels and values, title and outlines."""
    return page.evaluate(
        """() => {
            const el = document.querySelector('#run-ranks-heatmap .js-plotly-plot');
            if (!el || !el.data) return {};
            const t = el.data[0];
            return {y: Array.from(t.y), x: Array.from(t.x), z: t.z.map(r => Array.from(r)),
                    labels: el.layout.yaxis.ticktext, title: el.layout.title.text,
                    shapes: (el.layout.shapes || []).map(s => ({y0: s.y0, dash: s.line.dash}))};
        }"""
    )


def test_a_job_s_ranks_section_draws_its_ranks_by_host_and_the_hung_rank_s_stack(page, job: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{job}")
    section = page.locator("#run-ranks-section")
    section.wait_for()
    label = section.locator("#run-ranks-label").inner_text()
    assert "4 ranks" in label and "torchrun" in label and "straggler" in label.lower()
    open_section(page)
    drawn = heatmap(page)
    assert drawn["y"] == [0, 1, 2, 3]
    assert drawn["labels"] == ["rank 0 (node-0)", "rank 1 (node-0)", "rank 2 (node-1)", "rank 3 (node-1)"]
    assert drawn["title"].startswith("holter/dist/compute_s by rank")
    # the straggler is a stripe: rank 2's row, all along, above every other rank's
    rows = [[v for v in row if v is not None] for row in drawn["z"]]
    assert all(len(row) >= 50 for row in rows)
    assert min(rows[2]) > 3 * max(max(rows[r]) for r in (0, 1, 3))
    # the ranks under their hosts, the straggler's and the hung rank's rows marked with their events
    lines = page.locator("#run-ranks tr[data-host], #run-ranks tr[data-rank]")
    order = [line.get_attribute("data-host") or f"rank {line.get_attribute('data-rank')}" for line in lines.all()]
    assert order == ["node-0", "rank 0", "rank 1", "node-1", "rank 2", "rank 3"]
    straggler = page.locator('#run-ranks .rank-row[data-rank="2"]')
    assert "rank-flagged" in straggler.get_attribute("class")
    assert "straggler" in straggler.inner_text().lower() and "50.0 ms" in straggler.inner_text()
    assert "all_reduce (DDP gradients)" in page.locator('#run-ranks .rank-row[data-rank="0"]').inner_text()
    # rank 3's stack, its innermost frame emphasised
    innermost = page.locator('#run-ranks .rank-stack[data-rank="3"] .frame-innermost')
    assert innermost.locator(".frame-function").inner_text() == "get"
    assert innermost.locator(".frame-where").inner_text() == "queue.py:171"
    assert "self.not_empty.wait()" in innermost.locator(".frame-code").inner_text()
    assert page.locator("#run-ranks .rank-quiet-group").get_attribute("data-ranks") == "0,1,2"


def test_rank_0_s_timings_are_no_main_chart(page, job: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{job}")
    page.locator("#run-charts .js-plotly-plot").first.wait_for()
    drawn = page.evaluate(
        """() => Array.from(document.querySelectorAll('#run-charts .js-plotly-plot')).map(el => ({
            title: el.layout.title.text, names: (el.data || []).map(t => t.name || '')}))"""
    )
    names = {name for chart in drawn for name in chart["names"]}
    assert "loss" in names
    assert not any(n.startswith("holter/dist/") for n in names)
    assert not any("holter/dist/" in chart["title"] for chart in drawn)
    assert "holter/dist/" not in page.locator("#run-charts").inner_text()
    # nor a choice of the charts' filter, which would pick no chart
    page.locator("#run-metrics").click()
    page.get_by_role("option", name="loss", exact=True).wait_for()
    choices = page.get_by_role("option").all_inner_texts()
    assert not any(c.startswith("holter/dist/") for c in choices)


def test_an_event_links_to_its_rank_in_the_section(page, job: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{job}")
    page.locator("#run-events .event-straggler .event-rank-link", has_text="rank 2").click()
    page.locator('#run-ranks .rank-row.rank-selected[data-rank="2"]').wait_for()
    wait_until(lambda: "rank=2" in page.url, timeout=10)
    wait_until(lambda: {"y0": 1.5, "dash": "dot"} in heatmap(page).get("shapes", []), timeout=10)
    # the hung event's rank, its stack card picked with it
    page.locator("#run-events .event-rank_hung .event-rank-link", has_text="rank 3").click()
    page.locator('#run-ranks .rank-stack.rank-selected[data-rank="3"]').wait_for()
    assert page.locator("#run-ranks .rank-row.rank-selected").get_attribute("data-rank") == "3"
    wait_until(lambda: "rank=3" in page.url, timeout=10)


def test_the_url_opens_the_section_on_its_rank_and_a_row_picks_another(page, job: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{job}?rank=3")
    page.locator('#run-ranks .rank-row.rank-selected[data-rank="3"]').wait_for()
    page.locator('#run-ranks .rank-row[data-rank="1"] button').click()
    page.locator('#run-ranks .rank-row.rank-selected[data-rank="1"]').wait_for()
    wait_until(lambda: "rank=1" in page.url, timeout=10)
    page.locator('#run-ranks .rank-row[data-rank="1"] button').click()  # again: picked no more
    wait_until(lambda: page.locator("#run-ranks .rank-row.rank-selected").count() == 0, timeout=10)
    wait_until(lambda: "rank=" not in page.url, timeout=10)


def test_a_click_on_a_heatmap_row_picks_its_rank(page, job: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{job}")
    open_section(page)
    plot = page.locator("#run-ranks-heatmap .nsewdrag").first.bounding_box()
    page.mouse.click(plot["x"] + plot["width"] / 2, plot["y"] + plot["height"] * 1.5 / WORLD)  # the second row
    page.locator('#run-ranks .rank-row.rank-selected[data-rank="1"]').wait_for()
    wait_until(lambda: "rank=1" in page.url, timeout=10)


def test_the_heatmap_shows_every_rank_s_loss_when_asked(page, job: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{job}")
    open_section(page)
    page.locator("#run-ranks-metric").click()
    page.get_by_role("option", name="loss", exact=True).click()
    drawn = wait_until(lambda: (h := heatmap(page)).get("title", "").startswith("loss by rank") and h, timeout=15)
    assert drawn["y"] == [0, 1, 2, 3]
    assert all(any(v is not None for v in row) for row in drawn["z"])


def test_the_section_reads_again_while_the_job_lives_and_not_once_it_ended(  # type: ignore[no-untyped-def]
    page, job: str, ended_job: str, api: httpx.Client
) -> None:
    ticks: list[str] = []

    def count_ticks(request) -> None:  # type: ignore[no-untyped-def]
        answer = json.loads(request.post_data or "{}") if "_dash-update-component" in request.url else {}
        if "run-ranks-tick.n_intervals" in answer.get("changedPropIds", []):
            ticks.append(request.url)

    page.on("request", count_ticks)
    page.goto(f"/runs/{job}")
    open_section(page)
    last = max(heatmap(page)["x"])
    # the job logs on (its ranks' beats promise more): the heatmap follows without a reload
    more = timings(range(STEPS + 1, STEPS + 41), seed=4)
    api.post(f"/runs/{job}/points", json={"metrics": more}).raise_for_status()
    wait_until(lambda: max(heatmap(page)["x"]) > last + 20, timeout=15)
    assert ticks
    # an ended job's section is read when opened, then left alone
    page.goto(f"/runs/{ended_job}")
    ticks.clear()
    open_section(page)
    assert heatmap(page)["y"] == [0, 1, 2, 3]
    page.wait_for_timeout(6_000)
    assert ticks == []


def test_a_plain_run_has_no_ranks_section(page, api: httpx.Client) -> None:  # type: ignore[no-untyped-def]
    run_id = f"plain{uuid.uuid4().hex[:10]}"
    api.post("/runs", json={"id": run_id, "project": "ranks"}).raise_for_status()
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [1, 2, 3], "values": [3.0, 2.0, 1.0]}}})
    page.goto(f"/runs/{run_id}")
    page.locator("#run-charts .js-plotly-plot").first.wait_for()
    assert api.get(f"/runs/{run_id}").json()["job"] is None
    assert not page.locator("#run-ranks-section").is_visible()
    assert not page.get_by_text("across the ranks").is_visible()
