"""Runs page benchmark: what one open tab of the runs page costs the service when every run has a
big config (issue 47: 200 runs of 10,000 keys each once cost 41.9 CPU-s and 2.0 GB in 45 s).

    .venv/bin/python bench/dashboard/runs_page.py [--runs 200] [--keys 10000] [--seconds 45]
                                                   [--db URL] [--tree DIR]

Starts `holter serve` (dashboard included, live detection off) on a fresh SQLite file (or
`--db`), creates `--runs` runs whose configs hold `--keys` dotted keys each (`block17.width`),
then opens the runs page in headless Chromium (/usr/bin/chromium) with two config columns chosen
and, once its table is drawn, leaves the tab open for `--seconds` while the page refreshes
itself every 3 s. Prints the service's CPU-seconds over that window and per table refresh, its
peak and last RSS (sampled every 0.2 s), and the biggest callback response the browser got.
`--tree DIR` runs the same on another source tree (the code before a change) in the same run,
for a before/after.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import Error as PlaywrightError

from tests.servers import ServerProcess

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
PACKAGES = ("server", "client", "dashboard", "charts", "readers")


def process_cpu(pid: int) -> float:
    """CPU-seconds the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def process_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tree_env(tree: Path | None) -> dict[str, str]:
    """The environment that makes `holter serve` import `tree`'s packages instead of ours."""
    if tree is None:
        return {}
    return {"PYTHONPATH": os.pathsep.join([*(str(tree / p) for p in PACKAGES), str(tree)])}


def one_tab(args: argparse.Namespace, tree: Path | None, browser) -> dict[str, float]:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory(prefix="holter-bench-runs-page-") as tmp:
        url = args.db or f"sqlite:///{Path(tmp) / 'holter.db'}"
        server = ServerProcess(
            url,
            log_path=Path(tmp) / "server.log",
            env={"HOLTER_SPOOL_DIR": str(Path(tmp) / "spool"), "HOLTER_DETECTION_ENABLED": "false", **tree_env(tree)},
        ).start()
        try:
            project = "bigcfg"
            with server.api(timeout=120) as api:
                for run in range(args.runs):
                    config = {f"block{i}": {"width": i, "seed": run} for i in range(args.keys // 2)}
                    body = {"project": project, "name": f"big{run}", "config": config}
                    api.post("/runs", json=body).raise_for_status()
            assert server.process is not None
            pid = server.process.pid
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            sizes: list[int] = []
            tables: list[int] = []

            def answered(response) -> None:  # type: ignore[no-untyped-def]
                if "_dash-update-component" not in response.url:
                    return
                try:
                    body = response.body()
                except PlaywrightError:  # the page closed under a late answer
                    return
                sizes.append(len(body))
                if b'"runs-table"' in body:
                    tables.append(len(body))

            page.on("response", answered)
            peak = [process_rss_mb(pid)]
            done = threading.Event()

            def sample() -> None:
                while not done.wait(0.2):
                    peak.append(process_rss_mb(pid))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            page.goto(f"{server.url}/?project={project}&ccols=block17.width,block4321.seed", wait_until="commit")
            # the first table (the page's first refresh), then the tab left open: one refresh every 3 s
            first_deadline = time.monotonic() + 300
            while not tables and time.monotonic() < first_deadline:
                page.wait_for_timeout(100)
            before, counted = process_cpu(pid), len(tables)
            page.wait_for_timeout(args.seconds * 1000)
            cpu, refreshes = process_cpu(pid) - before, len(tables) - counted
            done.set()
            sampler.join()
            rows = page.locator(".run-row").count()
            page.close()
            return {
                "cpu_per_refresh": cpu / refreshes if refreshes else float("nan"),
                "cpu": cpu,
                "refreshes": float(refreshes),
                "peak_rss_mb": max(peak),
                "last_rss_mb": peak[-1],
                "largest_response_kb": max(sizes, default=0) / 1024,
                "largest_table_kb": max(tables, default=0) / 1024,
                "rows": float(rows),
            }
        finally:
            server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--keys", type=int, default=10_000, help="config keys per run")
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--db", default=None, help="a database URL (default: a fresh SQLite file)")
    parser.add_argument("--tree", type=Path, default=None, help="also run another source tree, for a before/after")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.tree is not None:
        trees.append((str(args.tree), args.tree.resolve()))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        for label, tree in trees:
            print(f"{label}: {args.runs} runs × {args.keys:,} config keys, runs page open {args.seconds:.0f} s ...")
            r = one_tab(args, tree, browser)
            print(
                f"  service CPU {r['cpu']:.1f} s over {r['refreshes']:.0f} table refreshes: "
                f"{r['cpu_per_refresh']:.2f} CPU-s per refresh; RSS peak {r['peak_rss_mb']:.0f} MB, "
                f"last {r['last_rss_mb']:.0f} MB; largest callback response {r['largest_response_kb']:.0f} KB "
                f"(table {r['largest_table_kb']:.0f} KB); {r['rows']:.0f} rows drawn"
            )
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
