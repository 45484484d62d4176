"""A wandb script run with only its import changed: everything it logged is on its run page
(issue 17) — curves (the histogram as a band), config, tags, notes, summary and the alert."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_wandb_drop_in import run_id_of, run_script, script_importing
from tests.servers import InProcessServer
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


def trace_names(page) -> set[str]:  # type: ignore[no-untyped-def]
    """The names of every trace the run page's charts hold."""
    return set(
        page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')]
                                       .flatMap(el => (el.data || []).map(t => t.name || ''))""")
    )


def test_everything_a_wandb_script_logs_is_on_its_run_page(page, ui_server: InProcessServer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    done = run_script(
        script_importing("import holter as wandb", tmp_path),
        {"HOLTER_URL": ui_server.url, "HOLTER_SPOOL_DIR": str(tmp_path / "spool")},
    )
    page.goto(f"/runs/{run_id_of(done)}")

    page.locator(".chart-card .js-plotly-plot").first.wait_for()
    names = wait_until(lambda: (n := trace_names(page)) >= {"train/loss", "train/grad_norm", "val/acc", "epoch"} and n)
    assert any(name.startswith("weights") for name in names)  # the histogram's quantiles, drawn as one band
    summary = page.locator(".run-summary").inner_text()
    assert "best_val_acc" in summary and "final_acc" in summary
    info = page.locator("#run-info").inner_text()
    assert '"lr": 0.5' in info and '"momentum": 0.0' in info and "numpy" in info
    assert page.locator("#run-notes-text").input_value() == "drop-in check"
    page.locator(".event-item", has_text="accuracy below target").wait_for()
