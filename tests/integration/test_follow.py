"""`holter follow` end to end: a real `holter serve`, a writer process appending to a file the way a
training job does, `holter follow` in a process of its own, and a real webhook receiver on loopback.
The points show up while the writer runs, the planted problem is named and alerted, the run ends
when the writer does (crashed when its log ends in a traceback), and a follower killed midway
goes on where it stopped; a log truncated and written again is read again from its start, and
a FIFO is never opened (given, appearing at the path, or in a followed folder)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import own_store
from tests.receivers import Receiver
from tests.servers import ServerProcess
from tests.waiting import wait_until

# A Megatron-LM training log (megatron/training/training.py training_log and
# evaluate_and_print_results), printed by a process that sleeps between iterations. Its lm loss
# falls, then from iteration 150 blows up and keeps climbing; the job dies with a traceback.
MEGATRON_WRITER = """
import math, random, sys, time
random.seed(3)
out = open(sys.argv[1], "a", buffering=1)
iterations, pause = int(sys.argv[2]), float(sys.argv[3])
out.write("> building GPT model ...\\n> training ...\\n")
for it in range(1, iterations + 1):
    loss = 8.0 * math.exp(-it / 40) + 2.0 + random.gauss(0, 0.02)
    if it > 150:
        loss += (it - 150) * 0.08
    out.write(
        f" [2025-01-01 12:00:00.000000] iteration {it:8d}/{iterations:8d} | consumed samples: {it * 32:12d} | "
        f"elapsed time per iteration (ms): {300 + random.random() * 5:.1f} | learning rate: {3e-4:.6E} | "
        f"global batch size:    32 | lm loss: {loss:.6E} | loss scale: 1.0 | "
        f"grad norm: {1 + random.random() / 10:.3f} | number of skipped iterations:   0 | "
        "number of nan iterations:   0 |\\n"
    )
    if it % 50 == 0:
        value = loss + 0.1
        out.write(f" validation loss at iteration {it} | lm loss value: {value:.6E} | ")
        out.write(f"lm loss PPL: {math.exp(value):.6E} | \\n")
    time.sleep(pause)
out.write("Traceback (most recent call last):\\n  File \\"pretrain_gpt.py\\", line 1\\nRuntimeError: CUDA error\\n")
"""

# A CSV of metrics that grows a row per step; the loss goes NaN at step 200 and stays there.
CSV_WRITER = """
import math, sys, time
path, steps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with open(path, "a", buffering=1) as out:
    out.write("step,loss,grad_norm\\n")
    for step in range(steps):
        loss = float("nan") if step >= 200 else 3.0 * math.exp(-step / 60) + 1.0
        out.write(f"{step},{loss},{0.5 + (step % 7) / 100}\\n")
        time.sleep(pause)
"""

# A job logging through torch's SummaryWriter (flushing every second), which opens a second
# writer for its evaluations halfway (a new run folder appears in the logdir); its loss goes NaN
# at step 160.
TENSORBOARD_WRITER = """
import math, sys, time
from torch.utils.tensorboard import SummaryWriter
logdir, steps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
train = SummaryWriter(logdir + "/train", flush_secs=1)
evaluation = None
for step in range(steps):
    train.add_scalar("loss", float("nan") if step >= 160 else 3.0 * math.exp(-step / 50) + 0.5, step)
    train.add_scalar("grad_norm", 0.9, step)
    if step == steps // 2:
        evaluation = SummaryWriter(logdir + "/eval", flush_secs=1)
    if evaluation is not None and step % 10 == 0:
        evaluation.add_scalar("loss", 1.0, step)
    time.sleep(pause)
train.close()
evaluation.close()
"""


# A Hugging Face Trainer's output folder: every save writes checkpoint-N/ with the whole
# trainer_state.json so far (written in place, as the Trainer does) and the model's config.json.
TRAINER_WRITER = """
import json, os, sys, time
output, saves, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
history = []
for save in range(1, saves + 1):
    for step in range((save - 1) * 50 + 10, save * 50 + 1, 10):
        history.append({"step": step, "loss": 3.0 - step / 200, "grad_norm": 0.7, "learning_rate": 5e-5})
    history.append({"step": save * 50, "eval_loss": 3.1 - save / 10})
    folder = os.path.join(output, f"checkpoint-{save * 50}")
    os.makedirs(folder)
    with open(os.path.join(folder, "config.json"), "w") as handle:
        json.dump({"model_type": "gpt2", "n_layer": 2}, handle)
    with open(os.path.join(folder, "trainer_state.json"), "w") as handle:
        json.dump({"global_step": save * 50, "log_history": history}, handle)
    time.sleep(pause)
"""


@pytest.fixture(scope="module")
def follow_server(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("follow")
    server = ServerProcess(own_store(store_url, folder), log_path=folder / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    hook = Receiver().start()
    yield hook
    hook.stop()


@pytest.fixture
def project(follow_server: ServerProcess, receiver: Receiver) -> str:
    """A project of its own, with a webhook channel (and its default rules) to the receiver."""
    name = f"follow-{uuid.uuid4().hex[:8]}"
    answer = httpx.post(
        f"{follow_server.url}/api/v1/channels",
        json={"name": name, "kind": "webhook", "target": receiver.url, "project": name},
    )
    assert answer.status_code == 201, answer.text
    return name


def start_writer(script: str, *args: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)])


def start_follow(server: ServerProcess, path: Path, project: str, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "holter.cli", "follow", str(path), "--project", project, "--url", server.url]
    command += ["--poll", "0.3", "--state", str(tmp_path / "follow-state.json"), *args]
    env = {**os.environ, "HOLTER_SPOOL_DIR": str(tmp_path / "spool")}
    return subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)


def the_run(server: ServerProcess, project: str) -> dict | None:
    runs = httpx.get(f"{server.url}/api/v1/runs", params={"project": project}).json()["data"]
    return httpx.get(f"{server.url}/api/v1/runs/{runs[0]['id']}").json() if runs else None


def counts(run: dict | None) -> dict[str, int]:
    return {m["name"]: m["count"] for m in (run or {}).get("metrics", [])}


def events(server: ServerProcess, run_id: str) -> list[dict]:
    answer = httpx.get(f"{server.url}/api/v1/runs/{run_id}/events").json()
    return answer["data"] if isinstance(answer, dict) else answer


def alerted(receiver: Receiver, kind: str) -> list[dict]:
    return [a for m in receiver.messages() for a in m.json().get("alerts", []) if a["kind"] == kind]


def test_a_megatron_log_is_followed_live_its_blow_up_alerted_and_its_crash_marked(
    follow_server: ServerProcess, receiver: Receiver, project: str, tmp_path: Path
) -> None:
    log = tmp_path / "train.log"
    writer = start_writer(MEGATRON_WRITER, log, 260, 0.04)
    follower = start_follow(follow_server, log, project, tmp_path, "--pid", str(writer.pid))
    try:
        live = wait_until(lambda: writer.poll() is None and counts(the_run(follow_server, project)).get("lm loss"))
        assert live > 0  # points arrived while the writer was still writing
        assert writer.wait(120) == 0
        assert follower.wait(120) == 0, follower.stderr.read()
    finally:
        writer.kill()
        follower.kill()
    run = the_run(follow_server, project)
    assert run["status"] == "crashed" and run["config"]["format"] == "textlog"
    assert counts(run)["lm loss"] == 260 and counts(run)["lm loss validation"] == 5
    assert counts(run)["iteration-time"] == 260 and counts(run)["grad-norm"] == 260
    # detection runs beside ingest, so the divergence may be named a moment after the run ends
    found = wait_until(
        lambda: [e for e in events(follow_server, run["id"]) if e["kind"] == "divergence" and e["metric"] == "lm loss"]
    )
    assert found[0]["start_step"] >= 140, found
    wait_until(lambda: alerted(receiver, "divergence") and alerted(receiver, "run_crashed"))
    (divergence,) = [a for a in alerted(receiver, "divergence") if a["metric"] == "lm loss"]
    assert divergence["run_id"] == run["id"] and divergence["project"] == project


def test_a_growing_csv_is_followed_until_it_goes_quiet_and_its_nan_is_named(
    follow_server: ServerProcess, receiver: Receiver, project: str, tmp_path: Path
) -> None:
    path = tmp_path / "metrics.csv"
    writer = start_writer(CSV_WRITER, path, 240, 0.03)
    follower = start_follow(follow_server, path, project, tmp_path, "--idle", "3")
    try:
        assert wait_until(lambda: writer.poll() is None and counts(the_run(follow_server, project)).get("loss"))
        assert writer.wait(120) == 0
        assert follower.wait(120) == 0, follower.stderr.read()
    finally:
        writer.kill()
        follower.kill()
    run = the_run(follow_server, project)
    assert run["status"] == "finished" and counts(run) == {"loss": 240, "grad_norm": 240}
    loss = httpx.get(f"{follow_server.url}/api/v1/runs/{run['id']}/metrics/loss/points").json()
    assert loss["steps"] == list(range(240)) and loss["values"][200:] == ["NaN"] * 40
    assert loss["values"][0] == pytest.approx(4.0)
    wait_until(lambda: alerted(receiver, "divergence"))
    (divergence,) = alerted(receiver, "divergence")
    assert divergence["metric"] == "loss" and divergence["start_step"] == 200 and "NaN" in divergence["summary"]


def test_a_tensorboard_logdir_is_followed_with_the_run_folders_that_appear(
    follow_server: ServerProcess, receiver: Receiver, project: str, tmp_path: Path
) -> None:
    pytest.importorskip("torch.utils.tensorboard")
    logdir = tmp_path / "runs"
    writer = start_writer(TENSORBOARD_WRITER, logdir, 200, 0.03)
    follower = start_follow(follow_server, logdir, project, tmp_path, "--pid", str(writer.pid))
    try:
        assert wait_until(lambda: writer.poll() is None and counts(the_run(follow_server, project)).get("train/loss"))
        assert writer.wait(120) == 0
        assert follower.wait(120) == 0, follower.stderr.read()
    finally:
        writer.kill()
        follower.kill()
    run = the_run(follow_server, project)
    assert run["status"] == "finished" and run["config"]["format"] == "tensorboard"
    assert counts(run) == {"train/loss": 200, "train/grad_norm": 200, "eval/loss": 10}
    loss = httpx.get(f"{follow_server.url}/api/v1/runs/{run['id']}/metrics/train/loss/points")
    assert loss.json()["values"][0] == pytest.approx(3.5) and all(t > 1.6e9 for t in loss.json()["times"])
    assert loss.json()["values"][160:] == ["NaN"] * 40
    wait_until(lambda: alerted(receiver, "divergence"))
    (divergence,) = alerted(receiver, "divergence")
    assert divergence["metric"] == "train/loss" and divergence["start_step"] == 160


def test_a_trainer_output_folder_is_followed_from_checkpoint_to_checkpoint(
    follow_server: ServerProcess, project: str, tmp_path: Path
) -> None:
    output = tmp_path / "output"
    output.mkdir()
    writer = start_writer(TRAINER_WRITER, output, 8, 0.5)
    follower = start_follow(follow_server, output, project, tmp_path, "--pid", str(writer.pid))
    try:
        assert wait_until(lambda: writer.poll() is None and counts(the_run(follow_server, project)).get("loss"))
        assert writer.wait(120) == 0
        assert follower.wait(120) == 0, follower.stderr.read()
    finally:
        writer.kill()
        follower.kill()
    run = the_run(follow_server, project)
    assert run["config"]["format"] == "trainer_state" and run["config"]["model_type"] == "gpt2"
    assert counts(run) == {"loss": 40, "grad_norm": 40, "learning_rate": 40, "eval_loss": 8}


def test_a_follower_killed_midway_goes_on_where_it_stopped_into_the_same_run(
    follow_server: ServerProcess, project: str, tmp_path: Path
) -> None:
    path = tmp_path / "metrics.csv"
    writer = start_writer(CSV_WRITER, path, 300, 0.02)
    first = start_follow(follow_server, path, project, tmp_path)
    try:
        wait_until(lambda: counts(the_run(follow_server, project)).get("loss", 0) >= 60)
        first.send_signal(signal.SIGKILL)  # no goodbye: the state file is what it last saved
        first.wait(30)
        assert writer.wait(120) == 0
        second = start_follow(follow_server, path, project, tmp_path, "--idle", "2")
        assert second.wait(120) == 0
        said = second.stderr.read()
    finally:
        writer.kill()
        first.kill()
    run = the_run(follow_server, project)
    assert "going on where it stopped" in said and f"run {run['id']} finished" in said
    sent_again = int(said.rsplit("finished; ", 1)[1].split(" points", 1)[0].replace(",", ""))
    assert sent_again < 2 * 300  # it did not read the file again from its start
    assert counts(run) == {"loss": 300, "grad_norm": 300}
    loss = httpx.get(f"{follow_server.url}/api/v1/runs/{run['id']}/metrics/loss/points").json()
    assert loss["steps"] == list(range(300)) and math.isnan(float(loss["values"][250]))


def test_ctrl_c_leaves_the_run_open_for_the_next_follow(
    follow_server: ServerProcess, project: str, tmp_path: Path
) -> None:
    path = tmp_path / "run.log"
    path.write_text("".join(f"step {s} | loss {2.0 - s / 100} | tok/s 51k\n" for s in range(50)))
    follower = start_follow(follow_server, path, project, tmp_path)
    wait_until(lambda: counts(the_run(follow_server, project)).get("loss") == 50)
    follower.send_signal(signal.SIGINT)
    assert follower.wait(60) == 130
    run = the_run(follow_server, project)
    assert run["status"] == "running" and counts(run) == {"loss": 50, "tok/s": 50}
    with path.open("a") as handle:
        handle.write("step 50 | loss 1.49 | tok/s 52k\n")
    again = start_follow(follow_server, path, project, tmp_path, "--idle", "1")
    assert again.wait(60) == 0
    run = the_run(follow_server, project)
    assert run["status"] == "finished" and counts(run) == {"loss": 51, "tok/s": 51}


def test_a_bad_pattern_is_refused_before_any_run_is_made(
    follow_server: ServerProcess, project: str, tmp_path: Path
) -> None:
    follower = start_follow(follow_server, tmp_path / "x.log", project, tmp_path, "--pattern", r"loss=(?P<loss>\S+)")
    assert follower.wait(60) == 2 and "needs a named group 'step'" in follower.stderr.read()
    assert the_run(follow_server, project) is None


def test_a_path_that_never_appears_leaves_no_run(follow_server: ServerProcess, project: str, tmp_path: Path) -> None:
    follower = start_follow(follow_server, tmp_path / "never.log", project, tmp_path, "--idle", "1")
    assert follower.wait(60) == 0 and "no run was made" in follower.stderr.read()
    assert the_run(follow_server, project) is None


def test_a_job_dying_before_its_first_metrics_line_still_gets_a_crashed_run(
    follow_server: ServerProcess, receiver: Receiver, project: str, tmp_path: Path
) -> None:
    log = tmp_path / "train.log"
    log.write_text('> building model\nTraceback (most recent call last):\n  File "train.py"\nImportError: apex\n')
    follower = start_follow(follow_server, log, project, tmp_path, "--idle", "1")
    assert follower.wait(60) == 0, follower.stderr.read()
    assert the_run(follow_server, project)["status"] == "crashed"
    wait_until(lambda: alerted(receiver, "run_crashed"))


def test_a_log_truncated_and_written_again_is_read_again_from_its_start(
    follow_server: ServerProcess, project: str, tmp_path: Path
) -> None:
    """Issue 47: a job re-run with `> train.log` while no follower ran. The log keeps its inode and
    has grown past the old offset by the time it is followed again: it used to go on from that
    offset (195 of 300 points stored, steps 0-104 lost, nothing said)."""
    path = tmp_path / "train.log"
    path.write_text("".join(f"step {s} | loss 3.0 | tok/s 51k\n" for s in range(1000, 1105)))
    first = start_follow(follow_server, path, project, tmp_path)
    wait_until(lambda: counts(the_run(follow_server, project)).get("loss") == 105)
    first.send_signal(signal.SIGINT)
    assert first.wait(60) == 130
    inode = path.stat().st_ino
    with path.open("w") as handle:  # truncated in place, then the new job's 300 steps
        handle.write("".join(f"step {s} | loss 2.0 | tok/s 50k\n" for s in range(300)))
    assert path.stat().st_ino == inode
    again = start_follow(follow_server, path, project, tmp_path, "--idle", "1")
    assert again.wait(60) == 0
    run = the_run(follow_server, project)
    loss = httpx.get(f"{follow_server.url}/api/v1/runs/{run['id']}/metrics/loss/points").json()
    assert loss["steps"] == [*range(300), *range(1000, 1105)]
    assert counts(run) == {"loss": 405, "tok/s": 405}
    said = again.stderr.read()
    assert said.count("was truncated or replaced; reading it again from the start") == 1, said


def stopped_within(process: subprocess.Popen[str], seconds: float) -> int | None:
    """The exit status, or None when it did not exit in time (then it is killed: the test never hangs)."""
    try:
        return process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(30)
        return None


def test_a_fifo_given_to_follow_is_refused_at_once(follow_server: ServerProcess, project: str, tmp_path: Path) -> None:
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    follower = start_follow(follow_server, fifo, project, tmp_path, "--idle", "1")
    assert stopped_within(follower, 30) == 2  # it used to block in open() for good
    assert "is not a regular file (a FIFO, a device or a socket)" in follower.stderr.read()
    assert the_run(follow_server, project) is None


def test_a_fifo_appearing_at_the_followed_path_is_not_opened_and_sigterm_still_stops(
    follow_server: ServerProcess, project: str, tmp_path: Path
) -> None:
    fifo = tmp_path / "train.log"
    follower = start_follow(follow_server, fifo, project, tmp_path)
    assert "→ run" in follower.stderr.readline()  # following (the path was not there yet)
    os.mkfifo(fifo)
    time.sleep(1.5)  # a few polls (0.3 s): each used to open() the FIFO, and stay there
    follower.send_signal(signal.SIGTERM)
    assert stopped_within(follower, 30) == 130
    assert "is not a regular file (a FIFO, a device or a socket); it is not read" in follower.stderr.read()


def test_a_folder_with_fifos_in_it_is_followed_past_them(
    follow_server: ServerProcess, project: str, tmp_path: Path
) -> None:
    event_file_writer = pytest.importorskip("tensorboard.summary.writer.event_file_writer")
    from tensorboard.compat.proto import event_pb2, summary_pb2

    logdir = tmp_path / "runs"
    logdir.mkdir()
    writer = event_file_writer.EventFileWriter(str(logdir))
    for step in range(20):
        value = summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / (1 + step))
        writer.add_event(event_pb2.Event(step=step, wall_time=1.7e9 + step, summary=summary_pb2.Summary(value=[value])))
    writer.close()
    os.mkfifo(logdir / "train.log")
    os.mkfifo(logdir / "events.out.tfevents.9999999999.fifo")
    follower = start_follow(follow_server, logdir, project, tmp_path, "--idle", "1")
    assert stopped_within(follower, 60) == 0
    assert "events.out.tfevents.9999999999.fifo is not a regular file" in follower.stderr.read()
    assert counts(the_run(follow_server, project)) == {"loss": 20}
