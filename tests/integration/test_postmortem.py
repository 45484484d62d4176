"""Post-mortem of a finished run: timeline, written summary, notes, and an offline HTML report."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

import holter
from holter_server.demo.synthetic import SyntheticRun
from tests.integration.test_live_detection import settled_events
from tests.servers import ServerProcess


@pytest.fixture
def reviewed_run(server: ServerProcess, api: httpx.Client, spool_dir: Path) -> holter.Run:
    run = holter.init(project="postmortem", name="planted", config={"lr": 3e-4}, url=server.url)
    synthetic = SyntheticRun(2000, seed=11)
    for step in range(2000):
        run.log(synthetic.metrics(step), step=step)
    run.finish()
    settled_events(server.url, run.id)
    api.post(f"/runs/{run.id}/annotations", json={"author": "ana", "text": "bad shard here", "metric": "loss", "start_step": 790, "end_step": 820})
    return run


def test_the_post_mortem_tells_what_happened_in_order(api: httpx.Client, reviewed_run: holter.Run) -> None:
    review = api.get(f"/runs/{reviewed_run.id}/postmortem").json()
    steps = [e["start_step"] for e in review["timeline"]]
    assert steps == sorted(steps) and len(steps) >= 5
    assert review["summary"].startswith("planted ran to step 1,999 and finished: ")
    for phrase in ("logprob mismatch left ≈0", "every 64 steps", "tokens_per_s fell", "with the loss unchanged"):
        assert phrase in review["summary"], phrase
    assert review["annotations"][0]["text"] == "bad shard here"
    assert review["run"]["config"] == {"lr": 3e-4}


def test_the_html_report_is_self_contained(api: httpx.Client, reviewed_run: holter.Run) -> None:
    pytest.importorskip("plotly")
    answer = api.get(f"/runs/{reviewed_run.id}/report.html")
    assert answer.status_code == 200 and "attachment" in answer.headers["content-disposition"]
    page = answer.text
    assert "Plotly.newPlot" in page and page.count("<script") >= 2
    assert not re.search(r"<script[^>]+src=", page), "the report must not load scripts from anywhere"
    for text in ("planted", "bad shard here", "mismatch_off_zero", "tokens_per_s", "Timeline"):
        assert text in page, text


def test_holter_report_writes_the_file(server: ServerProcess, reviewed_run: holter.Run, tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    import subprocess
    import sys

    out = tmp_path / "report.html"
    result = subprocess.run([sys.executable, "-m", "holter.cli", "report", reviewed_run.id, "--url", server.url, "-o", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert out.read_text().startswith("<!doctype html>")


def test_report_of_an_unknown_run_is_404(api: httpx.Client) -> None:
    assert api.get("/runs/nope/report.html").status_code == 404
    assert api.get("/runs/nope/postmortem").status_code == 404
