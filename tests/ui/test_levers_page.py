"""The levers page in a real browser: a planted lever (the logprob mismatch spikes every
`rollouts_num * 2` steps) is ranked first with its evidence; a set without one says so."""

from __future__ import annotations

import random
import uuid

import holter
import httpx
import pytest

from tests.integration.test_live_detection import settled_events
from tests.servers import InProcessServer
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


def stream_runs(url: str, project: str, periods: dict[int, int]) -> list[str]:
    """One run per `rollouts_num`; its logprob_mismatch spikes every `period` steps from step 100."""
    rng = random.Random(0)
    ids = []
    for seed, (rollouts, period) in enumerate(periods.items()):
        run = holter.init(
            project=project,
            name=f"rollouts{rollouts}",
            config={"rollouts_num": rollouts, "seed": seed, "lr": 1e-6},
            url=url,
        )
        for step in range(900):
            spike = 0.1 if step % period == 0 and step >= 100 else 0.0
            run.log({"logprob_mismatch": 0.002 + abs(rng.gauss(0, 0.0005)) + spike}, step=step)
        run.finish()
        ids.append(run.id)
    return ids


@pytest.fixture(scope="module")
def planted(ui_server: InProcessServer) -> str:
    project = f"levers-{uuid.uuid4().hex[:6]}"
    stream_runs(ui_server.url, project, {8: 16, 16: 32, 32: 64, 64: 128})

    def found() -> bool:  # detection runs in the background: wait until the lever shows
        report = httpx.get(f"{ui_server.url}/api/v1/levers", params={"project": project}, timeout=30).json()
        return bool(report["candidates"]) and report["candidates"][0]["key"] == "rollouts_num"

    wait_until(found, timeout=60, interval=1.0)
    return project


@pytest.fixture(scope="module")
def leverless(ui_server: InProcessServer) -> list[str]:
    ids = stream_runs(ui_server.url, f"levers-{uuid.uuid4().hex[:6]}", {8: 40, 16: 40, 32: 40})
    for run_id in ids:
        settled_events(ui_server.url, run_id)
    return ids


def test_a_planted_lever_is_ranked_first_with_its_evidence(page, planted: str) -> None:  # type: ignore[no-untyped-def]
    page.goto("/")
    page.locator("#nav-levers").click()
    page.locator(".empty-state", has_text="Choose the runs").wait_for()
    page.goto(f"/levers?project={planted}")
    top = page.locator(".lever-row").first
    top.wait_for()
    assert top.locator(".lever-key").inner_text() == "rollouts_num"
    assert "proportional" in top.inner_text() and "logprob_mismatch" in top.inner_text()
    assert "proportional to rollouts_num" in top.locator(".lever-evidence").inner_text()
    assert "4 runs" in page.locator(".levers-scope").inner_text()


def test_runs_chosen_on_the_runs_page_without_a_lever_get_the_note(page, leverless: list[str]) -> None:  # type: ignore[no-untyped-def]
    page.goto("/")
    for run_id in leverless:
        page.locator(".run-row", has_text=run_id).locator("input[type=checkbox]").check()
    button = page.locator("#runs-levers")
    wait_until(button.is_enabled, timeout=10)
    button.click()
    page.wait_for_url("**/levers?runs=*")
    note = page.locator(".levers-note")
    note.wait_for()
    assert note.inner_text().strip()
    assert page.locator(".lever-row").count() == 0
