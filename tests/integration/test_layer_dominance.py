"""A real tiny GPT-2 (config-initialised, CPU) trained under `holter.torch.watch` into a live
service: a healthy one raises no `layer_dominance` (its final LayerNorm's output has an RMS of ~1
by construction, against embeddings of ~0.02), and one whose last block's output is blown up
has that block named."""

from __future__ import annotations

import time
from pathlib import Path

import holter
import httpx
import pytest

from tests.servers import ServerProcess
from tests.waiting import wait_until

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow  # GPT-2 trained under watch, then live detection over it

STEPS = 20


def scaled_by(factor: float):  # type: ignore[no-untyped-def]
    """A forward hook multiplying a block's hidden states (a tensor, or the first of a tuple)."""

    def hook(module, args, output):  # type: ignore[no-untyped-def]
        return output * factor if isinstance(output, torch.Tensor) else (output[0] * factor, *output[1:])

    return hook


def train(run: holter.Run, *, blow_up: int | None = None) -> None:
    import holter.torch

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=64, n_positions=32, n_embd=64, n_layer=4, n_head=4, bos_token_id=0, eos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(config)
    if blow_up is not None:  # a block whose output grows out of scale (a broken residual branch)
        model.transformer.h[blow_up].register_forward_hook(scaled_by(40.0))
    watch = holter.torch.watch(model, run, every=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small gains nothing from more, whose idle ones spin on a busy machine
    try:
        for step in range(STEPS):
            batch = torch.randint(0, 64, (8, 32), generator=generator)
            loss = model(batch, labels=batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            run.log({"loss": loss.item()}, step=step)
    finally:
        torch.set_num_threads(threads)
    watch.remove()
    run.finish()


def dominance(url: str, run_id: str) -> tuple[list[dict], list[dict]]:
    """The run's layer_dominance events: live (as detection recorded them) and from the batch
    classifier over the whole run (POST /analyze)."""
    live = httpx.get(f"{url}/api/v1/runs/{run_id}/events", params={"kind": "layer_dominance"}).json()["data"]
    batch = httpx.post(f"{url}/api/v1/runs/{run_id}/analyze", timeout=120).json()["findings"]
    return live, [f for f in batch if f["kind"] == "layer_dominance"]


def test_a_healthy_gpt2_under_watch_raises_no_layer_dominance(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="dominance", name="healthy-gpt2", url=server.url)
    train(run)
    metrics = {m["name"]: m for m in httpx.get(f"{server.url}/api/v1/runs/{run.id}").json()["metrics"]}
    final_norm = metrics["holter/act_norm/transformer.ln_f"]["last_value"]
    embedding = metrics["holter/act_norm/transformer.wte"]["last_value"]
    assert final_norm / embedding > 20  # what made the old rule fire
    time.sleep(3)  # live detection reads the run meanwhile
    assert dominance(server.url, run.id) == ([], [])


def test_a_block_blown_out_of_scale_is_named(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="dominance", name="broken-gpt2", url=server.url)
    train(run, blow_up=3)
    (live,) = wait_until(lambda: dominance(server.url, run.id)[0])
    (batch,) = dominance(server.url, run.id)[1]
    assert (
        live["metric"] == batch["metric"] == "holter/act_norm/transformer.h.3" and "transformer.h.3" in live["summary"]
    )
