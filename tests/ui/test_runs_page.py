"""The runs table in a real browser: metric and config columns, search, sort, sparklines, and
the view kept in the URL."""

from __future__ import annotations

import math
import uuid

import pytest

from tests.servers import InProcessServer
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def three_runs(ui_server: InProcessServer) -> dict[str, str]:
    """Three finished runs of one project whose losses end at 1.0, 0.5 and 2.0, with configs."""
    project = f"table{uuid.uuid4().hex[:6]}"
    ids = {}
    with ui_server.api() as api:
        for name, floor, lr in (("alpha", 1.0, 1e-3), ("bravo", 0.5, 3e-4), ("charlie", 2.0, 1e-2)):
            run_id = f"{name}{uuid.uuid4().hex[:6]}"
            api.post(
                "/runs",
                json={
                    "id": run_id,
                    "project": project,
                    "name": name,
                    "tags": ["sweep"],
                    "config": {"optimizer": {"name": "adamw", "lr": lr}, "data": f"set-{name}"},
                },
            ).raise_for_status()
            steps = list(range(400))
            loss = [floor + 2.0 * math.exp(-s / 60) for s in steps]
            api.post(
                f"/runs/{run_id}/points",
                json={
                    "metrics": {
                        "loss": {"steps": steps, "values": loss},
                        "reward": {"steps": steps, "values": [-v for v in loss]},
                    }
                },
            ).raise_for_status()
            api.post(f"/runs/{run_id}/finish", json={"status": "finished"}).raise_for_status()
            ids[name] = run_id
    ids["project"] = project
    return ids


def table(page) -> list[list[str]]:  # type: ignore[no-untyped-def]
    return page.evaluate(
        "() => Array.from(document.querySelectorAll('.run-row'))"
        ".map(r => Array.from(r.querySelectorAll('td')).map(td => td.innerText.trim()))"
    )


def test_metric_and_config_columns_sorted_best_first_and_kept_in_the_url(page, three_runs: dict) -> None:  # type: ignore[no-untyped-def]
    project = three_runs["project"]
    page.goto(f"/?project={project}&cols=loss,reward&ccols=optimizer.lr&sort=best:loss&asc=1")
    page.locator(".run-row .metric-cell").first.wait_for()
    rows = table(page)
    assert [r[1].split("\n")[0] for r in rows] == ["bravo", "alpha", "charlie"]  # lowest best loss first
    bravo = rows[0]
    assert any(cell.startswith("0.5") and "· 0.5" in cell for cell in bravo)  # loss: last 0.5 · best 0.5
    assert any(cell.startswith("-0.5") and "· -0.5" in cell for cell in bravo)  # reward: best is the highest
    assert "0.0003" in bravo
    assert page.locator(".run-row .run-sparkline").count() == 3  # each run's loss as a sparkline
    # the view is in the URL: opened again, it is the same
    url = page.evaluate("() => window.location.href")
    assert "cols=loss%2Creward" in url and "sort=best%3Aloss" in url and "asc=1" in url
    page.goto(url)
    page.locator(".run-row .metric-cell").first.wait_for()
    assert [r[1].split("\n")[0] for r in table(page)] == ["bravo", "alpha", "charlie"]


def test_search_looks_in_names_tags_and_config(page, three_runs: dict) -> None:  # type: ignore[no-untyped-def]
    project = three_runs["project"]
    page.goto(f"/?project={project}")
    page.locator(".run-row").first.wait_for()
    search = page.locator("#runs-q")
    cases = (
        ("charlie", ["charlie"]),
        ("set-alpha", ["alpha"]),
        ("lr=0.0003", ["bravo"]),
        ("sweep", ["alpha", "bravo", "charlie"]),
    )
    for query, expected in cases:
        search.fill(query)
        search.press("Enter")
        wait_until(lambda expected=expected: sorted(r[1].split("\n")[0] for r in table(page)) == expected, timeout=15)
    assert "q=sweep" in page.evaluate("() => window.location.href")


def test_big_configs_send_only_the_columns_shown_and_a_bounded_list_of_keys(page, ui_server: InProcessServer) -> None:  # type: ignore[no-untyped-def]
    # Three runs of 10,000 config keys each: the table shows the chosen column, the keys offered
    # are a bounded page that typing narrows, and no callback carries a whole config.
    project = f"bigcfg{uuid.uuid4().hex[:6]}"
    with ui_server.api() as api:
        for seed in range(3):
            config = {f"block{i}": {"width": i, "seed": seed} for i in range(5_000)}
            api.post("/runs", json={"project": project, "name": f"big{seed}", "config": config}).raise_for_status()
    sizes: list[int] = []
    page.on(
        "response",
        lambda response: sizes.append(len(response.body())) if "_dash-update-component" in response.url else None,
    )
    page.goto(f"/?project={project}&ccols=block4321.width")
    page.locator(".run-row").first.wait_for()
    assert page.locator(".config-cell", has_text="4321").count() == 3
    page.locator("#runs-ccols").click()
    page.locator("#runs-ccols").type("block123")
    wait_until(lambda: page.get_by_role("option", name="block1234.seed").count() == 1, timeout=15)
    assert page.get_by_role("option").count() <= 101  # the chosen key and a page of 100
    assert max(sizes) < 100_000  # one config alone is ~300 KB as JSON


def test_runs_are_drawn_fifty_at_a_time_and_the_page_is_kept_in_the_url(page, ui_server: InProcessServer) -> None:  # type: ignore[no-untyped-def]
    # Dash takes time quadratic in a layout's size: 200 rows kept the tab busy for ~27 s
    project = f"many{uuid.uuid4().hex[:6]}"
    with ui_server.api() as api:
        for i in range(60):
            api.post("/runs", json={"project": project, "name": f"run-{i:02d}"}).raise_for_status()
    page.goto(f"/?project={project}")
    page.locator(".run-row").first.wait_for()
    assert page.locator(".run-row").count() == 50
    assert page.locator(".runs-count").inner_text().startswith("1–50 of 60")
    page.locator("#runs-pager").get_by_role("button", name="2").click()
    wait_until(lambda: page.locator(".run-row").count() == 10, timeout=15)
    assert "page=2" in page.evaluate("() => window.location.href")
