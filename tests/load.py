"""Simulated training jobs for load and fault runs: each logs `metrics` metrics at `rate` steps
per second, sending one columnar batch a second like the client does, and times each request."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import httpx


@dataclass
class JobResult:
    run_id: str
    points_sent: int = 0
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)


async def training_job(
    client: httpx.AsyncClient, run_id: str, *, metrics: int, rate: float, seconds: float, project: str = "load"
) -> JobResult:
    """Create the run, then every second post the steps that elapsed; retry a failed batch."""
    result = JobResult(run_id)
    names = [f"metric_{i:02d}" for i in range(metrics)]
    answer = await client.post("/runs", json={"id": run_id, "project": project})
    answer.raise_for_status()
    started, step = time.monotonic(), 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate)
        steps = list(range(step, due))
        step = due
        if steps:
            body = {
                "metrics": {
                    name: {"steps": steps, "values": [s * 0.001 + i for s in steps]} for i, name in enumerate(names)
                }
            }
            while True:
                sent = time.perf_counter()
                try:
                    response = await client.post(f"/runs/{run_id}/points", json=body)
                    if response.status_code == 200:
                        result.latencies.append(time.perf_counter() - sent)
                        result.points_sent += len(steps) * metrics
                        break
                    result.errors.append(f"HTTP {response.status_code}: {response.text[:100]}")
                except httpx.HTTPError as exc:
                    result.errors.append(repr(exc))
                await asyncio.sleep(0.5)  # the service is away or failing: try the same batch again
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started) % 1.0))
    return result


async def run_jobs(
    base_url: str, *, jobs: int, metrics: int, rate: float, seconds: float, prefix: str
) -> list[JobResult]:
    limits = httpx.Limits(max_connections=jobs, max_keepalive_connections=jobs)
    async with httpx.AsyncClient(base_url=f"{base_url}/api/v1", timeout=60, limits=limits) as client:
        return await asyncio.gather(
            *(
                training_job(client, f"{prefix}-{i:03d}", metrics=metrics, rate=rate, seconds=seconds)
                for i in range(jobs)
            )
        )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] if ordered else float("nan")


def rss_mb(pid: int) -> float:
    """Resident memory of a process, in MB (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
