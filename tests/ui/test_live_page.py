"""The run page while a run streams, on a busy machine: every chart's points stay in order and
appear once, the charts keep up with the header, no chart gains or loses a trace, and the
events panel is never a placeholder.

A CPU hog (one busy process per core) runs through the whole module, so the browser's
refreshes and the service's answers are as slow and as badly timed as on a shared machine.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import holter
import pytest

from tests.servers import ServerProcess
from tests.waiting import wait_until

# serial: the module loads the machine on purpose, which must not slow the tests beside it
pytestmark = [pytest.mark.slow, pytest.mark.serial]

STEPS_PER_S = 40
SPIKE_AT = 600  # a loss spike, so that the finished run has events to show


@pytest.fixture(scope="module")
def ui_server(ui_process: ServerProcess) -> ServerProcess:
    """`holter serve` in a process of its own: the service's CPU must compete with the hogs and
    the browser as a deployed one does, not share the test's process and its GIL."""
    return ui_process


@pytest.fixture(scope="module")
def busy_machine() -> Iterator[None]:
    """One process spinning per core, for as long as the module's tests run."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdout=subprocess.DEVNULL)
        for _ in range(os.cpu_count() or 2)
    ]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait(10)


class Streamer(threading.Thread):
    """A training job logging loss, gradient norm and (every 25 steps) eval loss at a steady pace,
    until it is told to stop (or after `most` steps); `steps` is how many it logged."""

    def __init__(self, url: str, most: int) -> None:
        super().__init__(daemon=True)
        self.job = holter.init(
            project="ui-live", name="streaming", id=f"live{uuid.uuid4().hex[:10]}", url=url, system_vitals=False
        )
        self.most = most
        self.steps = 0
        self.stopping = threading.Event()

    def run(self) -> None:  # type: ignore[override]
        started = time.monotonic()
        for step in range(self.most):
            if self.stopping.is_set():
                break
            loss = 2.0 + math.exp(-step / 300) + 0.02 * math.sin(step) + (4.0 if SPIKE_AT <= step < SPIKE_AT + 3 else 0)
            self.job.log({"loss": loss, "grad_norm": 1.0 + 0.1 * math.cos(step)}, step=step)
            if step % 25 == 0:
                self.job.log({"eval_loss": loss + 0.1}, step=step)
            self.steps = step + 1
            pause = started + (step + 1) / STEPS_PER_S - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        self.job.finish()


SAMPLE = """() => {
    const head = document.querySelector('#run-last-step');
    const charts = [];
    for (const el of document.querySelectorAll('.chart-card .js-plotly-plot')) {
        const traces = (el.data || []).filter(t => t.mode === 'lines').map(t => {
            const x = Array.from(t.x || []);
            let disorder = 0;
            for (let i = 1; i < x.length; i++) if (!(x[i] > x[i - 1])) disorder++;
            return {name: t.name, n: x.length, last: x.length ? x[x.length - 1] : null, disorder};
        });
        charts.push({title: (el.layout && el.layout.title && el.layout.title.text) || '', traces});
    }
    return {t: performance.now() / 1000, head: head ? parseInt(head.textContent.replace(/,/g, '')) : null, charts};
}"""


def test_a_streaming_run_stays_right_on_a_busy_machine(busy_machine: None, page, ui_server: ServerProcess) -> None:  # type: ignore[no-untyped-def]
    # it streams until the samples are taken, however long the page takes to open on this machine
    streamer = Streamer(ui_server.url, most=STEPS_PER_S * 300)
    streamer.start()
    wait_until(lambda: streamer.job.id and streamer.is_alive(), timeout=10)
    time.sleep(3)  # some points stored before the page opens, more arrive while it is open
    page.goto(f"/runs/{streamer.job.id}")
    page.locator("#run-title").wait_for(timeout=60_000)
    # the events panel is drawn with the page: its list or an explicit "no events yet", never a placeholder
    events = page.locator("#run-events .no-events, #run-events .event-item").first
    events.wait_for(timeout=1_000)
    assert page.locator("#run-events .mantine-Skeleton-root").count() == 0
    page.locator(".chart-card .js-plotly-plot").first.wait_for(timeout=30_000)

    samples = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        samples.append(page.evaluate(SAMPLE))
        time.sleep(0.4)
    assert streamer.is_alive()  # every sample was taken while the run streamed
    assert len(samples) >= 20, f"only {len(samples)} samples"

    # every trace's x increases with no duplicates, at every refresh
    for sample in samples:
        for chart in sample["charts"]:
            for trace in chart["traces"]:
                assert trace["disorder"] == 0, (
                    f"{chart['title']}: {trace['name']} goes back or repeats at t={sample['t']}"
                )
    # no chart appears, vanishes or changes its traces while the run streams
    layout = [(c["title"], [t["name"] for t in c["traces"]]) for c in samples[0]["charts"]]
    for sample in samples[1:]:
        assert [(c["title"], [t["name"] for t in c["traces"]]) for c in sample["charts"]] == layout
    # the charts keep up with the header: the loss drawn reaches where the header was 2.5 s before
    heard = [(s["t"], s["head"]) for s in samples if s["head"] is not None]
    behind = []
    for sample in samples:
        loss_last = max(t["last"] for c in sample["charts"] for t in c["traces"] if t["name"] == "loss")
        earlier = [head for t, head in heard if t <= sample["t"] - 2.5]
        if earlier:
            behind.append(earlier[-1] - loss_last)
    assert behind and max(behind) <= 0, f"the loss chart trailed the header by up to {max(behind)} steps"
    # the last point logged is drawn once the run ends, the line still in order
    streamer.stopping.set()
    streamer.join(timeout=60)
    final = wait_until(
        lambda: (
            (s := page.evaluate(SAMPLE))
            and any(t["name"] == "loss" and t["last"] == streamer.steps - 1 for c in s["charts"] for t in c["traces"])
            and s
        ),
        timeout=20,
    )
    assert all(t["disorder"] == 0 for c in final["charts"] for t in c["traces"])


def test_a_finished_run_shows_its_events(busy_machine: None, page, ui_server: ServerProcess) -> None:  # type: ignore[no-untyped-def]
    run = holter.init(project="ui-live", name="finished", id=f"done{uuid.uuid4().hex[:10]}", url=ui_server.url)
    for step in range(900):
        run.log({"loss": 2.0 + math.exp(-step / 300) + (4.0 if SPIKE_AT <= step < SPIKE_AT + 3 else 0)}, step=step)
    run.finish()
    with ui_server.api() as api:
        wait_until(lambda: api.get(f"/runs/{run.id}/events").json()["data"], timeout=60)
    page.goto(f"/runs/{run.id}")
    page.locator("#run-title").wait_for(timeout=60_000)
    page.locator("#run-events .event-item").first.wait_for(timeout=1_000)
    assert page.locator("#run-events .no-events").count() == 0
