"""The rollout/trainer logprob mismatch: the canary of RL fine-tuning (GRPO, PPO).

In an RL loop the rollout engine (vLLM, SGLang, ...) samples completions and records the
log-probability it gave each sampled token. The trainer (FSDP, DeepSpeed, plain PyTorch) then
loads the same weights and recomputes the log-probabilities of the same tokens, before any
update. Same weights, same tokens: the two must agree up to numerical noise, so the gap is ≈0 at
the start of every iteration. Any structured rise means something upstream is already wrong:
a weight sync that did not happen, a tokenizer or chat-template difference, or a kernel bug.

The source story (AI21, "Stride and Prejudice", training Jamba 3B with GRPO on verl + vLLM): the
mean absolute difference spiked periodically, reaching ~0.11 on the very first step with 128
rollouts per prompt, and the period tracked `rollouts_num`. The cause was a 32-bit index overflow
in vLLM's Mamba selective-scan kernel that wrote SSM states to the wrong cache slots once the
slot index passed ~47,935. The loss looked normal; only this gap told.

`logprob_mismatch` computes, over valid tokens only (the mask drops prompt and padding):

| name (with the default prefix)        | what                                                     |
|---------------------------------------|----------------------------------------------------------|
| `logprob_mismatch/abs_diff_mean`      | mean of abs(trainer - rollout)                           |
| `logprob_mismatch/abs_diff_max`       | the largest per-token gap                                |
| `logprob_mismatch/abs_diff_p99`       | 99th percentile (nearest rank) of the per-token gap      |
| `logprob_mismatch/frac_above_tol`     | fraction of tokens whose gap exceeds `tolerance`         |
| `logprob_mismatch/kl_k3`              | KL(rollout ‖ trainer), k3: mean of r - 1 - log r, r = p_trainer / p_rollout |

The k3 estimator (Schulman, "Approximating KL divergence") is unbiased for tokens sampled from
the rollout policy and never negative. The names all contain `logprob_mismatch`, which the
service recognises as the mismatch signal; another prefix that does not is classified as a loss.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

DEFAULT_PREFIX = "logprob_mismatch"
# Per-token gap, in nats, above which a token counts as mismatched. Healthy bf16 engines stay
# well below it on almost every token; the source story's bad case averaged 0.11 over all tokens.
DEFAULT_TOLERANCE = 0.1
PERCENTILE = 0.99


class _Logger(Protocol):
    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None: ...


def logprob_mismatch(
    rollout_logprobs: Any,
    trainer_logprobs: Any,
    mask: Any = None,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    run: _Logger | None = None,
    step: int | None = None,
    prefix: str = DEFAULT_PREFIX,
) -> dict[str, float]:
    """Compare the rollout engine's and the trainer's log-probs of the same sampled tokens.

    `rollout_logprobs` and `trainer_logprobs` have the same shape (e.g. batch x tokens) and are
    torch tensors, numpy arrays, or (nested) lists of floats; `mask` (same shape, truthy = a
    completion token to count) defaults to every token. Returns the statistics under their
    logged names (see the module doc) and logs them to `run` at `step` when `run` is given.

    Raises ValueError when the shapes differ or no token is valid. A NaN log-prob propagates to
    the mean and max, where the service reads it as the divergence it is.
    """
    if _is_torch(rollout_logprobs) or _is_torch(trainer_logprobs):
        stats = _torch_stats(rollout_logprobs, trainer_logprobs, mask, tolerance)
    elif _is_array(rollout_logprobs) or _is_array(trainer_logprobs):
        stats = _numpy_stats(rollout_logprobs, trainer_logprobs, mask, tolerance)
    else:
        stats = _list_stats(rollout_logprobs, trainer_logprobs, mask, tolerance)
    named = {f"{prefix}/{key}": value for key, value in zip(_KEYS, stats)}
    if run is not None:
        run.log(named, step=step)
    return named


_KEYS = ("abs_diff_mean", "abs_diff_max", "abs_diff_p99", "frac_above_tol", "kl_k3")


def _is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch")


def _is_array(value: Any) -> bool:
    return hasattr(value, "__array__") and not isinstance(value, (list, tuple))


def _rank(count: int) -> int:
    """1-based nearest rank of the percentile among `count` sorted values."""
    return max(1, math.ceil(PERCENTILE * count))


def _torch_stats(rollout: Any, trainer: Any, mask: Any, tolerance: float) -> tuple[float, ...]:
    import torch

    trainer_t = torch.as_tensor(trainer)
    rollout_t = torch.as_tensor(rollout, device=trainer_t.device)
    if rollout_t.shape != trainer_t.shape:
        raise ValueError(
            f"rollout log-probs have shape {tuple(rollout_t.shape)}, trainer log-probs {tuple(trainer_t.shape)}"
        )
    # float64 keeps exp(delta) and the sums exact enough for gaps of 1e-6 on long batches
    delta = (trainer_t.detach().double() - rollout_t.detach().double()).reshape(-1)
    if mask is not None:
        mask_t = torch.as_tensor(mask, device=delta.device)
        if mask_t.shape != trainer_t.shape:
            raise ValueError(f"mask has shape {tuple(mask_t.shape)}, log-probs {tuple(trainer_t.shape)}")
        delta = delta[mask_t.reshape(-1).bool()]
    if delta.numel() == 0:
        raise ValueError("no valid token: the mask selects nothing")
    gap = delta.abs()
    p99 = torch.kthvalue(gap, _rank(gap.numel())).values
    stats = torch.stack(
        [
            gap.mean(),
            gap.max(),
            p99,
            (gap > tolerance).double().mean(),
            (torch.expm1(delta) - delta).mean(),
        ]
    )
    return tuple(stats.tolist())  # the one device-to-host copy


def _numpy_stats(rollout: Any, trainer: Any, mask: Any, tolerance: float) -> tuple[float, ...]:
    import numpy as np

    rollout_a, trainer_a = np.asarray(rollout, dtype=np.float64), np.asarray(trainer, dtype=np.float64)
    if rollout_a.shape != trainer_a.shape:
        raise ValueError(f"rollout log-probs have shape {rollout_a.shape}, trainer log-probs {trainer_a.shape}")
    delta = (trainer_a - rollout_a).reshape(-1)
    if mask is not None:
        mask_a = np.asarray(mask)
        if mask_a.shape != trainer_a.shape:
            raise ValueError(f"mask has shape {mask_a.shape}, log-probs {trainer_a.shape}")
        delta = delta[mask_a.reshape(-1).astype(bool)]
    if delta.size == 0:
        raise ValueError("no valid token: the mask selects nothing")
    gap = np.abs(delta)
    rank = _rank(gap.size)
    p99 = np.partition(gap, rank - 1)[rank - 1]
    return (
        float(gap.mean()),
        float(gap.max()),
        float(p99),
        float((gap > tolerance).mean()),
        float((np.expm1(delta) - delta).mean()),
    )


def _flatten(values: Any) -> list[Any]:
    if isinstance(values, (list, tuple)):
        flat: list[Any] = []
        for item in values:
            flat.extend(_flatten(item))
        return flat
    return [values]


def _k3(delta: float) -> float:
    """One token's k3 term, r - 1 - log r with log r = `delta`; inf where exp overflows."""
    try:
        return math.expm1(delta) - delta
    except OverflowError:
        return math.inf


def _list_stats(rollout: Iterable[Any], trainer: Iterable[Any], mask: Any, tolerance: float) -> tuple[float, ...]:
    rollout_f, trainer_f = _flatten(rollout), _flatten(trainer)
    if len(rollout_f) != len(trainer_f):
        raise ValueError(f"rollout log-probs have {len(rollout_f)} values, trainer log-probs {len(trainer_f)}")
    keep = [True] * len(trainer_f) if mask is None else [bool(m) for m in _flatten(mask)]
    if len(keep) != len(trainer_f):
        raise ValueError(f"mask has {len(keep)} values, log-probs {len(trainer_f)}")
    delta = [float(t) - float(r) for t, r, k in zip(trainer_f, rollout_f, keep) if k]
    if not delta:
        raise ValueError("no valid token: the mask selects nothing")
    gap = sorted(abs(d) for d in delta)
    count = len(gap)
    # sorted() puts NaN anywhere; the mean and max must still show it
    has_nan = any(g != g for g in gap)
    mean = math.nan if has_nan else math.fsum(gap) / count
    peak = math.nan if has_nan else gap[-1]
    kl = math.fsum(_k3(d) for d in delta) / count
    return (mean, peak, gap[_rank(count) - 1], sum(g > tolerance for g in gap) / count, kl)
