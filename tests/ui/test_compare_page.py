"""Choosing runs on the runs page and comparing them, in a real browser: filters, selection, one
metric across runs, a reference band, the exits shaded."""

from __future__ import annotations

import math
import re
import time
import uuid

import numpy as np
import pytest

from tests.servers import InProcessServer
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_runs(ui_server: InProcessServer) -> tuple[str, str]:
    """A reference run and a twin whose loss runs 0.5 higher from step 200 to 299."""
    ids = (f"ref{uuid.uuid4().hex[:8]}", f"twin{uuid.uuid4().hex[:8]}")
    steps = list(range(600))
    with ui_server.api() as api:
        for run_id, bump in zip(ids, (0.0, 0.5)):
            api.post(
                "/runs",
                json={
                    "id": run_id,
                    "project": "ui-compare",
                    "name": run_id,
                    "tags": [f"bump-{bump}"],
                    "config": {"optim": {"lr": 0.1 if bump else 0.2}},
                },
            ).raise_for_status()
            values = [2.0 * math.exp(-s / 300) + 0.01 * math.sin(s) + (bump if 200 <= s < 300 else 0.0) for s in steps]
            api.post(
                f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": steps, "values": values}}}
            ).raise_for_status()
            api.post(f"/runs/{run_id}/finish", json={"status": "finished"}).raise_for_status()
    return ids


def compare_chart(page) -> dict | None:  # type: ignore[no-untyped-def]
    return page.evaluate("""() => {
        const el = document.querySelector('#cmp-graph .js-plotly-plot') || document.querySelector('#cmp-graph');
        if (!el || !el.data || !el.layout) return null;
        return {names: el.data.map(t => t.name), shapes: (el.layout.shapes || []).map(s => [s.x0, s.x1])};
    }""")


def test_without_runs_the_page_says_how_to_choose_them(page) -> None:  # type: ignore[no-untyped-def]
    page.goto("/compare")
    page.locator(".empty-state", has_text="Pick runs to compare").wait_for()


def test_a_run_leaving_the_reference_band_is_shaded_where_it_does(
    page, two_runs: tuple[str, str], ui_server: InProcessServer
) -> None:  # type: ignore[no-untyped-def]
    ref, twin = two_runs
    page.goto(f"/compare?runs={ref},{twin}&metric=loss&ref={ref}")
    chart = wait_until(lambda: (c := compare_chart(page)) and c["shapes"] and c)
    assert "reference band" in chart["names"] and f"{ref} (reference)" in chart["names"] and twin in chart["names"]
    assert any(x0 <= 210 and x1 >= 290 for x0, x1 in chart["shapes"])  # the twin's excursion, and nothing far from it
    assert all(x0 >= 150 and x1 <= 360 for x0, x1 in chart["shapes"])
    assert f"ref={ref}" in page.evaluate("() => window.location.href")
    with ui_server.api() as api:  # the band and the drifts are the service's, as the post-mortem shows them
        drifts = api.get(f"/runs/{twin}/compare", params={"metric": "loss", "reference": ref}).json()["drifts"]
    assert chart["shapes"] == [[d["start_step"], max(d["end_step"], d["start_step"] + 1)] for d in drifts]


def listed(page) -> list[str]:  # type: ignore[no-untyped-def]
    return page.evaluate("() => Array.from(document.querySelectorAll('.run-row .run-link')).map(a => a.innerText)")


def test_the_runs_page_filters_by_tag_and_config_and_compares_the_ticked_runs(page, two_runs: tuple[str, str]) -> None:  # type: ignore[no-untyped-def]
    ref, twin = two_runs
    page.goto("/?project=ui-compare")
    wait_until(lambda: sorted(listed(page)) == sorted([ref, twin]))
    page.goto("/?project=ui-compare&tag=bump-0.5")
    wait_until(lambda: listed(page) == [twin])
    page.goto("/?project=ui-compare&config=optim.lr%3D0.2")
    wait_until(lambda: listed(page) == [ref])
    page.goto("/?project=ui-compare")
    wait_until(lambda: len(listed(page)) == 2)
    compare = page.locator("#runs-compare")
    assert compare.is_disabled()
    for run_id in (ref, twin):
        page.locator(".run-row", has_text=run_id).locator("input[type=checkbox]").check()
    wait_until(compare.is_enabled, timeout=10)
    compare.click()
    page.wait_for_url("**/compare?runs=*")
    wait_until(lambda: (c := compare_chart(page)) and {ref, twin} <= set(c["names"]))


def test_two_seed_groups_are_drawn_as_bands_with_the_services_verdict(
    page, ui_server: InProcessServer, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from tests.seed_runs import OFFSETS, post_run

    project = f"ui-seeds-{uuid.uuid4().hex[:6]}"
    base = {"model": {"norm": "layer"}, "lr": 3e-4}
    with ui_server.api() as api:
        baseline = [post_run(api, project, {**base, "seed": s}, 0.0, OFFSETS[s]) for s in range(3)]
        better = [
            post_run(api, project, {**base, "model": {"norm": "rms"}, "seed": s}, -0.031, OFFSETS[s]) for s in range(3)
        ]
    page.goto(f"/compare?runs={baseline[0]},{better[0]}&metric=eval_loss&a=group&b=group")
    sentence = page.locator("#cmp-verdict-sentence")
    sentence.wait_for()
    assert page.locator("#cmp-verdict-badge").inner_text().lower() == "real effect"
    assert "lower at 5M tokens (95% CI -0.0" in sentence.inner_text()
    names = wait_until(
        lambda: page.evaluate("""() => {
        const el = document.querySelector('#cmp-seed-graph .js-plotly-plot');
        return el && el.data ? el.data.map(t => t.name) : null;
    }""")
    )
    assert sum("median ± robust spread" in n for n in names) == 2 and sum("min–max" in n for n in names) == 2
    assert page.locator("#cmp-config-diff").inner_text().count("model.norm") == 1
    page.locator("#cmp-verdict").screenshot(path=str(tmp_path / "verdict.png"))
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)


def test_several_metrics_at_once_with_run_names_in_the_legends_and_terms_explained(
    page, ui_server: InProcessServer
) -> None:  # type: ignore[no-untyped-def]
    ids = [f"named{uuid.uuid4().hex[:8]}" for _ in range(2)]
    steps = list(range(300))
    with ui_server.api() as api:
        for run_id, name, shift in zip(ids, ("baseline lr", "double lr"), (0.0, 0.3)):
            api.post("/runs", json={"id": run_id, "project": "ui-compare-many", "name": name}).raise_for_status()
            api.post(
                f"/runs/{run_id}/points",
                json={
                    "metrics": {
                        "loss": {"steps": steps, "values": [2.0 - s / 300 + shift for s in steps]},
                        "grad_norm": {"steps": steps, "values": [1.0 + shift] * len(steps)},
                    }
                },
            ).raise_for_status()
    page.goto(f"/compare?runs={ids[0]},{ids[1]}&metric=loss,grad_norm")
    page.locator("#cmp-graph-1 .js-plotly-plot").wait_for()
    for graph in ("#cmp-graph", "#cmp-graph-1"):
        names = wait_until(
            lambda graph=graph: page.evaluate(
                "(g) => { const el = document.querySelector(g + ' .js-plotly-plot'); "
                "return el && el.data && el.data.map(t => t.name); }",
                graph,
            )
        )
        assert "baseline lr" in names and "double lr" in names and not any(i in names for i in ids)
    assert [t.inner_text() for t in page.locator(".cmp-metric-title").all()] == ["loss", "grad_norm"]
    assert "seed group" in page.locator(".cmp-explain-seed-group").inner_text().lower()
    assert "arm a" in page.locator(".cmp-explain-arms").inner_text().lower()
    badge = page.locator("#cmp-verdict-badge")
    badge.wait_for()
    text = badge.inner_text()
    assert "…" not in text and badge.evaluate("el => el.scrollWidth <= el.clientWidth + 1")  # the badge fits its word


def eight_seed_offsets() -> list[float]:
    """Eight seeds' offsets with a seed SD of 0.0426, spread as a normal sample is: the issue's
    8-seed case, where a true difference of -0.077 lies well inside either arm's min–max range."""
    from scipy import stats

    z = stats.norm.ppf((np.arange(8) + 0.5) / 8)
    return list(0.0426 * z / z.std(ddof=1))


@pytest.fixture(scope="module")
def ablations(ui_server: InProcessServer) -> dict[str, tuple[str, str]]:
    """Arms of one project, each named by its first run: an 8-seed baseline and an 8-seed arm 0.077
    lower (inside the seeds' range) that ran other seeds; a 3-seed baseline, an arm 0.001 lower (not
    detectable at 3 seeds), and an arm whose change did nothing (bit-identical values, seed for seed)."""
    from tests.seed_runs import OFFSETS, post_run

    project = f"ui-verdicts-{uuid.uuid4().hex[:6]}"
    base = {"model": {"norm": "layer"}, "lr": 3e-4}
    eight = eight_seed_offsets()
    with ui_server.api() as api:

        def arm(config: dict, shift: float, offsets, seeds: int = 0) -> str:  # type: ignore[no-untyped-def]
            runs = [post_run(api, project, {**config, "seed": seeds + i}, shift, o) for i, o in enumerate(offsets)]
            return runs[0]

        # the 8-seed arms ran other seeds (compared as independent groups, by Welch's test)
        baseline8 = arm({**base, "width": 512}, 0.0, eight)
        effect8 = arm({**base, "width": 512, "model": {"norm": "rms"}}, -0.077, eight, seeds=100)
        baseline3 = arm(base, 0.0, OFFSETS)
        null3 = arm({**base, "model": {"norm": "scale"}}, -0.001, OFFSETS)
        noop3 = arm({**base, "unused_flag": True}, 0.0, OFFSETS)
    return {"effect": (baseline8, effect8), "null": (baseline3, null3), "noop": (baseline3, noop3)}


def open_groups(page, arms: tuple[str, str]) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/compare?runs={arms[0]},{arms[1]}&metric=eval_loss&a=group&b=group")
    page.locator("#cmp-verdict-sentence").wait_for()


def interval_rows(page) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    """The forest plot's rows as drawn in the browser: each measure's difference, interval and colour."""
    return wait_until(
        lambda: page.evaluate("""() => {
            const el = document.querySelector('#cmp-verdict-intervals .js-plotly-plot');
            if (!el || !el.data) return null;
            const rows = {};
            for (const t of el.data) {
                if (!t.error_x) continue;
                rows[t.y[0]] = {x: t.x[0], low: t.x[0] - t.error_x.arrayminus[0], high: t.x[0] + t.error_x.array[0]};
            }
            return Object.keys(rows).length ? rows : null;
        }""")
    )


def test_a_planted_effect_over_eight_seeds_is_a_real_effect_shown_with_its_interval(page, ablations) -> None:  # type: ignore[no-untyped-def]
    open_groups(page, ablations["effect"])
    assert page.locator("#cmp-verdict-badge").inner_text().lower() == "real effect"
    numbers = page.locator("#cmp-verdict-numbers").inner_text()
    match = re.search(r"95% confidence interval\s+(-\d\.\d+) to (-\d\.\d+)", numbers)
    assert match and float(match[1]) < -0.077 < float(match[2]) < 0, numbers
    # each term says what it means beside it
    assert "when it leaves out 0, the difference is real" in numbers and "seed SDs" in numbers
    assert "Welch's t-test" in numbers and "each with its own spread" in numbers
    rows = interval_rows(page)
    primary = next(label for label in rows if label.endswith("(primary)"))
    assert rows[primary]["high"] < 0 and abs(rows[primary]["x"] + 0.077) < 0.01  # the interval clear of zero
    assert "noise" not in page.locator("body").inner_text().lower()


def test_a_difference_too_small_for_three_seeds_says_what_more_seeds_would_detect(page, ablations) -> None:  # type: ignore[no-untyped-def]
    open_groups(page, ablations["null"])
    assert page.locator("#cmp-verdict-badge").inner_text().lower() == "no detectable difference"
    power = page.locator("#cmp-power-sentence").inner_text()
    assert "no detectable difference at 3 paired seeds" in power and "80% of the time" in power
    assert re.search(r"(about \d+|more than 100) seeds per arm would", power), power
    rows = interval_rows(page)
    primary = next(label for label in rows if label.endswith("(primary)"))
    assert rows[primary]["low"] < 0 < rows[primary]["high"]
    assert "the smallest difference a test at these seeds finds 80% of the time" in (
        page.locator("#cmp-verdict-numbers").inner_text()
    )
    assert "noise" not in page.locator("body").inner_text().lower()


def test_arms_that_logged_bit_identical_values_say_the_change_did_nothing(page, ablations) -> None:  # type: ignore[no-untyped-def]
    open_groups(page, ablations["noop"])
    alert = page.locator("#cmp-identical")
    alert.wait_for()
    assert "the change did nothing" in alert.inner_text().lower()
    assert "unused_flag" in page.locator("#cmp-config-diff").inner_text()


def test_one_run_per_arm_borrows_a_seed_group_s_spread_and_says_so(page, ablations) -> None:  # type: ignore[no-untyped-def]
    baseline, other = ablations["null"]
    page.goto(f"/compare?runs={baseline},{other}&metric=eval_loss")
    page.locator("#cmp-verdict-sentence").wait_for()
    assert "seed group" in page.locator("#cmp-stand-in").inner_text()


def test_a_verdict_of_finished_runs_stays_on_screen_between_ticks(page, ablations) -> None:  # type: ignore[no-untyped-def]
    # the page's 5-second tick draws again only while a run (or, for a seed group, a run of the
    # project) still logs: a finished comparison is not recomputed and hidden under the loading veil
    open_groups(page, ablations["effect"])
    sentence = page.locator("#cmp-verdict-sentence")
    wait_until(sentence.is_visible)
    deadline = time.monotonic() + 11  # two ticks
    while time.monotonic() < deadline:
        assert sentence.is_visible()
        time.sleep(0.2)
