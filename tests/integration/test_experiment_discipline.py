"""The discipline the chapter asks for, through the real client and service on each store: a run
records its code version and environment, its pre-flight checks are stored with it, and its
repeats (same config, seeds and code) are compared value for value: identical when the training is
deterministic, named when it is not, and set apart when the code changed.

The training is a real script in a real git repository, run as its own process, as a job runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.servers import ServerProcess

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="no git here")

SCRIPT = """
import os, sys, torch, holter, holter.torch
from torch import nn

torch.manual_seed(0)
run = holter.init(project=os.environ["PROJECT"], config={"lr": 0.05, "width": 16, "seed": 0}, url=os.environ["URL"])
model = nn.Sequential(nn.Embedding(20, 16), nn.Linear(16, 20))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.randint(0, 20, (8, 9), generator=torch.Generator().manual_seed(1))
holter.torch.preflight(model, run=run, batch=data, loss_fn=lambda m, b: nn.functional.cross_entropy(
    m(b[:, :-1]).reshape(-1, 20), b[:, 1:].reshape(-1)), input_ids=data[:2, :8], lr=0.05)
unseeded = torch.Generator()  # the planted nondeterminism: a generator nobody seeded
unseeded.seed()
for step in range(30):
    logits = model(data[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, 20), data[:, 1:].reshape(-1))
    if os.environ.get("JITTER") and step >= 10:
        loss = loss + 1e-5 * (1 + torch.rand((), generator=unseeded))  # past float32 rounding at ~3
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


@dataclass(frozen=True)
class Trained:
    """The repo's script run four times in one project: `first`, `again` as it is, `jittered` with
    the planted nondeterminism, and `edited` after a local edit of the script."""

    repo: Path
    first: str
    again: str
    jittered: str
    edited: str


@pytest.fixture(scope="module")
def trained(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """The four runs, trained once per store for the module's tests: each is a process that imports
    torch (seconds of CPU), and the provenance test reads the first of them."""
    tmp_path = tmp_path_factory.mktemp("discipline")
    folder = tmp_path / "job"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    (folder / "train.py").write_text(SCRIPT)
    git(folder, "add", "train.py")
    git(folder, "commit", "-q", "-m", "the training script")
    project = f"disc-{uuid.uuid4().hex[:6]}"
    first = train(folder, server, project, tmp_path)
    again = train(folder, server, project, tmp_path)
    jittered = train(folder, server, project, tmp_path, JITTER="1")
    (folder / "train.py").write_text(SCRIPT.replace("lr=0.05)\ndata", "lr=0.06)\ndata"))  # a local edit: other code
    edited = train(folder, server, project, tmp_path)
    return Trained(folder, first, again, jittered, edited)


def train(repo: Path, server: ServerProcess, project: str, tmp_path: Path, **env: str) -> str:
    environment = {
        **os.environ,
        "PROJECT": project,
        "URL": server.url,
        "HOLTER_SPOOL_DIR": str(tmp_path / f"spool-{uuid.uuid4().hex[:6]}"),
        # one thread: a model this small gains nothing from more, whose idle ones spin on a busy machine
        "OMP_NUM_THREADS": "1",
        **env,
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


def test_a_run_records_its_code_its_environment_and_its_preflight(trained: Trained, api: httpx.Client) -> None:
    run = api.get(f"/runs/{trained.first}").json()
    code, environment = run["provenance"]["code"], run["provenance"]["environment"]
    assert code["commit"] == git(trained.repo, "rev-parse", "HEAD") and code["branch"] == "main"
    assert code["dirty"] is False  # the first run ran the committed script, before the edit
    assert code["script"].endswith("train.py") and len(code["script_hash"]) == 64
    assert environment["python"] == ".".join(map(str, sys.version_info[:3])) and environment["torch"]
    assert "torch" in environment["packages"] and environment["hostname"]
    checks = run["preflight"]["checks"]
    assert set(checks) == {"overfit_one_batch", "causal_mask"}  # an nn.Sequential does not generate: no cache check
    assert checks["causal_mask"]["passed"] and checks["overfit_one_batch"]["details"]["steps"] >= 1
    assert checks["causal_mask"]["summary"].startswith("changing the token at position")


def test_repeats_are_deterministic_until_an_unseeded_generator_and_other_code_is_set_apart(
    trained: Trained, api: httpx.Client
) -> None:
    again, jittered, edited = trained.again, trained.jittered, trained.edited
    found = api.get(f"/runs/{trained.first}/repeats").json()
    by_run = {r["run_id"]: r for r in found["repeats"]}
    assert set(by_run) == {again, jittered, edited}
    assert by_run[again]["identical"] and by_run[again]["same_code"] is True
    assert by_run[again]["sentence"].endswith("logged bit-identical loss (30 points): deterministic")
    parted = by_run[jittered]
    assert parted["same_code"] is True and not parted["identical"] and parted["first_difference"]["step"] == 10
    assert ": not deterministic." in parted["sentence"]
    other = by_run[edited]
    assert (
        other["same_code"] is False
        and "ran other code (commit" in other["sentence"]
        and "local changes" in other["sentence"]
    )
    assert found["sentence"].startswith("1 of the 3 runs with this run's config and seeds logged other values")
    assert api.get(f"/runs/{edited}").json()["provenance"]["code"]["dirty"] is True


def test_provenance_is_kept_from_the_first_create_and_bad_provenance_is_refused(api: httpx.Client) -> None:
    run_id = f"p{uuid.uuid4().hex[:12]}"
    first = {"code": {"commit": "1a2b3c4d5e6f7a8b", "dirty": False}, "environment": {"hostname": "node-1"}}
    body = {"id": run_id, "project": "disc", "provenance": first}
    assert api.post("/runs", json=body).status_code == 200
    later = {**body, "provenance": {"code": {"commit": "ffffffffffff"}, "environment": {"hostname": "node-2"}}}
    assert api.post("/runs", json=later).status_code == 200
    assert api.get(f"/runs/{run_id}").json()["provenance"] == first
    refused = api.post("/runs", json={"project": "disc", "provenance": {"code": {"commit": "not a sha"}}})
    assert refused.status_code == 422 and "commit" in refused.text
    empty = api.post(f"/runs/{run_id}/preflight", json={"checks": []})
    assert empty.status_code == 422 and "checks" in empty.text
