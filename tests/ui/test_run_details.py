"""The run page's Run details and throughput charts in a real browser, for runs a real training
script logged from a real git repository: the code version with its local changes, a failed
pre-flight check at a glance, a twin's link that opens its page, a repeat compared value for
value, MFU on a chart of its own, and the step's own work dashed beside the whole step.

The script trains a tiny CPU model whose "attention" mixes every position with the sequence's
mean: it sees the future, which `holter.torch.preflight`'s causal-mask check catches."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.servers import InProcessServer
from tests.waiting import wait_until

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("git") is None, reason="no git here")]

SCRIPT = """
import os, time, torch, holter, holter.torch
from torch import nn

torch.manual_seed(0)
width = int(os.environ["WIDTH"])
run = holter.init(
    project=os.environ["PROJECT"],
    name=os.environ["NAME"],
    url=os.environ["URL"],
    config={"data": {"path": "tiny-chars", "data_seed": 0}, "batch_size": 8, "model": {"width": width}, "seed": 0},
)


class Leaky(nn.Module):
    # every position also sees the sequence's mean: the future leaks into the past
    def __init__(self, width):
        super().__init__()
        self.emb, self.out = nn.Embedding(20, width), nn.Linear(width, 20)

    def forward(self, x):
        h = self.emb(x)
        return self.out(h + h.mean(dim=1, keepdim=True))


model = Leaky(width)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.randint(0, 20, (8, 9), generator=torch.Generator().manual_seed(1))
loss_of = lambda m, b: nn.functional.cross_entropy(m(b[:, :-1]).reshape(-1, 20), b[:, 1:].reshape(-1))
holter.torch.preflight(model, run=run, batch=data[:2], loss_fn=loss_of, input_ids=data[:2, :8], lr=0.05)
flops = 6 * sum(p.numel() for p in model.parameters())
for step in range(40):
    if 20 <= step < 30:
        time.sleep(0.05)  # a slow loader: the step waits for its batch
    with run.timed_step(tokens=64, step=step, flops_per_token=flops, peak_flops=5e9):
        loss = loss_of(model, data)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    run.log({"loss": loss.item()}, step=step)
run.finish()
print(run.id)
"""


def git(folder: Path, *args: str) -> str:
    command = ["git", "-C", str(folder), "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args]
    return subprocess.run(command, capture_output=True, check=True, text=True).stdout.strip()


def train(repo: Path, server: InProcessServer, project: str, name: str, width: int, spool: Path) -> str:
    environment = {
        **os.environ,
        "PROJECT": project,
        "NAME": name,
        "WIDTH": str(width),
        "URL": server.url,
        "HOLTER_SPOOL_DIR": str(spool / name),
    }
    done = subprocess.run(
        [sys.executable, str(repo / "train.py")],
        check=False,
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def trained(ui_server: InProcessServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Three runs of one project from a repository with a local edit: the run, its repeat (same
    config, seeds and code) and its twin (same data order, twice the width); and the commit."""
    root = tmp_path_factory.mktemp("job")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "leaky-attention")
    (repo / "train.py").write_text(SCRIPT)
    git(repo, "add", "train.py")
    git(repo, "commit", "-q", "-m", "the training script")
    (repo / "train.py").write_text(SCRIPT + "# a local edit, not committed\n")
    project = f"ui-details-{uuid.uuid4().hex[:6]}"
    return {
        "run": train(repo, ui_server, project, "leaky-w16", 16, root),
        "repeat": train(repo, ui_server, project, "leaky-w16-again", 16, root),
        "twin": train(repo, ui_server, project, "leaky-w32", 32, root),
        "commit": git(repo, "rev-parse", "HEAD"),
    }


def test_the_run_page_shows_the_code_version_with_its_local_changes(page, trained) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{trained['run']}")
    code = page.locator("#run-code")
    code.wait_for()
    assert code.inner_text().startswith(trained["commit"][:7]) and "local changes" in code.inner_text()
    commit = page.locator(".run-commit").inner_text()
    assert trained["commit"][:12] in commit and "on leaky-attention" in commit
    assert "1 file changed" in page.locator(".run-dirty").inner_text()


def test_a_failed_pre_flight_check_is_seen_at_a_glance_with_its_summary(page, trained) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{trained['run']}")
    badge = page.locator("#run-preflight-badge")
    badge.wait_for()
    assert "pre-flight failed" in badge.inner_text().lower() and "causal-mask leakage" in badge.inner_text().lower()
    box = wait_until(badge.bounding_box)  # (None for the moment the header is drawn again by a refresh)
    assert box["y"] < 200  # in the header, above the charts
    failed = page.locator(".preflight-failed")
    assert failed.count() == 1 and "changing the token at position" in failed.inner_text()
    assert page.locator(".preflight-passed", has_text="overfit one batch").count() == 1


def test_a_twin_is_linked_and_its_link_opens_the_twin_s_page(page, trained) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{trained['run']}")
    twin = page.locator(".twin-link", has_text="leaky-w32")
    twin.wait_for()
    assert "model.width 16 → 32" in page.locator(".twin-item", has_text="leaky-w32").inner_text()
    assert "share this run's data order" in page.locator("#run-twins-sentence").inner_text()
    twin.click()
    page.wait_for_url(f"**/runs/{trained['twin']}")
    wait_until(lambda: page.locator("#run-title").inner_text() == "leaky-w32")


def test_a_repeat_of_the_same_config_seeds_and_code_is_said_to_be_identical(page, trained) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{trained['run']}")
    repeat = page.locator(".repeat-item", has_text="leaky-w16-again")
    repeat.wait_for()
    assert "identical" in repeat.inner_text() and "deterministic" in repeat.inner_text()


def chart(page, title: str) -> dict | None:  # type: ignore[no-untyped-def]
    """The chart whose title starts with `title`, as the browser holds it: its traces and y axis."""
    return page.evaluate(
        """(title) => {
            for (const el of document.querySelectorAll('.chart-card .js-plotly-plot')) {
                const text = el.layout && el.layout.title && el.layout.title.text;
                if (!text || !text.startsWith(title)) continue;
                return {
                    traces: el.data.filter(t => t.legendgroup).map(t => ({
                        name: t.name, dash: (t.line || {}).dash || null, color: (t.line || {}).color,
                        y: Array.from(t.y || []),
                    })),
                    tickformat: el.layout.yaxis.tickformat || null,
                    legend: (el.layout.legend.title || {}).text || null,
                };
            }
            return null;
        }""",
        title,
    )


def test_mfu_has_a_chart_of_its_own_and_the_step_s_own_work_is_dashed_beside_the_whole_step(page, trained) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{trained['run']}")
    mfu = wait_until(lambda: chart(page, "Model FLOPs utilisation"))
    names = {t["name"] for t in mfu["traces"]}
    assert names == {"holter/throughput/mfu", "holter/throughput/compute_mfu"} and mfu["tickformat"] == ".0%"
    assert all(0 < y <= 1 for t in mfu["traces"] for y in t["y"] if y is not None)
    throughput = wait_until(lambda: chart(page, "Throughput"))
    by_name = {t["name"]: t for t in throughput["traces"]}
    assert "holter/throughput/mfu" not in by_name  # not on the tokens/s axis
    whole, compute = by_name["holter/throughput/tokens_per_s"], by_name["holter/throughput/compute_tokens_per_s"]
    assert compute["dash"] == "dash" and whole["dash"] is None and compute["color"] == whole["color"]
    assert "wait for data" in throughput["legend"]


def test_an_mfu_logged_in_percent_is_read_as_one(page, ui_server: InProcessServer) -> None:  # type: ignore[no-untyped-def]
    # torchtitan's name (pytorch/torchtitan components/metrics.py): 100 * flops per token * tokens/s / peak
    run_id = f"titan{uuid.uuid4().hex[:8]}"
    with ui_server.api() as api:
        api.post("/runs", json={"id": run_id, "project": "ui-titan", "name": run_id}).raise_for_status()
        steps = list(range(100))
        metrics = {
            "loss_metrics/global_avg_loss": {"steps": steps, "values": [3.0 - s / 100 for s in steps]},
            "throughput(tps)": {"steps": steps, "values": [7800.0] * 100},
            "mfu(%)": {"steps": steps, "values": [41.0 + (s % 3) * 0.1 for s in steps]},
        }
        api.post(f"/runs/{run_id}/points", json={"metrics": metrics}).raise_for_status()
    page.goto(f"/runs/{run_id}")
    mfu = wait_until(lambda: chart(page, "Model FLOPs utilisation"))
    assert [t["name"] for t in mfu["traces"]] == ["mfu(%)"] * len(mfu["traces"]) and mfu["tickformat"] == ".0%"
    assert all(0.40 < y < 0.42 for t in mfu["traces"] for y in t["y"] if y is not None)  # 41 % drawn as 41 %
