"""`holter demo`: start the service if none answers, then stream runs into it.

`--real` (the default when torch is installed) trains a tiny transformer on CPU in eight ways,
each showing one diagnosis (`holter.demo.real`); `--synthetic` streams one generated run
with planted problems (`holter.demo.synthetic`). The demo is a client of the service like any
training job: it starts `holter serve` as a process of its own, streams through `holter.init`,
and prints the service's reading of each run as `POST /runs/{id}/analyze` answers it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import holter
from holter.demo.synthetic import SyntheticRun
from holter.run import DEFAULT_URL


def service_url(given: str | None) -> str:
    """The `--url` given, else $HOLTER_URL, else the default local address; no trailing slash."""
    return (given or os.environ.get("HOLTER_URL") or DEFAULT_URL).rstrip("/")


def service_is_up(url: str, timeout: float = 1.0) -> bool:
    """True when a Holter service answers its health check at `url`."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/health", timeout=timeout) as response:
            return json.load(response).get("status") == "ok"
    except (OSError, ValueError):
        return False


def start_service(url: str, database_url: str | None) -> subprocess.Popen[bytes]:
    """Start `holter serve` for `url` in a child process and wait until it answers."""
    parts = urllib.parse.urlsplit(url)
    command = [
        sys.executable,
        "-m",
        "holter.cli",
        "serve",
        "--host",
        parts.hostname or "127.0.0.1",
        "--port",
        str(parts.port or 80),
    ]
    if database_url:
        command += ["--db", database_url]
    child = subprocess.Popen(command)
    deadline = time.monotonic() + 60
    while not service_is_up(url):
        if child.poll() is not None:
            raise SystemExit(f"holter demo: the service exited with code {child.returncode}")
        if time.monotonic() > deadline:
            child.terminate()
            raise SystemExit("holter demo: the service did not answer within 60 s")
        time.sleep(0.2)
    return child


def stream(url: str, project: str, steps: int, rate: float) -> holter.Run:
    """Log a synthetic run of `steps` steps at `rate` steps per second."""
    synthetic = SyntheticRun(steps, seed=int(time.time()))
    run = holter.init(
        project=project,
        name=time.strftime("synthetic-%H%M%S"),
        config={"model": "gpt2-124m", "lr": 3e-4, "batch_size": 64, "rollouts_num": 64, "source": "holter demo"},
        tags=["demo"],
        url=url,
        quiet=True,
    )
    print(f"streaming run {run.id} ({steps} steps at {rate:g} steps/s): {run.page_url}", flush=True)
    started = time.monotonic()
    try:
        for step in range(steps):
            run.log(synthetic.metrics(step), step=step)
            if step % 100 == 0:
                run.log({"eval_loss": synthetic.eval_loss(step)}, step=step)
            if step % 1000 == 0 and step:
                print(f"  step {step:,}", flush=True)
            lag = started + (step + 1) / rate - time.monotonic()
            if lag > 0:
                time.sleep(lag)
    except KeyboardInterrupt:
        run.finish("crashed")
        raise
    run.finish()
    return run


# The series whose diagnosis the real demo prints for each run.
HEADLINE_METRICS = (
    "loss",
    "eval_loss",
    "holter/grad_norm",
    "logprob_mismatch/abs_diff_mean",
    "holter/loader/wait_fraction",
)


def stream_real(url: str, project: str, names: list[str] | None) -> None:
    """Train each real scenario in turn, streaming it, and print the diagnosis of its headline series."""
    import torch

    from holter.demo import real

    # A model this small runs no faster on more threads, and several threads spinning against
    # other work on a busy machine run it many times slower.
    torch.set_num_threads(1)
    corpus = real.Corpus.generate()
    for scenario in real.scenarios(names):
        print(f"training {scenario.name} ({scenario.steps} steps): {scenario.description}", flush=True)
        recorder = real.stream_scenario(scenario, url=url, project=project, corpus=corpus)
        print(f"  run {recorder.run.id}: {recorder.run.page_url} (expected: {scenario.expected})", flush=True)
        readings = service_readings(url, recorder.run.id)
        for metric in HEADLINE_METRICS:
            if metric not in recorder.series or metric not in readings:
                continue
            reading = readings[metric]
            kinds = ", ".join(sorted({e["kind"] for e in reading["events"] if e["severity"] != "info"}))
            print(f"  {metric}: {reading['verdict']}{f' ({kinds})' if kinds else ''}", flush=True)
        if scenario.finding:
            found = service_event(url, recorder.run.id, scenario.finding)
            print(f"  {scenario.finding}: {found['summary'] if found else 'not raised within 30 s'}", flush=True)


def service_readings(url: str, run_id: str) -> dict[str, dict[str, Any]]:
    """The service's reading of each series of the run (`POST /runs/{id}/analyze`), by metric;
    empty, said on stderr, when it cannot be read."""
    request = urllib.request.Request(f"{url.rstrip('/')}/api/v1/runs/{run_id}/analyze", method="POST", headers=_auth())
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return {series["metric"]: series for series in json.load(response).get("series") or []}
    except (OSError, ValueError) as exc:
        print(f"  the service's reading of run {run_id} could not be read ({exc})", file=sys.stderr, flush=True)
        return {}


def _auth() -> dict[str, str]:
    key = os.environ.get("HOLTER_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def service_event(url: str, run_id: str, kind: str, timeout: float = 30.0) -> dict[str, Any] | None:
    """The first event of `kind` the service raised on the run, waiting for live detection to get there."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(
                f"{url.rstrip('/')}/api/v1/runs/{run_id}/events?kind={kind}", timeout=5
            ) as response:
                events = json.load(response)["data"]
        except (OSError, ValueError):
            events = []
        if events or time.monotonic() > deadline:
            return events[-1] if events else None
        time.sleep(0.5)


def torch_available() -> bool:
    """Whether the real demo can run here."""
    return importlib.util.find_spec("torch") is not None


def run(args: argparse.Namespace) -> int:
    url = service_url(args.url)
    real = args.mode == "real" or (args.mode is None and torch_available())
    if real and not torch_available():
        print("holter demo --real needs PyTorch: pip install 'holter[torch]' (or use --synthetic)", file=sys.stderr)
        return 2
    child = None if service_is_up(url) else start_service(url, args.database_url)
    print(f"Holter is running at {url} (the dashboard; API docs at {url}/docs)", flush=True)
    try:
        if real:
            stream_real(url, args.project, args.scenario)
        else:
            finished = stream(url, args.project, args.steps, args.rate)
            print(f"run {finished.id} finished; see it at {finished.page_url}", flush=True)
        if child is not None:
            print("the service keeps running; press Ctrl-C to stop it", flush=True)
            child.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if child is not None and child.poll() is None:
            child.terminate()
            child.wait(10)
    return 0
