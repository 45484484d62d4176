"""Throughput over the whole step through the real service: a tiny CPU transformer trained with
`holter.torch.watch_loader` and `run.timed_step`, its loader stalling on some batches. The stall
shows in the whole-step tokens/s and MFU, not in the compute-only series; MFU is its own kind on a
chart of its own, not the tokens/s axis."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import holter
import httpx
import pytest

from tests.servers import ServerProcess

torch = pytest.importorskip("torch")
import holter.torch
from torch import nn

SEQ, VOCAB, STEPS = 16, 32, 16
STALLS = {5, 11}  # batches the loader is slow to make


class Stalling(torch.utils.data.Dataset):
    """Random token sequences; some batches take the loader 2 s (a slow disk, a cold shard)."""

    def __len__(self) -> int:
        return STEPS * 4

    def __getitem__(self, index: int) -> torch.Tensor:
        if index // 4 in STALLS and index % 4 == 0:
            time.sleep(2.0)
        return torch.randint(0, VOCAB, (SEQ + 1,), generator=torch.Generator().manual_seed(index))


@pytest.fixture(scope="module")
def server(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A `holter serve` process of its own: the test times the training step, which the shared
    in-process server's threads (ingest, live detection) would slow by taking the GIL."""
    folder = tmp_path_factory.mktemp("throughput")
    process = ServerProcess(store_url, log_path=folder / "server.log").start()
    yield process
    process.stop()


def points(url: str, run_id: str, metric: str) -> dict[int, float]:
    answer = httpx.get(f"{url}/api/v1/runs/{run_id}/metrics/{metric}/points", timeout=30).json()
    return dict(zip(answer["steps"], answer["values"]))


# throughput measured while training: alone, not beside other workers
@pytest.mark.serial
def test_a_loader_stall_shows_in_the_whole_step_throughput_and_mfu_has_its_own_chart(
    server: ServerProcess, spool_dir: Path
) -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
    model = nn.Sequential(nn.Embedding(VOCAB, 32), nn.TransformerEncoder(layer, num_layers=2), nn.Linear(32, VOCAB))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    flops = holter.torch.flops_per_token(model, SEQ)
    loader = torch.utils.data.DataLoader(Stalling(), batch_size=4)
    run = holter.init(project="throughput", name="stalling-loader", url=server.url)
    for step, batch in enumerate(holter.torch.watch_loader(loader, run)):
        with run.timed_step(tokens=batch[:, :-1].numel(), step=step, flops_per_token=flops, peak_flops=1e12):
            logits = model(batch[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        run.log({"loss": loss.item()}, step=step)
    run.finish()

    whole = points(server.url, run.id, "holter/throughput/tokens_per_s")
    compute = points(server.url, run.id, "holter/throughput/compute_tokens_per_s")
    assert set(whole) == set(compute) == set(range(STEPS))  # step 0 too: the loader watch gave its wait
    steady = sorted(w for s, w in whole.items() if s not in STALLS)
    median = steady[len(steady) // 2]
    for stalled in STALLS:
        assert whole[stalled] < 0.5 * median, (stalled, whole[stalled], median)
        # compute-only leaves the 2 s wait out: it stays far above the whole step's figure (its own
        # step may be slower than the others, the client's sender thread waking beside it)
        assert compute[stalled] > 10 * whole[stalled], (stalled, compute[stalled], whole[stalled])
    mfu, compute_mfu = (points(server.url, run.id, f"holter/throughput/{m}") for m in ("mfu", "compute_mfu"))
    assert all(mfu[s] < compute_mfu[s] for s in STALLS)
    metrics = {m["name"]: m for m in httpx.get(f"{server.url}/api/v1/runs/{run.id}", timeout=30).json()["metrics"]}
    assert (metrics["holter/throughput/mfu"]["kind"], metrics["holter/throughput/mfu"]["panel"]) == ("mfu", "mfu")
    assert metrics["holter/throughput/compute_mfu"]["panel"] == "mfu"
    assert metrics["holter/throughput/tokens_per_s"]["panel"] == "throughput"
    assert metrics["holter/compute_time"]["kind"] == "compute_time"
