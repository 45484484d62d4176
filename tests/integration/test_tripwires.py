"""Tripwire reports through a real `holter serve` on each store: a CPU training with a NaN planted in
a chosen layer gets an event naming that layer on its loss divergence; reports are stored once,
survive the client's spool, and bad ones are refused."""

from __future__ import annotations

import math
from pathlib import Path

import holter
import httpx
import pytest

from tests.servers import InProcessServer
from tests.waiting import wait_until

torch = pytest.importorskip("torch")
import holter.torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.mask_everything = False  # the planted bug: a mask over whole rows, whose softmax is NaN

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])
        scores = scores.masked_fill(torch.full_like(scores, self.mask_everything, dtype=torch.bool), float("-inf"))
        return self.out(scores.softmax(-1) @ v)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 16)
        self.layers = nn.ModuleList(nn.ModuleDict({"norm": nn.LayerNorm(16), "attn": Attention(16)}) for _ in range(3))
        self.head = nn.Linear(16, 11)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = x + layer["attn"](layer["norm"](x))
        return self.head(x)


def train_with_a_nan(
    url: str, *, project: str, layer: int = 1, nan_from: int = 80, steps: int = 120, every: int = 5
) -> str:
    """Train `Model` on CPU with the tripwire on, its `layer`'s attention masking every row from
    step `nan_from` on; the finished run's id."""
    torch.manual_seed(0)
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    run = holter.init(project=project, name=f"nan-in-layer-{layer}", url=url)
    watch = holter.torch.watch(model, run, every=every, nan_tripwire=True)
    generator = torch.Generator().manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small gains nothing from more, whose idle ones spin on a busy machine
    try:
        for step in range(steps):
            model.layers[layer]["attn"].mask_everything = step >= nan_from
            tokens = torch.randint(0, 11, (4, 8), generator=generator)
            loss = nn.functional.cross_entropy(model(tokens).reshape(-1, 11), tokens.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            run.log({"loss": loss.item()}, step=step)
    finally:
        torch.set_num_threads(threads)
    watch.remove()
    run.finish()
    return run.id


def events_of(url: str, run_id: str, **params: str) -> list[dict]:
    answer = httpx.get(f"{url}/api/v1/runs/{run_id}/events", params=params, timeout=30)
    answer.raise_for_status()
    return answer.json()["data"]


def test_a_planted_nan_is_named_on_the_loss_divergence(server: InProcessServer, spool_dir: Path) -> None:
    run_id = train_with_a_nan(server.url, project="tripwires", layer=2, nan_from=40, steps=60, every=10)

    def attached() -> list[dict]:
        return [e for e in events_of(server.url, run_id, kind="first_nonfinite") if e["metric"] == "loss"]

    (found,) = wait_until(attached)
    assert found["summary"].startswith("first non-finite output at step 40: `layers.2.attn` (forward, NaN)")
    assert found["severity"] == "critical" and found["start_step"] == 40
    assert found["details"]["divergence"]["metric"] == "loss"
    assert found["details"]["forward"] == {"name": "layers.2.attn", "value": "NaN"}


def report(step: int, name: str = "layers.3.mlp") -> dict:
    return {
        "step": step,
        "forward": {"name": name, "value": "Infinity"},
        "gradient": {"name": "head.weight", "value": "NaN"},
    }


def test_a_resent_report_is_stored_once_and_the_first_one_kept(api: httpx.Client) -> None:
    run_id = api.post("/runs", json={"project": "tripwires"}).json()["id"]
    first = api.post(f"/runs/{run_id}/nonfinite", json=report(120))
    again = api.post(f"/runs/{run_id}/nonfinite", json=report(120, name="somewhere.else"))
    assert first.status_code == again.status_code == 200
    assert first.json()["id"] == again.json()["id"]
    (stored,) = api.get(f"/runs/{run_id}/events", params={"kind": "first_nonfinite"}).json()["data"]
    assert "`layers.3.mlp` (forward, Infinity)" in stored["summary"] and stored["metric"] is None
    assert stored["severity"] == "warning"  # no divergence on this run to attach it to


def test_a_report_made_while_the_service_is_away_arrives_when_it_returns(store_url: str, spool_dir: Path) -> None:
    server = InProcessServer(store_url)  # not started yet: nothing answers at its address
    run = holter.init(project="tripwires", url=server.url, connect_timeout=0.5)
    run.log({"loss": 2.0}, step=6)
    run.report_nonfinite(7, forward={"name": "layers.0.attn", "value": "NaN"})
    run.log({"loss": math.nan}, step=7)
    assert run.flush(timeout=30)
    assert list((spool_dir / run.id).glob("*.json"))
    server.start()
    try:
        run.finish(timeout=60)
        assert not list((spool_dir / run.id).glob("*.json"))
        found = wait_until(
            lambda: [e for e in events_of(server.url, run.id, kind="first_nonfinite") if e["metric"] == "loss"]
        )
        assert "`layers.0.attn`" in found[0]["summary"]
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"step": 3}, "names a forward origin, a gradient, or both"),
        ({"step": -1, "forward": {"name": "x", "value": "NaN"}}, "step"),
        ({"step": 3, "forward": {"name": "x", "value": "nan-ish"}}, "value"),
        ({"step": 3, "forward": {"name": "", "value": "NaN"}}, "name"),
        ({"step": 3, "forward": {"name": "x", "value": "NaN", "colour": "red"}}, "colour"),
    ],
)
def test_a_malformed_report_is_refused_naming_the_problem(api: httpx.Client, body: dict, problem: str) -> None:
    run_id = api.post("/runs", json={"project": "tripwires"}).json()["id"]
    answer = api.post(f"/runs/{run_id}/nonfinite", json=body)
    assert answer.status_code == 422 and problem in answer.text
    assert api.get(f"/runs/{run_id}/events").json()["count"] == 0


def test_a_report_for_an_unknown_run_is_a_404(api: httpx.Client) -> None:
    answer = api.post("/runs/no-such-run/nonfinite", json=report(1))
    assert answer.status_code == 404 and "no-such-run" in answer.text
