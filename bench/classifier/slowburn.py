"""Failures that creep, and the healthy curves that look like them: seeded families for the
slow-burn table of `run.py`, and how a tool's reading of them is scored.

Each failure family draws curves whose failure has a *course*: it begins at `onset` and runs to
`course_end` (the end of the run, or the step where the drift stops and the metric stays where it
got to). A tool names the failure when it raises an alarm (warning or critical) of a kind that
says "this is going the wrong way" (see `NAMING_KINDS`) on a window that reaches into the course.
It is read three times: on the points up to a quarter of the way through the course, up to
half-way, and on the whole curve; a live detector that gives the same events as a batch analysis
of the same points (Holter's does) names it then at the latest.

Two variants, so that nothing is tuned to one generator:
* the tuning variant (seed 1): Gaussian and Student-t noise, linear / convex / concave rises,
  exponential-and-power decays, logging every 1-10 steps;
* the held-out variant (every other seed): other decay laws (stretched exponential, power law
  with an offset), rises shaped as a logistic, a staircase and a rise that stops part-way
  (then holds), autocorrelated (AR(1)) noise on top of white noise, other cadences (every 3, 4,
  20, 25 steps) and lengths up to 20,000 points, and healthy shapes drawn with other parameters.
Holter's thresholds were chosen on the tuning variant only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Curve = dict[str, Any]

# A tool names a slow failure with one of these kinds (Holter's; the peers' findings are mapped
# onto Holter's kinds by peers.py): the metric is going the wrong way and did not come back.
NAMING_KINDS = frozenset(
    {
        "divergence",
        "level_shift",
        "overfitting",
        "systems_slowdown",
        "mismatch_off_zero",
        "activation_growth",
        "drift_together",
        "norm_growth",
    }
)


# -- shared pieces -----------------------------------------------------------------------------


def _cadence(rng: np.random.Generator, held_out: bool, sparse: bool = False) -> int:
    if sparse:
        return int(rng.choice([20, 25, 40, 60]) if held_out else rng.choice([25, 50, 100]))
    return int(rng.choice([1, 1, 3, 4, 20]) if held_out else rng.choice([1, 1, 2, 5, 10]))


def _length(rng: np.random.Generator, held_out: bool) -> int:
    """Points in a dense run: 1,000 to 10,000 (to 20,000 held out), log-uniform."""
    top = 20_000 if held_out else 10_000
    return int(np.exp(rng.uniform(np.log(1000), np.log(top))))


def _noise(rng: np.random.Generator, n: int, held_out: bool) -> np.ndarray:
    """Unit-scale noise: Gaussian or heavy-tailed; held out, with an autocorrelated part."""
    white = rng.standard_t(int(rng.integers(3, 8)), n) / 1.3 if rng.random() < 0.5 else rng.normal(size=n)
    if not held_out:
        return white
    phi = rng.uniform(0.3, 0.8)
    shocks = rng.normal(size=n)
    ar = np.empty(n)
    ar[0] = shocks[0]
    for i in range(1, n):
        ar[i] = phi * ar[i - 1] + np.sqrt(1 - phi**2) * shocks[i]
    share = rng.uniform(0.2, 0.5)
    return np.sqrt(1 - share) * white + np.sqrt(share) * ar


def _decay(rng: np.random.Generator, t: np.ndarray, held_out: bool) -> np.ndarray:
    """A healthy loss, 0..1 of the run: a steep drop bending into a slowly falling tail."""
    start = float(rng.choice([10.8, 10.4, 7.0, 2.4]))
    floor = start * rng.uniform(0.2, 0.45)
    if held_out:
        if rng.random() < 0.5:
            tau = rng.uniform(0.01, 0.08)
            beta = rng.uniform(0.4, 0.8)
            return floor + (start - floor) * np.exp(-((t / tau) ** beta))
        alpha = rng.uniform(0.3, 0.9)
        t0 = rng.uniform(0.005, 0.03)
        return floor + (start - floor) * (t0 / (t + t0)) ** alpha
    tau = rng.uniform(0.03, 0.12)
    return floor + (start - floor) * (0.6 * np.exp(-t / tau) + 0.4 / (1 + t / (3 * tau)))


def _rise(rng: np.random.Generator, u: np.ndarray, held_out: bool) -> tuple[np.ndarray, str, float]:
    """The shape of a drift over its course (0 at the onset, 1 at the end of the run), its name,
    and where it stops (the share of the run's remainder after which it holds; 1 = never)."""
    u = np.clip(u, 0, 1)
    if held_out:
        shape = str(rng.choice(["logistic", "staircase", "stops", "linear"]))
        if shape == "logistic":
            mid, width = rng.uniform(0.3, 0.6), rng.uniform(0.08, 0.2)
            lo, hi = 1 / (1 + np.exp(mid / width)), 1 / (1 + np.exp(-(1 - mid) / width))
            return (1 / (1 + np.exp(-(u - mid) / width)) - lo) / (hi - lo), shape, 1.0
        if shape == "staircase":
            # stairs: each a quick climb over a fifth of its width, then a hold
            count = int(rng.integers(4, 9))
            stair = np.minimum(np.floor(u * count), count - 1)
            return (stair + np.clip((u * count - stair) / 0.2, 0, 1)) / count, shape, 1.0
        if shape == "stops":
            stop = rng.uniform(0.6, 0.85)
            return np.minimum(u / stop, 1.0), shape, stop
        return u, shape, 1.0
    shape = str(rng.choice(["linear", "convex", "concave"]))
    if shape == "convex":
        k = rng.uniform(1.5, 3.0)
        return (np.exp(k * u) - 1) / (np.exp(k) - 1), shape, 1.0
    if shape == "concave":
        return np.sqrt(u), shape, 1.0
    return u, shape, 1.0


def _course(steps: np.ndarray, onset_at: int, stop: float) -> tuple[int, int]:
    """(onset step, course end step): the drift runs from `onset_at` to `stop` of the remainder."""
    end_at = onset_at + round(stop * (len(steps) - 1 - onset_at))
    return int(steps[onset_at]), int(steps[min(end_at, len(steps) - 1)])


def _curve(kind: str, metric: str, steps: np.ndarray, values: np.ndarray, family: str, **extra: Any) -> Curve:
    return {
        "metric": metric,
        "kind": kind,
        "steps": np.asarray(steps, dtype=np.int64),
        "values": np.asarray(values, dtype=float),
        "family": family,
        **extra,
    }


def _failure(kind, metric, steps, values, family, onset, course_end, size, shape) -> Curve:
    return _curve(
        kind, metric, steps, values, family, label="slow", onset=onset, course_end=course_end, size=size, shape=shape
    )


# -- failures that creep -----------------------------------------------------------------------


def loss_creep(rng: np.random.Generator, held_out: bool, sparse: bool = False) -> Curve:
    """A train loss that turns and climbs 8-45% above its best over the last 20-55% of the run."""
    n = int(rng.integers(100, 400)) if sparse else _length(rng, held_out)
    every = _cadence(rng, held_out, sparse)
    steps = np.arange(1, n + 1) * every
    t = np.arange(n) / n
    base = _decay(rng, t, held_out)
    onset_at = int(n * rng.uniform(0.45, 0.8))
    u = (np.arange(n) - onset_at) / (n - 1 - onset_at)
    r, shape, stop = _rise(rng, u, held_out)
    rise = rng.uniform(0.08, 0.45)
    best = float(base[onset_at])
    factor = (1 + rise) * best / float(base[-1]) - 1
    level = base * (1 + factor * r)
    # noise: at least 6 noise sigmas over the course (most far more)
    rel = min(rng.uniform(0.003, 0.03), rise * best / 6 / float(np.median(level)))
    values = level * (1 + rel * _noise(rng, n, held_out))
    onset, end = _course(steps, onset_at, stop)
    return _failure(
        "loss", "train/loss", steps, values, "loss creep" + (" (sparse)" if sparse else ""), onset, end, rise, shape
    )


def eval_turn_up(rng: np.random.Generator, held_out: bool, few: bool = False) -> Curve:
    """An eval loss, 15-80 evals (7-14 with `few`), turning up 5-50% from its best."""
    n = int(rng.integers(7, 15)) if few else int(rng.integers(15, 81))
    every = int(rng.choice([150, 200, 400, 1000]) if held_out else rng.choice([100, 250, 500]))
    steps = np.arange(1, n + 1) * every
    t = np.arange(n) / n
    base = _decay(rng, t * (0.3 if few else 1.0) + (0.05 if few else 0.0), held_out)
    # few: the turn spans the last 5-9 evals (4-8 of them up), the "rising 45% over 5 evals"
    onset_at = n - int(rng.integers(5, 10)) if few else int(n * rng.uniform(0.25, 0.7))
    onset_at = max(onset_at, 2)
    u = (np.arange(n) - onset_at) / (n - 1 - onset_at)
    r, shape, stop = _rise(rng, u, held_out) if not few else (np.clip(u, 0, 1), "linear", 1.0)
    rise = rng.uniform(0.1, 0.5) if few else rng.uniform(0.05, 0.5)
    best = float(base[onset_at])
    factor = (1 + rise) * best / float(base[-1]) - 1
    level = base * (1 + factor * r)
    rel = min(rng.uniform(0.001, 0.01), rise * best / 6 / float(np.median(level)))
    values = level * (1 + rel * rng.normal(size=n))
    onset, end = _course(steps, onset_at, stop)
    family = "eval loss turning up" + (" (7-14 evals)" if few else "")
    return _failure("eval_loss", "eval/loss", steps, values, family, onset, end, rise, shape)


def _timing(rng: np.random.Generator, held_out: bool, kind: str) -> tuple[np.ndarray, np.ndarray, str, float]:
    """A healthy throughput or step time: level, noise, warm-up and periodic eval pauses."""
    n = _length(rng, held_out)
    every = _cadence(rng, held_out)
    steps = np.arange(1, n + 1) * every
    if kind == "throughput":
        metric = str(rng.choice(["tokens_per_s", "samples_per_second", "mfu"]))
        level = {
            "tokens_per_s": rng.uniform(2e3, 3e5),
            "samples_per_second": rng.uniform(5, 400),
            "mfu": rng.uniform(0.2, 0.55),
        }[metric]
    else:
        metric = str(rng.choice(["step_time", "step_time_ms", "iteration_time"]))
        level = rng.uniform(0.1, 3.0) if metric != "step_time_ms" else rng.uniform(80, 2500)
    rel = rng.uniform(0.005, 0.04)
    values = level * (1 + rel * _noise(rng, n, held_out))
    return steps, values, metric, level


def _with_pauses(rng: np.random.Generator, steps: np.ndarray, values: np.ndarray, direction: int) -> np.ndarray:
    """Every eval/checkpoint (every 200-2,000 steps) one slow step: a dip in throughput, a peak in step time."""
    if rng.random() < 0.5:
        return values
    period = int(rng.choice([200, 500, 1000, 2000]))
    slow = (steps % period) < (steps[1] - steps[0] if len(steps) > 1 else 1)
    factor = rng.uniform(1.5, 3.0)
    out = values.copy()
    out[slow] = out[slow] / factor if direction < 0 else out[slow] * factor
    return out


def throughput_bleed(rng: np.random.Generator, held_out: bool) -> Curve:
    """Throughput (tokens/s, samples/s, MFU) falling 15-50%, from a point on, to the end."""
    steps, values, metric, _ = _timing(rng, held_out, "throughput")
    n = len(steps)
    onset_at = int(n * rng.uniform(0.3, 0.8))
    u = (np.arange(n) - onset_at) / (n - 1 - onset_at)
    r, shape, stop = _rise(rng, u, held_out) if held_out else (np.clip(u, 0, 1), "linear", 1.0)
    fall = rng.uniform(0.15, 0.5)
    values = _with_pauses(rng, steps, values * (1 - fall * r), -1)
    onset, end = _course(steps, onset_at, stop)
    return _failure("throughput", metric, steps, values, "throughput bleeding away", onset, end, fall, shape)


def step_time_creep(rng: np.random.Generator, held_out: bool) -> Curve:
    """Step time climbing 15-60% from a point on (fragmentation, a leak, a slowing loader)."""
    steps, values, metric, _ = _timing(rng, held_out, "step_time")
    n = len(steps)
    onset_at = int(n * rng.uniform(0.3, 0.8))
    u = (np.arange(n) - onset_at) / (n - 1 - onset_at)
    r, shape, stop = _rise(rng, u, held_out)
    rise = rng.uniform(0.15, 0.6)
    values = _with_pauses(rng, steps, values * (1 + rise * r), 1)
    onset, end = _course(steps, onset_at, stop)
    return _failure("step_time", metric, steps, values, "step time creeping up", onset, end, rise, shape)


def mismatch_drift(rng: np.random.Generator, held_out: bool) -> Curve:
    """A rollout/trainer logprob mismatch flat at ~1e-3 growing 4-20x, linearly or exponentially."""
    n = int(rng.integers(200, 3000))
    steps = np.arange(1, n + 1)
    floor = float(np.exp(rng.uniform(np.log(5e-4), np.log(3e-3))))
    spread = rng.uniform(0.1, 0.25)
    noise = np.exp(spread * rng.normal(size=n) - spread**2 / 2)
    onset_at = int(n * rng.uniform(0.2, 0.7))
    u = np.clip((np.arange(n) - onset_at) / (n - 1 - onset_at), 0, 1)
    growth = rng.uniform(4, 20)
    shape = str(rng.choice(["linear", "exponential"]))
    if held_out and rng.random() < 0.4:
        shape = "stops"
        stop = rng.uniform(0.6, 0.85)
        u = np.minimum(u / stop, 1.0)
    else:
        stop = 1.0
    level = floor * growth**u if shape == "exponential" else floor * (1 + (growth - 1) * u)
    metric = str(rng.choice(["train_rollout_logprob_abs_diff", "sampling/sampling_logp_difference/mean"]))
    onset, end = _course(steps, onset_at, stop)
    return _failure(
        "logprob_mismatch", metric, steps, level * noise, "logprob mismatch drifting off ~0", onset, end, growth, shape
    )


def _settling_norm(rng: np.random.Generator, n: int) -> np.ndarray:
    """A gradient norm falling from its initialisation to a settled level."""
    t = np.arange(n)
    settled = rng.uniform(0.15, 2.0)
    return settled * (1 + rng.uniform(1, 6) * np.exp(-t / (n * rng.uniform(0.01, 0.05))))


def grad_norm_growth(rng: np.random.Generator, held_out: bool) -> Curve:
    """A gradient norm, settled, then growing 3-10x (divergence in slow motion)."""
    n = _length(rng, held_out)
    every = _cadence(rng, held_out)
    steps = np.arange(1, n + 1) * every
    level = _settling_norm(rng, n)
    onset_at = int(n * rng.uniform(0.4, 0.75))
    u = np.clip((np.arange(n) - onset_at) / (n - 1 - onset_at), 0, 1)
    growth = rng.uniform(3, 10)
    shape = str(rng.choice(["linear", "exponential"]))
    stop = 1.0
    if held_out and rng.random() < 0.3:
        shape, stop = "stops", rng.uniform(0.6, 0.85)
        u = np.minimum(u / stop, 1.0)
    level = level * (growth**u if shape == "exponential" else 1 + (growth - 1) * u)
    spread = rng.uniform(0.05, 0.15)
    values = level * np.exp(spread * _noise(rng, n, held_out))
    onset, end = _course(steps, onset_at, stop)
    return _failure("grad_norm", "grad_norm", steps, values, "grad norm growing", onset, end, growth, shape)


# -- healthy look-alikes -----------------------------------------------------------------------


def healthy_loss(rng: np.random.Generator, held_out: bool) -> Curve:
    """A healthy train loss in one of its shapes."""
    case = str(
        rng.choice(
            [
                "plain",
                "warmup_bump",
                "wsd_cooldown",
                "converged_flat",
                "data_mix_step",
                "small_batch",
                "slow_wiggle",
                "grpo",
                "sparse",
                "epoch_steps",
                "lr_restarts",
            ]
        )
    )
    n = int(rng.integers(100, 400)) if case == "sparse" else _length(rng, held_out)
    every = _cadence(rng, held_out, sparse=case == "sparse")
    steps = np.arange(1, n + 1) * every
    t = np.arange(n) / n
    level = _decay(rng, t, held_out)
    rel = rng.uniform(0.003, 0.03)
    if case == "warmup_bump":
        at, width = rng.uniform(0.01, 0.08), rng.uniform(0.003, 0.02)
        level = level * (1 + rng.uniform(0.04, 0.15) * np.exp(-(((t - at) / width) ** 2)))
    elif case == "wsd_cooldown":
        # warmup-stable-decay: the loss eases along at the constant rate, then drops 3-10% in the cool-down
        cool = rng.uniform(0.8, 0.92)
        level = np.where(t > cool, level * (1 - rng.uniform(0.03, 0.1) * (t - cool) / (1 - cool)), level)
    elif case == "converged_flat":
        at = rng.uniform(0.2, 0.4)
        level = np.where(t > at, np.interp(at, t, level), level)
    elif case == "data_mix_step":
        # a new data mix, harder than the last: the loss steps up 2-6% and learns it down slowly
        for at in rng.uniform(0.3, 0.9, int(rng.integers(1, 4))):
            level = level * np.where(t > at, 1 + rng.uniform(0.02, 0.06) * np.exp(-(t - at) / rng.uniform(0.1, 0.5)), 1)
    elif case == "small_batch":
        rel = rng.uniform(0.04, 0.1)
    elif case == "epoch_steps":
        # multi-epoch fine-tuning: the loss drops 4-15% at each epoch boundary (the model has seen
        # the data) and eases along within an epoch
        epochs = int(rng.integers(2, 6))
        drop = rng.uniform(0.04, 0.15)
        level = level * (1 - drop) ** np.floor(t * epochs)
    elif case == "lr_restarts":
        # cosine with warm restarts: each restart lifts the loss 2-6%, learned down again within the cycle
        cycles = int(rng.integers(2, 5))
        phase = (t * cycles) % 1.0
        lift = rng.uniform(0.02, 0.06) * np.where(t * cycles >= 1, np.exp(-phase / rng.uniform(0.05, 0.2)), 0.0)
        level = level * (1 + lift)
    elif case == "slow_wiggle":
        period = rng.uniform(0.05, 0.3)
        level = level * (1 + rng.uniform(0.003, 0.015) * np.sin(2 * np.pi * t / period + rng.uniform(0, 6)))
    elif case == "grpo":
        # a GRPO loss: beta x KL, growing as the policy leaves its reference, with the advantage term's noise
        beta, kl = rng.uniform(0.01, 0.05), rng.uniform(0.1, 0.6) * np.sqrt(t)
        values = beta * kl + rng.uniform(0.005, 0.05) * rng.standard_t(4, n)
        return _curve("loss", "loss", steps, values, "healthy loss", label="healthy", case=case)
    values = level * (1 + rel * _noise(rng, n, held_out))
    return _curve("loss", "train/loss", steps, values, "healthy loss", label="healthy", case=case)


def healthy_eval(rng: np.random.Generator, held_out: bool) -> Curve:
    """A healthy eval loss: falling, converged (flat within its noise), or with one eval off."""
    case = str(rng.choice(["plain", "converged", "one_off", "few", "small_eval_set", "uptick"]))
    n = int(rng.integers(5, 15)) if case == "few" else int(rng.integers(15, 81))
    every = int(rng.choice([150, 200, 400, 1000]) if held_out else rng.choice([100, 250, 500]))
    steps = np.arange(1, n + 1) * every
    t = np.arange(n) / n
    level = _decay(rng, t, held_out)
    if case == "converged":
        at = rng.uniform(0.3, 0.6)
        level = np.where(t > at, np.interp(at, t, level), level)
    if case == "uptick":
        # up 1-3% for two or three evals, then down again (a data-order or LR-schedule wobble)
        at, width = int(rng.integers(n // 3, n - 4)), int(rng.integers(2, 4))
        bump = np.zeros(n)
        bump[at : at + width] = rng.uniform(0.01, 0.03)
        level = level * (1 + bump)
    rel = rng.uniform(0.02, 0.04) if case == "small_eval_set" else rng.uniform(0.001, 0.01)
    values = level * (1 + rel * rng.normal(size=n))
    if case == "one_off":
        at = int(rng.integers(n // 2, n - 1))
        values[at] *= 1 + rng.uniform(0.05, 0.2)
    return _curve("eval_loss", "eval/loss", steps, values, "healthy eval loss", label="healthy", case=case)


def healthy_timing(rng: np.random.Generator, held_out: bool, kind: str) -> Curve:
    """A healthy throughput or step time: flat, warming up, wandering a little, a small step."""
    steps, values, metric, _ = _timing(rng, held_out, kind)
    n = len(steps)
    t = np.arange(n) / n
    case = str(rng.choice(["flat", "warmup", "thermal_wiggle", "small_step", "improving", "slow_ramp"]))
    direction = -1 if kind == "throughput" else 1
    shape = np.ones(n)
    if case == "warmup":  # the first steps are slow (compilation, caches, the loader filling up)
        shape = 1 + direction * rng.uniform(0.2, 0.6) * np.exp(-t / rng.uniform(0.005, 0.03))
    elif case == "thermal_wiggle":
        shape = 1 + rng.uniform(0.005, 0.02) * np.sin(2 * np.pi * t / rng.uniform(0.05, 0.4) + rng.uniform(0, 6))
    elif case == "small_step":
        shape = np.where(t > rng.uniform(0.2, 0.9), 1 + direction * rng.uniform(0.01, 0.04), 1.0)
    elif case == "improving":
        shape = 1 - direction * rng.uniform(0.02, 0.1) * t
    elif case == "slow_ramp":  # caches and the allocator settle over the first tenth to third of the run
        shape = 1 + direction * rng.uniform(0.1, 0.3) * np.clip(1 - t / rng.uniform(0.1, 0.33), 0, 1)
    values = _with_pauses(rng, steps, values * shape, direction)
    family = "healthy throughput" if kind == "throughput" else "healthy step time"
    return _curve(kind, metric, steps, values, family, label="healthy", case=case)


def healthy_mismatch(rng: np.random.Generator, held_out: bool) -> Curve:
    """A healthy logprob mismatch: flat at its route's floor, or wandering around it and back."""
    n = int(rng.integers(200, 3000))
    steps = np.arange(1, n + 1)
    floor = float(np.exp(rng.uniform(np.log(5e-4), np.log(2e-2))))
    spread = rng.uniform(0.1, 0.25)
    case = str(rng.choice(["flat", "wander", "easing", "policy_drift"]))
    log_level = np.zeros(n)
    if case == "wander":
        # a slow excursion of up to 1.8x and back, as the policy moves away from its reference and returns
        centre, width = rng.uniform(0.2, 0.8), rng.uniform(0.05, 0.2)
        log_level = np.log(rng.uniform(1.2, 1.8)) * np.exp(-(((np.arange(n) / n - centre) / width) ** 2))
    elif case == "easing":
        log_level = -np.log(rng.uniform(1.2, 2.0)) * np.arange(n) / n
    elif case == "policy_drift":
        # RL: the gap grows 1.2-1.6x as the policy moves from where it started, then holds
        log_level = np.log(rng.uniform(1.2, 1.6)) * np.clip(np.arange(n) / n / rng.uniform(0.3, 0.7), 0, 1)
    # log-normal: a mean of absolute gaps is skewed but not heavy-tailed (a route's numerical floor)
    values = floor * np.exp(log_level + spread * rng.normal(size=n) - spread**2 / 2)
    metric = str(rng.choice(["train_rollout_logprob_abs_diff", "sampling/sampling_logp_difference/mean"]))
    return _curve("logprob_mismatch", metric, steps, values, "healthy logprob mismatch", label="healthy", case=case)


def healthy_grad_norm(rng: np.random.Generator, held_out: bool) -> Curve:
    """A healthy gradient norm: settled, falling, rising gently late as the LR decays, or rising
    as the model starts to learn and then holding."""
    n = _length(rng, held_out)
    every = _cadence(rng, held_out)
    steps = np.arange(1, n + 1) * every
    t = np.arange(n) / n
    level = _settling_norm(rng, n)
    case = str(rng.choice(["settled", "falling", "late_lr_decay_rise", "early_rise", "spiky", "rl_wander"]))
    if case == "falling":
        level = level * (1 - rng.uniform(0.2, 0.5) * t)
    elif case == "late_lr_decay_rise":
        at = rng.uniform(0.3, 0.7)
        level = level * (1 + rng.uniform(0.2, 0.7) * np.clip((t - at) / (1 - at), 0, 1) ** rng.uniform(0.7, 1.5))
    elif case == "early_rise":
        level = level * (1 + rng.uniform(0.3, 0.8) * np.clip(t / rng.uniform(0.2, 0.5), 0, 1))
    elif case == "rl_wander":
        # an RL policy's gradient norm: its level wanders ±10-30% with the batches' rewards, heavy-tailed
        period = rng.uniform(0.1, 0.4)
        level = level * (1 + rng.uniform(0.1, 0.3) * np.sin(2 * np.pi * t / period + rng.uniform(0, 6)))
    spread = rng.uniform(0.05, 0.15)
    values = level * np.exp(spread * _noise(rng, n, held_out))
    if case == "spiky":
        at = rng.integers(n // 10, n, int(rng.integers(3, 15)))
        values[at] *= rng.uniform(3, 15, len(at))
    return _curve("grad_norm", "grad_norm", steps, values, "healthy grad norm", label="healthy", case=case)


# -- excursions that come back (spikes, whatever their width) ----------------------------------


def recovering_excursion(rng: np.random.Generator, held_out: bool) -> Curve:
    """A loss that jumps 12-120% and decays back to its level over 3-60 steps (3-300 held out):
    a spike, with its recovery time, not a divergence nor a level shift."""
    n = int(rng.integers(1000, 5000))
    every = _cadence(rng, held_out)
    steps = np.arange(1, n + 1) * every
    t = np.arange(n) / n
    level = _decay(rng, t, held_out)
    values = level * (1 + rng.uniform(0.003, 0.015) * rng.normal(size=n))
    at = int(n * rng.uniform(0.3, 0.85))
    jump = rng.uniform(0.12, 1.2)
    back = max(1, int(rng.integers(3, 301 if held_out else 61)) // every)  # points
    k = np.arange(n - at)
    # decays to within a few percent of the jump by `back` points after it
    bump = np.where(k <= back, jump * np.exp(-3.5 * k / back), 0.0)
    values[at:] = values[at:] * (1 + bump)
    return _curve(
        "loss",
        "train/loss",
        steps,
        values,
        "loss excursion that recovers",
        label="spike",
        spike_step=int(steps[at]),
        recovered_step=int(steps[min(at + back, n - 1)]),
    )


FAILURES: tuple[tuple[str, Callable[..., Curve], dict[str, Any]], ...] = (
    ("loss creep", loss_creep, {}),
    ("loss creep (sparse)", loss_creep, {"sparse": True}),
    ("eval loss turning up", eval_turn_up, {}),
    ("eval loss turning up (7-14 evals)", eval_turn_up, {"few": True}),
    ("throughput bleeding away", throughput_bleed, {}),
    ("step time creeping up", step_time_creep, {}),
    ("logprob mismatch drifting off ~0", mismatch_drift, {}),
    ("grad norm growing", grad_norm_growth, {}),
)
HEALTHY: tuple[tuple[str, Callable[..., Curve], dict[str, Any]], ...] = (
    ("healthy loss", healthy_loss, {}),
    ("healthy eval loss", healthy_eval, {}),
    ("healthy throughput", healthy_timing, {"kind": "throughput"}),
    ("healthy step time", healthy_timing, {"kind": "step_time"}),
    ("healthy logprob mismatch", healthy_mismatch, {}),
    ("healthy grad norm", healthy_grad_norm, {}),
)


def make_slow_burn(seed: int, per_family: int = 20, healthy_per_family: int = 30) -> list[Curve]:
    """The slow-burn families: `per_family` failures of each, `healthy_per_family` healthy
    look-alikes of each kind, and `per_family` loss excursions that recover. Seed 1 draws the
    tuning variant; every other seed the held-out one."""
    held_out = seed != 1
    rng = np.random.default_rng([seed, 29])
    curves: list[Curve] = []
    for _, make, options in FAILURES:
        curves += [make(rng, held_out, **options) for _ in range(per_family)]
    for _, make, options in HEALTHY:
        curves += [make(rng, held_out, **options) for _ in range(healthy_per_family)]
    curves += [recovering_excursion(rng, held_out) for _ in range(per_family)]
    for i, c in enumerate(curves):
        c["name"] = f"slow-{i}-{c['family'].replace(' ', '_')}"
    return curves


# -- scoring -----------------------------------------------------------------------------------


def cutoffs(curve: Curve) -> dict[str, int]:
    """The last step each reading sees: a quarter and half-way through the course, and all."""
    last = int(curve["steps"][-1])
    if curve["label"] != "slow":
        return {"all": last}
    onset, end = curve["onset"], curve["course_end"]
    return {"quarter": int(onset + 0.25 * (end - onset)), "half": int(onset + 0.5 * (end - onset)), "all": last}


def names_it(events: list[dict[str, Any]], curve: Curve, cutoff: int) -> bool:
    """Whether these events (read on the points up to `cutoff`) name the failure: an alarm of a
    naming kind whose window reaches into the course (and not from after the cutoff)."""
    onset = curve["onset"]
    return any(
        e["alarm"]
        and e["kind"] in NAMING_KINDS
        and (e["end_step"] if e["end_step"] is not None else e["start_step"]) >= onset
        for e in events
    )


def score_slow_burn(
    curves: list[Curve], readings: dict[str, dict[str, list[dict[str, Any]]]]
) -> dict[str, dict[str, Any]]:
    """Per family: failures named (at all, by a quarter, by half-way) or healthy curves alarmed;
    for the recovering excursions, named a spike and misnamed (divergence or level shift).
    `readings[curve name][cutoff name]` is a tool's events on the points up to that cutoff."""
    table: dict[str, dict[str, Any]] = {}
    for c in curves:
        row = table.setdefault(
            c["family"],
            {
                "label": c["label"],
                "n": 0,
                "named": 0,
                "quarter": 0,
                "half": 0,
                "alarmed": 0,
                "live": None,
                "spike": 0,
                "misnamed": 0,
            },
        )
        row["n"] += 1
        read = readings.get(c["name"], {})
        whole = read.get("all", [])
        if c["label"] == "slow":
            row["named"] += names_it(whole, c, int(c["steps"][-1]))
            row["quarter"] += names_it(read.get("quarter", []), c, 0)
            row["half"] += names_it(read.get("half", []), c, 0)
        elif c["label"] == "healthy":
            row["alarmed"] += any(e["alarm"] for e in whole)
            if "live" in read:
                row["live"] = (row["live"] or 0) + any(e["alarm"] for e in read["live"])
        else:
            step, back = c["spike_step"], c["recovered_step"]
            row["spike"] += any(
                e["kind"] == "spike" and e["start_step"] <= back and (e["end_step"] or e["start_step"]) >= step
                for e in whole
            )
            row["misnamed"] += any(e["kind"] in ("divergence", "level_shift") and e["alarm"] for e in whole)
    return table


def format_slow_burn(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    """One block per tool: a row per family. `alarmed`: healthy curves with an alarm on the whole
    curve; `live`: with an alarm shown at any moment while it streamed in ('-': not read live)."""
    lines = []
    for tool, table in results.items():
        lines.append(f"{tool}:")
        lines.append(
            "  "
            + "family".ljust(38)
            + "n".rjust(4)
            + "named".rjust(9)
            + "by 1/4".rjust(9)
            + "by 1/2".rjust(9)
            + "alarmed".rjust(9)
            + "live".rjust(9)
        )
        totals = {"slow": [0, 0, 0, 0], "healthy": [0, 0, 0, False]}
        for family, row in table.items():
            n = row["n"]
            if row["label"] == "slow":
                cells = [f"{row['named'] / n:.0%}", f"{row['quarter'] / n:.0%}", f"{row['half'] / n:.0%}", "", ""]
                t = totals["slow"]
                t[0] += n
                t[1] += row["named"]
                t[2] += row["quarter"]
                t[3] += row["half"]
            elif row["label"] == "healthy":
                live = "-" if row["live"] is None else f"{row['live']}/{n}"
                cells = ["", "", "", f"{row['alarmed']}/{n}", live]
                h = totals["healthy"]
                h[0] += n
                h[1] += row["alarmed"]
                if row["live"] is not None:
                    h[2] += row["live"]
                    h[3] = True
            else:
                cells = [f"spike {row['spike']}/{n}", "", "", f"misnamed {row['misnamed']}/{n}"]
                lines.append("  " + family.ljust(38) + str(n).rjust(4) + cells[0].rjust(18) + cells[3].rjust(27))
                continue
            lines.append("  " + family.ljust(38) + str(n).rjust(4) + "".join(cell.rjust(9) for cell in cells))
        n, named, quarter, half = totals["slow"]
        if n:
            lines.append(
                "  "
                + "all failures".ljust(38)
                + str(n).rjust(4)
                + f"{named / n:.0%}".rjust(9)
                + f"{quarter / n:.0%}".rjust(9)
                + f"{half / n:.0%}".rjust(9)
            )
        hn, alarmed, live, read_live = totals["healthy"]
        if hn:
            lines.append(
                "  "
                + "all healthy look-alikes".ljust(38)
                + str(hn).rjust(4)
                + "".rjust(27)
                + f"{alarmed}/{hn}".rjust(9)
                + (f"{live}/{hn}" if read_live else "-").rjust(9)
            )
    return "\n".join(lines)
