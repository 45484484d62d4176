"""Seeded, labelled synthetic curves for every event kind and metric kind, plus hard healthy ones.

The last group imitates what small real PyTorch trainings show (`holter demo --real`): activation
norms growing several-fold from init, per-layer gradient norms drifting up by half or more,
an activation norm blowing up late, and spike trains a few steps apart.

Each curve is a dict: name, metric, kind, steps, values, label ('healthy' or an event kind),
and where it applies the true spike step, sawtooth period (steps) and expected_floor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Curve = dict[str, Any]


def _steps(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    every = int(rng.choice([1, 1, 1, 5, 10]))
    return np.arange(1, n + 1) * every, every


def _loss_shape(rng: np.random.Generator, n: int) -> np.ndarray:
    start = float(rng.choice([10.8, 10.4, 2.2]))
    floor = start * rng.uniform(0.25, 0.45)
    t = np.arange(n)
    tau = n * rng.uniform(0.03, 0.12)
    return floor + (start - floor) * (0.6 * np.exp(-t / tau) + 0.4 / (1 + t / (3 * tau)))


def _noise(rng: np.random.Generator, n: int, sigma: float, heavy: bool = False) -> np.ndarray:
    return sigma * (rng.standard_t(6, n) / 1.2 if heavy else rng.normal(size=n))


def healthy_loss(rng, n=None, **_):
    n = n or int(rng.integers(300, 3000))
    y = _loss_shape(rng, n)
    y = y + _noise(rng, n, y * rng.uniform(0.005, 0.02), heavy=rng.random() < 0.5)
    return y


def healthy(rng: np.random.Generator, kind: str, n: int | None = None) -> np.ndarray:
    """A healthy curve of `kind`."""
    n = n or int(rng.integers(300, 3000))
    t = np.arange(n)
    if kind in ("loss", "eval_loss"):
        return healthy_loss(rng, n)
    if kind == "grad_norm":
        level = 0.3 + 4.0 * np.exp(-t / (n * 0.02)) + rng.uniform(0, 0.3) * t / n
        return level * np.exp(_noise(rng, n, 0.08))
    if kind == "activation_norm":
        level = 10 + 4 * (1 - np.exp(-t / (n * 0.3)))
        return level * (1 + _noise(rng, n, 0.01))
    if kind == "logprob_mismatch":
        return np.abs(rng.normal(0.004, 0.002, n))
    if kind == "throughput":
        return 52000 * (1 + _noise(rng, n, 0.02))
    if kind == "step_time":
        return 170 * (1 + _noise(rng, n, 0.02))
    raise ValueError(kind)


METRIC_NAMES = {
    "loss": ["loss", "train/loss", "train_loss"],
    "eval_loss": ["eval_loss", "val_loss"],
    "grad_norm": ["grad_norm", "grad_norm/layer.3", "train/grad_norm"],
    "activation_norm": ["act_norm/layer.11", "activation_rms"],
    "logprob_mismatch": [
        "sampling/sampling_logp_difference/mean",
        "training/rollout_probs_diff_mean",
        "train_rollout_logprob_abs_diff",
        "vllm_kl",
    ],
    "throughput": ["tokens_per_s", "samples_per_second"],
    "step_time": ["step_time", "step_time_ms"],
}


def _curve(rng, kind, values, steps, label, **extra) -> Curve:
    return {
        "metric": str(rng.choice(METRIC_NAMES[kind])),
        "kind": kind,
        "steps": steps,
        "values": values,
        "label": label,
        **extra,
    }


# -- anomalies ---------------------------------------------------------------------------------


def spike(rng, kind):
    n = int(rng.integers(300, 2500))
    steps, _ = _steps(rng, n)
    y = healthy(rng, kind, n)
    at = int(rng.integers(int(0.3 * n), int(0.9 * n)))
    width = int(rng.integers(1, 4))
    local = np.median(y[at - 30 : at])
    if kind == "logprob_mismatch":
        y[at : at + width] = rng.uniform(0.08, 0.3)
    elif kind == "throughput":
        y[at : at + width] = local * rng.uniform(0.2, 0.6)
    else:
        y[at : at + width] = local * rng.uniform(1.4, 3.0) if kind in ("loss",) else local * rng.uniform(2.5, 8)
    return _curve(rng, kind, y, steps, "spike", spike_step=int(steps[at]))


def divergence(rng, kind):
    n = int(rng.integers(300, 2500))
    steps, _ = _steps(rng, n)
    y = healthy(rng, kind, n)
    at = int(rng.integers(int(0.3 * n), int(0.8 * n)))
    mode = rng.choice(["blowup", "nan", "inf"]) if kind in ("loss", "grad_norm") else "blowup"
    if kind == "eval_loss":
        n = int(rng.integers(20, 80))
        steps = np.arange(1, n + 1) * int(rng.choice([100, 250, 401]))
        t = np.arange(n) / n
        turn = rng.uniform(0.15, 0.4)
        y = 1.2 + 2.5 * np.exp(-t / 0.05) + np.where(t > turn, (t - turn) * rng.uniform(2, 4), 0)
        y = y + rng.normal(0, 0.03, n)
        return _curve(rng, kind, y, steps, "divergence")
    if mode == "nan":
        y[at:] = np.nan
    elif mode == "inf":
        y[at] = np.inf
        y[at + 1 :] = np.nan
    else:
        ramp = np.arange(n - at)
        growth = rng.uniform(0.01, 0.05)
        y[at:] = y[at:] * np.exp(np.minimum(growth * ramp, 6))
    return _curve(rng, kind, y, steps, "divergence")


def plateau(rng, kind):
    n = int(rng.integers(200, 2000))
    steps, _ = _steps(rng, n)
    if kind == "loss":
        if rng.random() < 0.5:  # nothing learns from step zero
            start = float(rng.choice([10.8, 10.4, 2.2]))
            y = start + rng.normal(0, start * 0.005, n)
        else:  # frozen value mid-run
            y = healthy(rng, kind, n)
            at = int(rng.integers(int(0.3 * n), int(0.7 * n)))
            y[at:] = round(float(y[at]), 4)
        return _curve(rng, kind, y, steps, "plateau")
    y = healthy(rng, kind, n)
    at = int(rng.integers(0, int(0.7 * n)))
    y[at:] = 0.0
    return _curve(rng, kind, y, steps, "plateau")


def sawtooth(rng, kind):
    n = int(rng.integers(1200, 3000))
    steps, every = _steps(rng, n)
    y = healthy(rng, kind, n)
    if kind in ("loss",):
        period = int(rng.integers(40, 250))
        phase = (np.arange(n) % period) / period
        y = y * (1 + rng.uniform(0.04, 0.1) * (phase - 0.5))
    else:
        period = int(rng.integers(12, 200))
        first = int(rng.integers(0, period))
        for at in range(first + period, n, period):
            local = np.median(y[max(0, at - 30) : at])
            if kind == "logprob_mismatch":
                y[at] = rng.uniform(0.08, 0.15)
            elif kind == "throughput":
                y[at] = local * 0.4
            else:
                y[at] = local * rng.uniform(1.8, 2.5)
    return _curve(rng, kind, y, steps, "sawtooth", period=float(period * every))


def too_good(rng, kind):
    n = int(rng.integers(300, 2500))
    steps, _ = _steps(rng, n)
    t = np.arange(n)
    if rng.random() < 0.5:
        start, floor = 10.8, rng.uniform(0.01, 0.05)
        y = floor + (start - floor) * np.exp(-t / (n * 0.1))
        y = y * (1 + rng.normal(0, 0.02, n))
        return _curve(rng, kind, y, steps, "too_good")
    y = healthy(rng, kind, n)
    expected = float(np.median(y[-50:]) * rng.uniform(1.4, 2.0))
    return _curve(rng, kind, y, steps, "too_good", expected_floor=expected)


def level_shift(rng, kind):
    n = int(rng.integers(300, 2500))
    steps, _ = _steps(rng, n)
    y = healthy(rng, kind, n)
    at = int(rng.integers(int(0.3 * n), int(0.8 * n)))
    if kind == "throughput":
        y[at:] *= rng.uniform(0.4, 0.75)
    elif kind == "step_time":
        y[at:] *= rng.uniform(1.3, 2.0)
    elif kind == "logprob_mismatch":
        y[at:] += rng.uniform(0.06, 0.2)
    else:
        y[at:] *= rng.uniform(2.0, 3.0)
    return _curve(rng, kind, y, steps, "level_shift", shift_step=int(steps[at]))


# -- hard healthy cases ------------------------------------------------------------------------


def healthy_case(rng, kind):
    n = int(rng.integers(300, 3000))
    case = str(rng.choice(["plain", "warmup_bump", "cooldown", "noisy", "short", "sparse", "drift"]))
    if case == "short":
        n = int(rng.integers(10, 60))
    steps, _ = _steps(rng, n)
    if case == "sparse":
        steps = np.arange(1, n + 1) * int(rng.choice([15, 50, 100]))
    y = healthy(rng, kind, n)
    t = np.arange(n)
    if case == "warmup_bump" and kind in ("loss", "eval_loss"):
        at = int(n * 0.05)
        y = y * (1 + 0.08 * np.exp(-(((t - at) / max(2, n * 0.01)) ** 2)))
    elif case == "warmup_bump" and kind == "grad_norm":
        y = y * (1 + 1.5 * np.exp(-(((t - n * 0.05) / (n * 0.02)) ** 2)))
    elif case == "cooldown" and kind in ("loss", "eval_loss"):
        at = int(n * 0.8)
        y[at:] *= 1 - 0.08 * (t[at:] - at) / (n - at)
    elif case == "noisy":
        y = y + _noise(rng, n, np.abs(np.median(y)) * 0.04, heavy=True) * (kind != "logprob_mismatch")
        y = np.abs(y) if kind != "loss" else y
    elif case == "drift" and kind == "grad_norm":
        y = y * (1 + 1.5 * t / n)
    return _curve(rng, kind, y, steps, "healthy", case=case)


# -- shapes seen on real small PyTorch trainings (`holter demo --real`) ---------------------------


def _norm_steps(rng):
    n = int(rng.integers(100, 1500))
    every = int(rng.choice([1, 5, 5, 10]))
    return n, np.arange(n) * every, every


def _init_growth(rng, n, every):
    """Activation RMS growing 3-6x from its initialisation in the first ~50 steps, then bounded
    (with the slow, log-like growth of a head's logits on some layers)."""
    t = np.arange(n) * every
    start = rng.uniform(0.5, 1.5)
    growth = rng.uniform(3.0, 6.0)
    tau = rng.uniform(8, 25) if rng.random() < 0.5 else rng.uniform(15, 60)
    if rng.random() < 0.5:  # saturating
        level = start * (1 + (growth - 1) * (1 - np.exp(-t / tau)))
    else:  # log-like, as the output head's RMS
        level = start * (1 + (growth - 1) * np.log1p(t / tau) / np.log1p(t[-1] / tau))
    return level * (1 + _noise(rng, n, rng.uniform(0.005, 0.02)))


def healthy_real_like(rng, kind):
    n, steps, every = _norm_steps(rng)
    if kind == "activation_norm":
        return _curve(rng, kind, _init_growth(rng, n, every), steps, "healthy", case="init_growth")
    # per-layer gradient norm: falls from init, then rises by half to three-fold over tens of
    # points as the layer starts to learn, and eases back or drifts slowly
    t = np.arange(n)
    rise_at, rise_len = rng.uniform(5, 20), rng.uniform(20, 60)
    amount = rng.uniform(0.5, 2.0)
    ease = rng.uniform(0.0, 0.8)
    up = amount / (1 + np.exp(-(t - rise_at - rise_len / 2) / (rise_len / 6)))
    down = ease * amount * np.clip((t - rise_at - rise_len) / max(n - rise_at - rise_len, 1), 0, 1)
    level = rng.uniform(0.02, 0.5) * (1 + 0.6 * np.exp(-t / 4) + up - down)
    values = level * np.exp(_noise(rng, n, rng.uniform(0.08, 0.15)))
    return _curve(rng, kind, values, steps, "healthy", case="layer_drift")


def divergence_real_like(rng, kind):
    """An activation norm (after its healthy growth from init) growing ~8x in the last quarter."""
    n, steps, every = _norm_steps(rng)
    n = max(n, 120)
    steps = np.arange(n) * every
    values = _init_growth(rng, n, every)
    at = int(n * rng.uniform(0.7, 0.8))
    values[at:] *= np.exp(np.log(rng.uniform(6, 10)) * np.arange(n - at) / (n - at))
    return _curve(rng, kind, values, steps, "divergence", case="late_growth")


def short_period_spikes(rng, kind):
    """Spikes every 3-8 points: the logprob mismatch every `rollouts_num` steps, a slow step."""
    n = int(rng.integers(200, 1500))
    steps, every = _steps(rng, n)
    y = healthy(rng, kind, n)
    period = int(rng.integers(3, 9))
    first = int(rng.integers(int(0.2 * n), int(0.6 * n)))
    last = min(n, first + period * int(rng.integers(8, 40)))
    for at in range(first, last, period):
        y[at] = rng.uniform(0.08, 0.15) if kind == "logprob_mismatch" else y[at] * rng.uniform(1.8, 2.5)
    return _curve(rng, kind, y, steps, "sawtooth", period=float(period * every), case="short_period")


REAL_LIKE: tuple[tuple[Callable, str, int], ...] = (
    (healthy_real_like, "activation_norm", 20),
    (healthy_real_like, "grad_norm", 20),
    (divergence_real_like, "activation_norm", 10),
    (short_period_spikes, "logprob_mismatch", 5),
    (short_period_spikes, "step_time", 5),
)


GENERATORS: dict[str, tuple[Callable, tuple[str, ...]]] = {
    "spike": (spike, ("loss", "grad_norm", "activation_norm", "logprob_mismatch", "throughput")),
    "divergence": (divergence, ("loss", "eval_loss", "grad_norm", "activation_norm")),
    "plateau": (plateau, ("loss", "grad_norm")),
    "sawtooth": (sawtooth, ("loss", "grad_norm", "logprob_mismatch", "step_time", "throughput")),
    "too_good": (too_good, ("loss",)),
    "level_shift": (level_shift, ("grad_norm", "logprob_mismatch", "throughput", "step_time")),
}
HEALTHY_KINDS = ("loss", "eval_loss", "grad_norm", "activation_norm", "logprob_mismatch", "throughput", "step_time")


def make_corpus(seed: int, per_class: int = 40, healthy_per_kind: int = 30) -> list[Curve]:
    """`per_class` curves of each anomaly (spread over metric kinds) and healthy ones of each kind."""
    rng = np.random.default_rng(seed)
    curves: list[Curve] = []
    for _label, (make, kinds) in GENERATORS.items():
        for i in range(per_class):
            curves.append(make(rng, kinds[i % len(kinds)]))
    for kind in HEALTHY_KINDS:
        for _ in range(healthy_per_kind):
            curves.append(healthy_case(rng, kind))
    # drawn from their own stream, so the curves above stay what they were
    extra = np.random.default_rng([seed, 1])
    for make, kind, count in REAL_LIKE:
        for _ in range(count * per_class // 40 or count):
            curves.append(make(extra, kind))
    for i, c in enumerate(curves):
        c["name"] = f"{c['label']}-{c['kind']}-{i}"
        c["steps"] = np.asarray(c["steps"], dtype=np.int64)
        c["values"] = np.asarray(c["values"], dtype=float)
    return curves
