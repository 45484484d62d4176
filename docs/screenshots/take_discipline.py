"""Take the screenshots of ablation verdicts and run details from real data:
`.venv/bin/python docs/screenshots/take_discipline.py`.

Starts `holter serve` on a fresh SQLite file and saves, next to this file, with headless
Chromium (/usr/bin/chromium):

* `compare-verdict.png` — two arms of 8 seeds each (other seeds in each), the second 0.077 lower
  (inside either arm's min–max range: issue 31's case), compared as seed groups: a real effect
  with its interval;
* `compare-null.png` — two arms of 3 seeds, 0.001 apart: not detected, and what these seeds
  could detect;
* `run-details.png` — a run of a small CPU model whose attention sees the future, trained here
  through the real client from this repository (its code version and environment are this
  checkout's), with `holter.torch.preflight` (its causal-mask check fails), a repeat (same config,
  seeds and code) and a twin (same data order, twice as wide); beside its loss, the throughput,
  MFU and data wait a GPU job's timed steps log when its loader stalls for 80 steps (`gpu_clock`).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.seed_runs import OFFSETS, post_run  # noqa: E402
from tests.servers import ServerProcess  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
STEPS = 300
VOCAB = 64


def eight_seed_offsets() -> list[float]:
    """Eight seeds with a seed SD of 0.0426, spread as a normal sample is."""
    from scipy import stats

    z = stats.norm.ppf((np.arange(8) + 0.5) / 8)
    return list(0.0426 * z / z.std(ddof=1))


def log_ablations(api) -> dict[str, tuple[str, str]]:  # type: ignore[no-untyped-def]
    base = {"model": {"norm": "layer"}, "lr": 3e-4, "data": {"path": "fineweb-10B", "data_seed": 0}}

    def arm(config: dict, shift: float, offsets, seeds: int = 0) -> str:  # type: ignore[no-untyped-def]
        runs = [post_run(api, "norm-ablation", {**config, "seed": seeds + i}, shift, o) for i, o in enumerate(offsets)]
        return runs[0]

    eight = eight_seed_offsets()
    return {  # the 8-seed arms ran other seeds: Welch's test; the 3-seed ones the same seeds: paired
        "compare-verdict.png": (
            arm(base, 0.0, eight),
            arm({**base, "model": {"norm": "rms"}}, -0.077, eight, seeds=100),
        ),
        "compare-null.png": (
            arm({**base, "width": 512}, 0.0, OFFSETS),
            arm({**base, "width": 512, "model": {"norm": "scale"}}, -0.001, OFFSETS),
        ),
    }


def train(url: str, name: str, width: int) -> str:
    """A small character model whose every position also sees the sequence's mean (the future)."""
    import holter.torch
    import torch
    from torch import nn

    torch.manual_seed(0)
    run = holter.init(
        project="charlm",
        name=name,
        url=url,
        config={
            "data": {"path": "tinyshakespeare", "data_seed": 0},
            "batch_size": 16,
            "model": {"width": width},
            "seed": 0,
        },
    )

    class Leaky(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.out = nn.Embedding(VOCAB, width), nn.Linear(width, VOCAB)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.emb(x)
            h = h + h.mean(dim=1, keepdim=True)  # the leak
            return self.out(h + self.mlp(h))

    model = Leaky()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    order = torch.Generator().manual_seed(1)  # the data order: one seed, the same in every run

    def batch() -> torch.Tensor:
        return torch.randint(0, VOCAB, (16, 65), generator=order)

    def loss_of(m: nn.Module, b: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(m(b[:, :-1]).reshape(-1, VOCAB), b[:, 1:].reshape(-1))

    probe = batch()
    holter.torch.preflight(model, run=run, batch=probe[:2, :9], loss_fn=loss_of, input_ids=probe[:2, :16])
    held_out = batch()
    clock = np.random.default_rng(width)
    for step in range(STEPS):
        tokens = batch()
        loss = loss_of(model, tokens)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        run.log({"loss": loss.item(), **gpu_clock(step, clock)}, step=step)
        if step % 25 == 0:
            with torch.no_grad():
                run.log({"eval_loss": loss_of(model, held_out).item()}, step=step)
    run.finish()
    return run.id


def gpu_clock(step: int, rng: np.random.Generator) -> dict[str, float]:
    """What `run.timed_step` and `holter.torch.watch_loader` log for a GPU job whose loader stalls
    from step 150 to 229 (the whole step slows, the step's own work does not), under their names:
    this shared CPU's clock, its steps a few milliseconds long, is no GPU's."""
    compute = 0.0192 * (1 + rng.normal(0, 0.01))
    wait = (0.0175 if 150 <= step < 230 else 0.0004) * (1 + rng.normal(0, 0.05))
    whole = compute + wait
    tokens = 1024.0
    return {
        "holter/step_time": whole,
        "holter/compute_time": compute,
        "holter/throughput/tokens_per_s": tokens / whole,
        "holter/throughput/compute_tokens_per_s": tokens / compute,
        "holter/throughput/mfu": 0.41 * 0.0192 / whole,
        "holter/throughput/compute_mfu": 0.41 * 0.0192 / compute,
        "holter/loader/wait_fraction": wait / whole,
    }


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
                ablations = log_ablations(api)
            main_run = train(server.url, "leaky-w32", 32)
            train(server.url, "leaky-w32-again", 32)
            train(server.url, "leaky-w64", 64)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900}, device_scale_factor=1)
                for name, (a, b) in ablations.items():
                    page.goto(f"{server.url}/compare?runs={a},{b}&metric=eval_loss&a=group&b=group")
                    page.locator("#cmp-verdict-intervals .main-svg").first.wait_for(timeout=60_000)
                    time.sleep(2.5)
                    page.screenshot(path=str(HERE / name), full_page=True)
                    print(f"saved {HERE / name}")
                page.goto(f"{server.url}/runs/{main_run}")
                page.locator("#run-twins .twin-link").first.wait_for(timeout=60_000)
                time.sleep(2.5)
                page.screenshot(path=str(HERE / "run-details.png"), full_page=True)
                print(f"saved {HERE / 'run-details.png'}")
                browser.close()
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
