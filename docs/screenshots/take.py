"""Take the README's screenshots from real data: `.venv/bin/python docs/screenshots/take.py`.

Starts `holter serve` on a fresh SQLite file, adds two chat channels (one to a local receiver,
one to an address that is down), logs two synthetic runs through the real client (one with the
demo's planted problems, one healthy reference) and four short RL runs whose logprob-mismatch
period follows `rollouts_num`, waits for the live detector to name the problems, adds a note and
a reference run through the API, and saves PNGs of the runs, run, compare, post-mortem, levers
and alerts pages next to this file with headless Chromium (/usr/bin/chromium).
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

import holter  # noqa: E402
from holter.demo.synthetic import SyntheticRun  # noqa: E402

from tests.receivers import Receiver  # noqa: E402
from tests.servers import ServerProcess  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
STEPS = 3000


def log_run(url: str, name: str, seed: int, planted: bool) -> str:
    synthetic = SyntheticRun(STEPS, seed=seed)
    if not planted:  # a healthy sibling: no spike, no mismatch, no slowdown
        synthetic.spike_at = synthetic.mismatch_from = synthetic.slowdown_at = 10 * STEPS
    run = holter.init(
        project="gpt2",
        name=name,
        url=url,
        tags=["demo"] + ([] if planted else ["reference"]),
        config={"model": "gpt2-124m", "lr": 3e-4, "batch_size": 64, "rollouts_num": 64, "seed": seed},
    )
    for step in range(STEPS):
        run.log(synthetic.metrics(step), step=step)
        if step % 100 == 0:
            run.log({"eval_loss": synthetic.eval_loss(step)}, step=step)
    run.finish()
    return run.id


def log_rollout_runs(url: str) -> None:
    """Four RL runs whose logprob mismatch spikes every `rollouts_num * 2` steps: a lever to find."""
    rng = random.Random(0)
    for seed, rollouts in zip((3, 1, 4, 2), (8, 16, 32, 64)):  # seeds that do not follow rollouts_num: no confound
        run = holter.init(
            project="grpo-math",
            name=f"grpo-rollouts{rollouts}",
            url=url,
            config={"rollouts_num": rollouts, "seed": seed, "lr": 1e-6, "gpu_memory_utilization": 0.6},
        )
        for step in range(900):
            spike = 0.1 if step % (rollouts * 2) == 0 and step >= 100 else 0.0
            run.log({"logprob_mismatch": 0.002 + abs(rng.gauss(0, 0.0005)) + spike}, step=step)
        run.finish()


def wait(condition, timeout: float = 90) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(1)


def main() -> int:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="holter-screenshots-") as tmp:
        server = ServerProcess(
            f"sqlite:///{Path(tmp) / 'holter.db'}",
            log_path=Path(tmp) / "server.log",
            env={"HOLTER_SPOOL_DIR": str(Path(tmp) / "spool"), "HOLTER_ALERT_GIVE_UP_AFTER": "5"},
        ).start()
        receiver = Receiver().start()
        try:
            api = httpx.Client(base_url=f"{server.url}/api/v1", timeout=30)
            slack = api.post(
                "/channels",
                json={
                    "name": "#training-alerts",
                    "kind": "slack",
                    "project": "gpt2",
                    "target": receiver.url.replace("/hook", "/services/T0001/B0002/x9Kq"),
                },
            ).json()
            api.post(f"/channels/{slack['id']}/test")
            api.post(
                "/rules",
                json={
                    "channel_id": slack["id"],
                    "name": "loss spikes",
                    "metric_pattern": "loss*",
                    "kinds": ["spike"],
                    "min_severity": "info",
                    "cooldown_s": 600,
                },
            )
            api.post(
                "/channels",
                json={
                    "name": "on-call webhook",
                    "kind": "webhook",
                    "project": "gpt2",
                    "target": f"http://127.0.0.1:{Receiver().port}/holter",
                    "signing_secret": "s" * 32,
                },
            )
            reference = log_run(server.url, "baseline-seed1", 1, planted=False)
            api.put("/projects/gpt2/reference", json={"run_id": reference, "by": "ada"})
            problem = log_run(server.url, "lr3e-4-seed2", 2, planted=True)
            log_rollout_runs(server.url)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                kinds = {e["kind"] for e in api.get(f"/runs/{problem}/events").json()["data"]}
                if {"spike", "mismatch_off_zero"} <= kinds:
                    break
                time.sleep(1)
            wait(
                lambda: any(
                    r["key"] == "rollouts_num"
                    for r in api.get("/levers", params={"project": "grpo-math"}).json()["candidates"]
                )
            )
            wait(lambda: any(d["status"] == "failed" for d in api.get("/deliveries").json()), timeout=30)
            spike = SyntheticRun(STEPS).spike_at
            api.post(
                f"/runs/{problem}/annotations",
                json={
                    "author": "ada",
                    "text": "bad batch: shard 17 had duplicated tokens",
                    "start_step": spike - 10,
                    "end_step": spike + 30,
                    "metric": "loss",
                },
            )
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900}, device_scale_factor=1)
                shots = [
                    ("runs.png", "/", ".run-row"),
                    ("run.png", f"/runs/{problem}", ".chart-card .js-plotly-plot .main-svg"),
                    (
                        "run-zoomed.png",
                        f"/runs/{problem}?start={spike - 150}&end={spike + 150}&metrics=loss,grad_norm,eval_loss",
                        ".chart-card .js-plotly-plot .main-svg",
                    ),
                    (
                        "compare.png",
                        f"/compare?runs={reference},{problem}&metric=loss&ref={reference}",
                        "#cmp-graph .main-svg",
                    ),
                    ("postmortem.png", f"/runs/{problem}/postmortem?metric=loss", "#pm-ref-graph .main-svg"),
                    ("levers.png", "/levers?project=grpo-math", ".lever-row"),
                    ("alerts.png", "/alerts", ".delivery-row"),
                ]
                for name, path, ready in shots:
                    page.goto(server.url + path)
                    page.locator(ready).first.wait_for(timeout=30_000)
                    time.sleep(2.5)  # let every chart finish drawing
                    page.screenshot(path=str(HERE / name), full_page=True)
                    print(f"saved {HERE / name}")
                browser.close()
        finally:
            receiver.stop()
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
