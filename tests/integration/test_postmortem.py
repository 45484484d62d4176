"""Post-mortem of a finished run: timeline, written summary, notes, and an offline HTML report."""

from __future__ import annotations

import html
import re
import uuid
from pathlib import Path

import holter
import httpx
import numpy as np
import pytest
from holter.demo.synthetic import SyntheticRun

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
    api.post(
        f"/runs/{run.id}/annotations",
        json={"author": "ana", "text": "bad shard here", "metric": "loss", "start_step": 790, "end_step": 820},
    )
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
    result = subprocess.run(
        [sys.executable, "-m", "holter.cli", "report", reviewed_run.id, "--url", server.url, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert out.read_text().startswith("<!doctype html>")


def test_report_of_an_unknown_run_is_404(api: httpx.Client) -> None:
    assert api.get("/runs/nope/report.html").status_code == 404
    assert api.get("/runs/nope/postmortem").status_code == 404


SEED_STEPS = np.arange(0, 3_001, 50)


def post_seed_run(api: httpx.Client, project: str, seed: int, shift: float, status: str = "finished") -> str:
    """A finished run of `project`'s one config with `seed`: loss and eval_loss falling to ~2,
    moved by `shift`, with a little point noise of its own."""
    run_id = f"s{uuid.uuid4().hex[:12]}"
    api.post(
        "/runs", json={"id": run_id, "project": project, "name": f"seed-{seed}", "config": {"lr": 3e-4, "seed": seed}}
    ).raise_for_status()
    rng = np.random.default_rng(seed)
    curve = 2 + 3 * np.exp(-SEED_STEPS / 800) + shift
    metrics = {
        name: {"steps": SEED_STEPS.tolist(), "values": (curve + lift + rng.normal(0, 0.0005, len(SEED_STEPS))).tolist()}
        for name, lift in (("loss", 0.0), ("eval_loss", 0.1))
    }
    api.post(f"/runs/{run_id}/points", json={"metrics": metrics}).raise_for_status()
    api.post(f"/runs/{run_id}/finish", json={"status": status}).raise_for_status()
    return run_id


def test_the_report_draws_the_seed_group_and_says_where_the_run_ends(api: httpx.Client) -> None:
    pytest.importorskip("plotly")
    project = f"seeds-{uuid.uuid4().hex[:6]}"
    siblings = [post_seed_run(api, project, seed, offset) for seed, offset in zip((1, 2, 3), (-0.006, 0.0, 0.006))]
    run_id = post_seed_run(api, project, 4, 0.05)  # far outside a seed spread of 0.012
    page = html.unescape(api.get(f"/runs/{run_id}/report.html").text)
    for metric in ("loss", "eval_loss"):
        assert f"{metric}: 3-seed group min–max" in page and f"{metric}: 3-seed group median" in page, metric
    section = page[page.index("<h2>Seed group</h2>") : page.index("<h2>Timeline</h2>")]
    assert all(s in section for s in siblings)
    told = re.search(
        r"eval_loss ends ([0-9.]+) above its 3-seed group's mean \(at step 3,000, its last: this run 2\.2", section
    )
    assert told and 0.045 < float(told.group(1)) < 0.055, section
    assert "the seeds' standard deviation there is 0.00" in section and ": a real difference (95% CI +0.0" in section
    summary = api.get(f"/runs/{run_id}/postmortem").json()["summary"]
    assert (
        "eval_loss ends 0.0" in summary and "above its 3-seed group's mean, a real difference (seed SD 0.00" in summary
    )


def test_a_run_without_seed_siblings_is_told_how_to_get_some(api: httpx.Client) -> None:
    pytest.importorskip("plotly")
    run_id = post_seed_run(api, f"lone-{uuid.uuid4().hex[:6]}", 1, 0.0)
    page = html.unescape(api.get(f"/runs/{run_id}/report.html").text)
    assert "This run has no seed siblings" in page and "run the same config again with another seed" in page
    assert "seed group median" not in page
    assert "seed group" not in api.get(f"/runs/{run_id}/postmortem").json()["summary"]


def test_crashed_seed_siblings_do_not_make_a_group(api: httpx.Client) -> None:
    pytest.importorskip("plotly")
    project = f"crashed-{uuid.uuid4().hex[:6]}"
    post_seed_run(api, project, 1, 0.0)
    post_seed_run(api, project, 2, 0.0, status="crashed")
    run_id = post_seed_run(api, project, 3, 0.0)
    page = html.unescape(api.get(f"/runs/{run_id}/report.html").text)
    assert "This run has 1 finished seed sibling (seed-1, seed-2 in its group): a seed spread needs at least 2" in page
    assert "seed group median" not in page
