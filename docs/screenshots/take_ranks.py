"""Take the screenshot of a distributed job's Ranks section: `.venv/bin/python docs/screenshots/take_ranks.py`.

Starts `holter serve` on a fresh SQLite file, makes a job of four ranks on two hosts through the
API as its ranks would (each joins the run, logs its `holter/dist/` timings and its loss, beats;
`tests/ui/test_ranks_section.make_job`): rank 2 computes four times longer than its peers before
the collectives, and the job has stood still for minutes, ranks 0-2 inside the gradients'
all-reduce while rank 3's main thread waits on its data queue. Once the ranks watch has named the
straggler and the hung rank, it saves, next to this file, with headless Chromium (/usr/bin/chromium):

* `run-ranks.png` — the run page's Ranks section opened on rank 3 (`?rank=3`, as its event's link
  opens it): every rank's own work as a rank × step heatmap, rank 2 a bright stripe outlined as
  the straggler; the ranks under their hosts with their medians and collectives, the straggler's
  and the hung rank's rows marked; and where the stopped rank stands, its innermost frame first to the eye.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.servers import ServerProcess  # noqa: E402
from tests.ui.test_ranks_section import make_job  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def main() -> int:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="holter-screenshots-") as tmp:
        server = ServerProcess(
            f"sqlite:///{Path(tmp) / 'holter.db'}",
            log_path=Path(tmp) / "server.log",
            env={"HOLTER_SPOOL_DIR": str(Path(tmp) / "spool")},
        ).start()
        try:
            with server.api() as api:
                run_id = make_job(api, project="screenshots")
                deadline = time.monotonic() + 60
                while len(api.get(f"/runs/{run_id}/events").json()["data"]) < 2:
                    assert time.monotonic() < deadline, "the ranks watch named nothing"
                    time.sleep(0.5)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                # tall enough that the section needs no scroll (the page's header stays out of the picture)
                page = browser.new_page(viewport={"width": 1440, "height": 2200}, device_scale_factor=1)
                page.goto(f"{server.url}/runs/{run_id}?rank=3")
                page.locator("#run-ranks .rank-stack").first.wait_for(timeout=60_000)
                time.sleep(1.5)
                page.locator("#run-ranks-section").screenshot(path=str(HERE / "run-ranks.png"))
                print(f"saved {HERE / 'run-ranks.png'}")
                browser.close()
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
