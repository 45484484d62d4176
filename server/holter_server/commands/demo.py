"""`holter demo`: start the service if none answers, then stream a synthetic run into it."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import holter
from holter.run import DEFAULT_URL
from holter_server.demo.synthetic import SyntheticRun


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
    command = [sys.executable, "-m", "holter.cli", "serve", "--host", parts.hostname or "127.0.0.1", "--port", str(parts.port or 80)]
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
    )
    print(f"streaming run {run.id} ({steps} steps at {rate:g} steps/s): {url}/api/v1/runs/{run.id}", flush=True)
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


def run(args: argparse.Namespace) -> int:
    url = (args.url or os.environ.get("HOLTER_URL") or DEFAULT_URL).rstrip("/")
    child = None if service_is_up(url) else start_service(url, args.database_url)
    print(f"Holter is running at {url}", flush=True)
    try:
        finished = stream(url, args.project, args.steps, args.rate)
        print(f"run {finished.id} finished; read it at {url}/api/v1/runs/{finished.id}", flush=True)
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
