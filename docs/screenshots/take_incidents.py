"""Take the screenshot of a NaN run's page from real data: `.venv/bin/python docs/screenshots/take_incidents.py`.

Starts `holter serve` on a fresh SQLite file, trains a tiny CPU transformer-like model through
the real client with `holter.torch.watch(..., nan_tripwire=True)` and a NaN planted in
`layers.1.attn` from step 80 (a mask over whole rows: its softmax is NaN), and saves, next to
this file, with headless Chromium (/usr/bin/chromium):

* `run-nan-incident.png` — the run page: its events panel opens with one incident, "NaN from
  `layers.1.attn` at step 80", the cause in a sentence, the tripwire's card, and the loss,
  gradient-norm and activation-norm divergences that followed folded under it (opened here).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.integration.test_incidents import train_with_a_nan  # noqa: E402
from tests.servers import ServerProcess  # noqa: E402

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
            run_id = train_with_a_nan(server.url, project="screenshots")
            deadline = time.monotonic() + 60
            while httpx.get(f"{server.url}/api/v1/runs/{run_id}/incidents", timeout=30).json()["events"] < 8:
                assert time.monotonic() < deadline, "the run's events did not come"
                time.sleep(0.5)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 1100}, device_scale_factor=1)
                page.goto(f"{server.url}/runs/{run_id}")
                page.locator("#run-events .incident-more").first.wait_for(timeout=60_000)
                page.locator("#run-events .incident-more").first.click()
                time.sleep(2.5)
                page.screenshot(path=str(HERE / "run-nan-incident.png"), full_page=True)
                print(f"saved {HERE / 'run-nan-incident.png'}")
                browser.close()
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
