"""Dashboard benchmark: how long until a big run's charts are drawn, and how long a logged
point takes to reach the screen.

    .venv/bin/python bench/dashboard/run.py [--points 1000000] [--metrics 12] [--db URL] [--repeat 5]

Starts `holter serve` (dashboard included) on a fresh SQLite file (or `--db`, e.g. Postgres),
writes a run of `--metrics` metrics × `--points` steps through the HTTP API, then drives headless
Chromium (/usr/bin/chromium) with Playwright:

* load: from navigation start to the first chart, and to every chart of the run page holding its
  data, `--repeat` times as a first visit (a fresh browser profile, nothing cached) and `--repeat`
  times as a returning visit (the same profile: scripts come from the browser's cache); with the
  page's weight (bytes over the wire and decoded, by kind: scripts, styles, data) and the
  service's CPU-seconds per load;
* lag: a second, live run open in the page; `run.log()` through the real client, then the time
  until the browser's chart holds that step; 10 times.

Prints medians (and min/max). `--skip-lag` leaves the lag out.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgpack

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import holter

from tests.servers import ServerProcess

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
METRICS = [
    "loss",
    "eval_loss",
    "grad_norm",
    "logprob_mismatch",
    "tokens_per_s",
    "lr",
    *(f"act_norm/layer.{i}" for i in range(6)),
]
# A chart is drawn once Plotly holds its data (10 points or more); `expected` charts, or the first.
CHARTS_DRAWN = """(expected) => {
    const plots = Array.from(document.querySelectorAll('.chart-card .js-plotly-plot')).filter(el =>
        el._fullData && el.data && el.data.length && el.data[0].x && el.data[0].x.length >= 10);
    return plots.length >= expected ? performance.now() : false;
}"""
# What the page downloaded: bytes over the wire (transferSize; 0 for what came from the cache)
# and decoded, per kind of resource, the document itself included.
PAGE_WEIGHT = r"""() => {
    const out = {};
    const add = (kind, wire, decoded) => {
        const k = out[kind] || (out[kind] = {wire: 0, decoded: 0, count: 0});
        k.wire += wire; k.decoded += decoded; k.count += 1;
    };
    for (const e of performance.getEntriesByType('navigation')) add('document', e.transferSize, e.decodedBodySize);
    for (const e of performance.getEntriesByType('resource')) {
        const kind = /\.js(\?|$)/.test(e.name) ? 'script' : /\.css(\?|$)/.test(e.name) ? 'style'
            : /_dash-update-component|_dash-layout|_dash-dependencies|\/api\//.test(e.name) ? 'data' : 'other';
        add(kind, e.transferSize, e.decodedBodySize);
    }
    return out;
}"""


def write_run(api: httpx.Client, metrics: list[str], points: int, chunk: int = 50_000) -> str:
    """A run with `points` steps of every metric, sent as msgpack batches, with a spike planted in each."""
    import numpy as np

    run_id = f"bench{uuid.uuid4().hex[:8]}"
    api.post(
        "/runs", json={"id": run_id, "project": "bench", "name": f"{len(metrics)} x {points:,}"}
    ).raise_for_status()
    rng = np.random.default_rng(0)
    started = time.monotonic()
    for lo in range(0, points, chunk):
        steps = np.arange(lo, min(lo + chunk, points))
        batch = {"metrics": {}, "step_times": {"steps": steps.tolist(), "times": (1.7e9 + steps * 0.1).tolist()}}
        for i, name in enumerate(metrics):
            values = 2.0 + np.exp(-steps / (points / 10)) + rng.normal(0, 0.02, len(steps)) + 0.1 * i
            values[(steps % 250_000) == 123_456] += 5.0
            batch["metrics"][name] = {"steps": steps.tolist(), "values": values.tolist()}
        body = msgpack.packb(batch)
        api.post(
            f"/runs/{run_id}/points", content=body, headers={"content-type": "application/msgpack"}, timeout=600
        ).raise_for_status()
        done = min(lo + chunk, points)
        if done % 200_000 == 0 or done == points:
            rate = done * len(metrics) / (time.monotonic() - started)
            print(f"  wrote {done:,} steps × {len(metrics)} metrics ({rate:,.0f} points/s)", flush=True)
    api.post(f"/runs/{run_id}/finish", json={"status": "finished"}).raise_for_status()
    return run_id


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1_000_000, help="steps per metric")
    parser.add_argument("--metrics", type=int, default=12, choices=range(1, len(METRICS) + 1), metavar="N")
    parser.add_argument("--db", help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lag-samples", type=int, default=10)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--skip-lag", action="store_true", help="measure the page load only")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="holter-bench-dashboard-") as tmp, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        store = "SQLite" if not args.db else "Postgres"
        # lag: a service as people run it (live detection on), one live run
        lag_server = ServerProcess(
            f"sqlite:///{Path(tmp) / 'live.db'}",
            log_path=Path(tmp) / "live.log",
            env={"HOLTER_SPOOL_DIR": str(Path(tmp) / "spool")},
        ).start()
        if not args.skip_lag:
            try:
                lags = live_lag(browser, lag_server, args.lag_samples)
            finally:
                lag_server.stop()
            print(
                f"log() → point on screen: median {statistics.median(lags):.2f} s (min {min(lags):.2f}, "
                f"max {max(lags):.2f}, n={len(lags)}; goal ≤ 2 s; client flush interval 1 s, page refresh 1 s)",
                flush=True,
            )
        else:
            lag_server.stop()
        # load: the big run written in bulk; live detection is off so that it does not spend the
        # next minutes catching up on 12M points while the page loads (a real run's detection
        # keeps pace as it goes)
        url = args.db or f"sqlite:///{Path(tmp) / 'holter.db'}"
        server = ServerProcess(
            url,
            log_path=Path(tmp) / "server.log",
            env={"HOLTER_SPOOL_DIR": str(Path(tmp) / "spool"), "HOLTER_DETECTION_ENABLED": "false"},
        ).start()
        try:
            with server.api(timeout=120) as api:
                print(f"writing {args.metrics} metrics × {args.points:,} points ({store}) ...", flush=True)
                big = write_run(api, METRICS[: args.metrics], args.points)
            expected = _expected_charts(METRICS[: args.metrics])
            page_url = f"{server.url}/runs/{big}"
            load_page(browser, page_url, expected, server)  # warms the service (first reads, Python imports)
            # first visit: a fresh browser profile each time, nothing cached
            cold = [load_page(browser, page_url, expected, server) for _ in range(args.repeat)]
            # returning visit: the same profile, so the browser's cache holds the scripts
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            load_page(context, page_url, expected, server)
            warm = [load_page(context, page_url, expected, server) for _ in range(args.repeat)]
            context.close()
        finally:
            server.stop()
        browser.close()
    print(f"run page, {args.metrics} metrics × {args.points:,} points ({store}), {expected} charts:")
    report("first visit, empty browser cache", cold)
    report("returning visit, browser cache warm", warm)
    return 0


@dataclass
class Load:
    """One load of the run page: seconds to its first chart and to every chart, what it weighed,
    and the service's CPU-seconds meanwhile."""

    first: float
    all: float
    weight: dict[str, dict[str, float]]
    server_cpu: float


def load_page(opener, url: str, expected: int, server: ServerProcess) -> Load:  # type: ignore[no-untyped-def]
    """Load the run page in a new tab of `opener` (a browser: a fresh profile per tab; a context:
    one shared profile) and time it from navigation start."""
    page = (
        opener.new_page(viewport={"width": 1440, "height": 900}) if hasattr(opener, "contexts") else opener.new_page()
    )
    try:
        cpu = process_cpu(server)
        page.goto(url, wait_until="commit")
        first = page.wait_for_function(CHARTS_DRAWN, arg=1, polling="raf", timeout=60_000).json_value() / 1000
        every = page.wait_for_function(CHARTS_DRAWN, arg=expected, polling="raf", timeout=60_000).json_value() / 1000
        cpu = process_cpu(server) - cpu
        page.wait_for_timeout(300)  # late resources are counted in the weight, not the time
        return Load(first, every, page.evaluate(PAGE_WEIGHT), cpu)
    finally:
        page.close()


def process_cpu(server: ServerProcess) -> float:
    """CPU-seconds the service's process (and its waited-for children) used so far."""
    assert server.process is not None
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def summary(label: str, values: list[float], unit: str = "s") -> str:
    return f"{label} median {statistics.median(values):.2f} {unit} (min {min(values):.2f}, max {max(values):.2f})"


def report(label: str, loads: list[Load]) -> None:
    print(f"  {label} (n={len(loads)}):")
    print("    " + summary("first chart", [x.first for x in loads]))
    print("    " + summary("every chart", [x.all for x in loads]) + "; goal < 1.5 s")
    print("    " + summary("service CPU", [x.server_cpu for x in loads], "CPU-s"))
    weight = loads[0].weight
    parts = ", ".join(
        f"{kind} {w['wire'] / 1e6:.2f} MB ({w['decoded'] / 1e6:.2f} MB decoded, {int(w['count'])} files)"
        for kind, w in sorted(weight.items())
    )
    total = sum(w["wire"] for w in weight.values()) / 1e6
    print(f"    page weight over the wire {total:.2f} MB: {parts}")


def _expected_charts(metrics: list[str]) -> int:
    import json

    from holter_charts.panels import plan_panels
    from holter_charts.vocabulary import Vocabulary
    from holter_server import vocabulary
    from holter_server.vocabulary.signals import panel_of

    understood = vocabulary.understand_all(metrics)
    listed = [{"name": n, "kind": u.kind, "panel": panel_of(u.kind)} for n, u in understood.items()]
    return len(plan_panels(listed, Vocabulary.from_api(json.loads(json.dumps(vocabulary.as_dict())))))


def live_lag(browser, server: ServerProcess, samples: int) -> list[float]:  # type: ignore[no-untyped-def]
    """Seconds from `run.log()` to the step being in the browser's chart, per sample."""
    run = holter.init(project="bench", name="live", url=server.url)
    for step in range(20):
        run.log({"loss": 3.0 - 0.01 * step}, step=step)
    run.flush()
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(f"{server.url}/runs/{run.id}")
    has_step = """(step) => { const el = document.querySelector('.chart-card .js-plotly-plot');
                              return !!(el && el.data && el.data[0].x.includes(step)); }"""
    page.wait_for_function(has_step, arg=19, timeout=30_000)
    lags = []
    for i in range(samples):
        step = 20 + i
        time.sleep(0.37 * (i % 3))  # land at different phases of the flush and refresh timers
        logged = time.monotonic()
        run.log({"loss": 2.0 + math.sin(step)}, step=step)
        page.wait_for_function(has_step, arg=step, polling="raf", timeout=30_000)
        lags.append(time.monotonic() - logged)
    run.finish()
    page.close()
    return lags


if __name__ == "__main__":
    raise SystemExit(main())
