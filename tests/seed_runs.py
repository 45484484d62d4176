"""Runs with a known seed spread, posted to a real service: the arms of the compare tests."""

from __future__ import annotations

import uuid
import zlib

import httpx
import numpy as np

STEPS = np.arange(0, 5_001, 50)
OFFSETS = (-0.006, 0.001, 0.006)  # three seeds 0.012 apart: a known seed spread


def post_run(
    api: httpx.Client, project: str, config: dict, shift: float, offset: float, *, tokens_per_step: int = 1000
) -> str:
    """A finished run of eval_loss falling to ~2, moved by `shift` (the effect) and `offset` (its
    seed), with a little point noise (fixed per arm and seed), and a num_tokens counter."""
    run_id = f"c{uuid.uuid4().hex[:12]}"
    api.post("/runs", json={"id": run_id, "project": project, "name": run_id, "config": config}).raise_for_status()
    # the same noise every time for the same arm and seed, and another for every other: the band
    # and the verdicts the tests expect do not depend on the luck of a draw
    rng = np.random.default_rng(zlib.crc32(repr((round(shift, 6), round(offset, 6), tokens_per_step)).encode()))
    loss = 2 + 3 * np.exp(-STEPS / 1000) + shift + offset + rng.normal(0, 0.001, len(STEPS))
    metrics = {
        "eval_loss": {"steps": STEPS.tolist(), "values": loss.tolist()},
        "num_tokens": {"steps": STEPS.tolist(), "values": (STEPS * float(tokens_per_step)).tolist()},
    }
    api.post(f"/runs/{run_id}/points", json={"metrics": metrics}).raise_for_status()
    api.post(f"/runs/{run_id}/finish", json={"status": "finished"}).raise_for_status()
    return run_id
