"""Nothing a job logs is silently lost: the real client against the real server, on SQLite and
Postgres. A metric the service refuses is reported once, loudly, and the others are stored; a
step re-sent with another value is reported; a spool that cannot be written (a full disk, a
spool path that is not a folder) holds the batches in memory until the service takes them, and
`finish()` says how many points are not durable."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import holter
import httpx
import pytest

from tests.conftest import new_run_id
from tests.servers import InProcessServer, free_port


def metric_counts(url: str, run_id: str) -> dict[str, int]:
    return {m["name"]: m["count"] for m in httpx.get(f"{url}/api/v1/runs/{run_id}").json()["metrics"]}


def test_a_refused_metric_is_reported_once_and_the_others_are_stored(
    server: InProcessServer, spool_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = holter.init(project="delivery", url=server.url, flush_interval=0.05)
    for step in range(200):
        run.log({"loss": 1.0 / (step + 1), "mfu(%)": 41.5, "bad\x00name": 1.0, "x" * 300: 2.0}, step=step)
        if step % 50 == 0:
            assert run.flush()  # several batches, each refusing the same two metrics
    delivery = run.finish()
    assert metric_counts(server.url, run.id) == {"loss": 200, "mfu(%)": 200}
    assert delivery.stored == 400 and delivery.refused == 400 and delivery.not_durable == 0
    err = capsys.readouterr().err
    refusals = [line for line in err.splitlines() if "refused metric" in line]
    assert len(refusals) == 2, err
    assert any("'bad\\\\x00name'" in line and "control character" in line for line in refusals), refusals
    assert any("at most 256 characters" in line for line in refusals), refusals


def test_a_step_logged_again_with_another_value_is_reported_once(
    server: InProcessServer, spool_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = holter.init(project="delivery", url=server.url)
    run.log({"loss": 1.0}, step=5)
    assert run.flush()
    run.log({"loss": 2.0}, step=5)  # say a restarted loop that re-logs its last step
    assert run.flush()
    run.log({"loss": 3.0}, step=5)
    run.log({"loss": 1.5}, step=6)
    run.finish()
    assert httpx.get(f"{server.url}/api/v1/runs/{run.id}/metrics/loss/points").json()["values"] == [1.0, 1.5]
    conflicts = [line for line in capsys.readouterr().err.splitlines() if "logged again" in line]
    assert len(conflicts) == 1 and "'loss'" in conflicts[0] and "step 5" in conflicts[0]


def test_every_point_of_a_batch_refused_whole_counts_as_refused(
    server: InProcessServer, spool_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a batch naming more metrics than one run may have (HOLTER_MAX_METRICS_PER_RUN, 10,000) is a
    # 422 for the whole batch: none of its points is stored, and finish() says so
    run = holter.init(project="delivery", url=server.url)
    run.log({f"param/{i}": 1.0 for i in range(10_001)}, step=0)
    delivery = run.finish()
    assert delivery.refused == 10_001 and delivery.stored == 0 and delivery.not_durable == 0
    assert "10,001 metrics" in capsys.readouterr().err
    assert metric_counts(server.url, run.id) == {}


# --- a spool that cannot be written -------------------------------------------------------

CHILD = """
    import dataclasses, json, sys
    import holter
    run = holter.init(project="delivery", id=sys.argv[1], url=sys.argv[2], spool_dir=sys.argv[3], flush_interval=0.05,
                      connect_timeout=0.5)
    for step in range(6360):
        run.log({"loss": 1.0 / (step + 1), "lr": 0.1}, step=step)
    run.flush(timeout=30)
    print(json.dumps(dataclasses.asdict(run._sender.delivery())), flush=True)
    sys.stdin.readline()  # the parent starts the service now
    print(json.dumps(dataclasses.asdict(run.finish(timeout=float(sys.argv[4])))), flush=True)
"""


@contextlib.contextmanager
def full_tmpfs(folder: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs at `folder`, filled up (needs root; skipped where mounting is not allowed)."""
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        with contextlib.suppress(OSError), open(folder / "filler", "wb") as filler:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        yield folder / "spool"
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def no_file_may_grow() -> None:
    """In the child: every write to a file fails with EFBIG, as on a disk with no room."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


@pytest.fixture(params=["full tmpfs", "file size limit", "spool path is a file"])
def unwritable_spool(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, object]]:
    """(a spool folder that cannot be written, a function to run in the child before it starts)."""
    if request.param == "full tmpfs":
        with full_tmpfs(tmp_path / "small") as spool:
            yield spool, None
    elif request.param == "file size limit":
        yield tmp_path / "spool", no_file_may_grow
    else:
        (tmp_path / "not-a-folder").write_text("a file where the spool folder should be")
        yield tmp_path / "not-a-folder", None


def start_child(run_id: str, url: str, spool: Path, finish_timeout: float, before: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), run_id, url, str(spool), str(finish_timeout)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=before,  # noqa: PLW1509 — the child's resource limit, set before it runs; no threads yet
    )  # type: ignore[arg-type]


def test_a_spool_that_cannot_be_written_loses_nothing(
    store_url: str, tmp_path: Path, unwritable_spool: tuple[Path, object]
) -> None:
    spool, before = unwritable_spool
    server, run_id = InProcessServer(store_url), new_run_id()  # the server not started yet: nothing answers there
    child = start_child(run_id, server.url, spool, 120, before)
    held = json.loads(child.stdout.readline())
    # everything logged while the service was away is in the child's memory, none of it durable
    assert held["not_durable"] == 2 * 6360 and held["spooled"] == 0
    server.start()
    try:
        out, err = child.communicate("\n", timeout=180)
        delivery = json.loads(out)
        assert child.returncode == 0, err
        assert delivery == {"stored": 2 * 6360, "duplicates": 0, "refused": 0, "spooled": 0, "not_durable": 0}
        assert metric_counts(server.url, run_id) == {"loss": 6360, "lr": 6360}
        assert httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()["status"] == "finished"
        said = [line for line in err.splitlines() if "cannot write the spool" in line]
        assert len(said) == 1 and "held in memory" in said[0], err
    finally:
        server.stop()


def test_finish_says_how_many_points_are_not_durable(tmp_path: Path) -> None:
    (tmp_path / "not-a-folder").write_text("")
    child = start_child(new_run_id(), f"http://127.0.0.1:{free_port()}", tmp_path / "not-a-folder", 1, None)
    out, err = child.communicate("\n", timeout=120)
    delivery = json.loads(out.splitlines()[-1])
    assert delivery["not_durable"] == 2 * 6360 and delivery["stored"] == 0
    assert f"finished with {2 * 6360:,} points not sent and not on disk" in err


def test_when_memory_for_held_requests_is_full_log_waits_and_loses_nothing(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "not-a-folder").write_text("")
    server = InProcessServer(store_url)  # not started yet: nothing answers at its address
    run = holter.init(
        project="delivery",
        url=server.url,
        spool_dir=tmp_path / "not-a-folder",
        connect_timeout=0.5,
        flush_interval=0.05,
        max_queued_calls=1_000,
        max_held_bytes=64 * 1024,
    )
    logger = threading.Thread(target=lambda: [run.log({"loss": float(step)}, step=step) for step in range(20_000)])
    logger.start()
    logger.join(5)
    assert logger.is_alive()  # waiting for room: neither the service, the disk nor memory can take more
    assert "log() now waits for room" in capsys.readouterr().err
    server.start()
    try:
        logger.join(120)
        assert not logger.is_alive()
        delivery = run.finish(timeout=120)
        assert delivery.stored == 20_000 and delivery.not_durable == 0
        assert metric_counts(server.url, run.id) == {"loss": 20_000}
    finally:
        server.stop()
