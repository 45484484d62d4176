"""Pre-flight checks: the chapter's battery "before any costly job", run on the real model in
seconds, their results stored with the run (`run.report_preflight`, shown by the service with it).

    checks = holter.torch.preflight(
        model, run=run,
        batch=batch, loss_fn=lambda m, b: m(b["input_ids"], labels=b["labels"]).loss,   # overfit one batch
        input_ids=batch["input_ids"][:2, :32],                                           # mask and cache checks
    )

* **overfit one batch** (`overfit_one_batch`): a copy of the model, dropout and weight decay off,
  trains on one fixed batch; its loss must fall to (nearly) zero. "If it cannot, the gradient is
  not flowing the way you think, and the test has just saved you a multi-day run."
* **causal-mask leakage** (`causal_mask_leak`): change a token at position t and run again; the
  logits at every position before t must not move. A broken mask is "the single most common
  'too good' bug".
* **cached vs full forward** (`cached_vs_full`, for a model that generates with a key/value
  cache): decoding one token at a time with the cache must give the logits of one full forward
  pass, within tolerance; the first position where they part points at the cache bug (a stale
  position id, wrong indexing, an off-by-one in the appended key/value).

Each check returns a `Check` (name, passed, a summary with its numbers, details) and never
changes the model it is given: the overfit check trains a copy, the others run without
gradients in eval mode and restore the model's mode. This module imports torch.
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn

OVERFIT_STEPS = 200
OVERFIT_TARGET = 0.1  # a loss at or below this (nats for a cross-entropy) is "nearly zero"
OVERFIT_RATIO = 0.01  # ... or at or below this share of where it started (for losses of other scales)
ATOL, RTOL = 1e-5, 1e-4  # two forward passes over the same tokens: float32 round-off, no more
CACHE_ATOL, CACHE_RTOL = 1e-4, 1e-3  # incremental decoding sums in another order than the full pass


@dataclass
class Check:
    """One pre-flight check's result, as the service stores it."""

    name: str
    passed: bool
    summary: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The check as `POST /runs/{id}/preflight` takes it (NaN and ±Inf as text)."""
        return {"name": self.name, "passed": self.passed, "summary": self.summary, "details": _json(self.details)}


def _json(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    return value


class _Reporter(Protocol):
    def report_preflight(self, checks: list[Check]) -> None: ...


def logits_of(model: nn.Module, input_ids: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    """The model's logits for `input_ids`: its output, its `.logits` (Hugging Face) or the first
    element of the tuple it returns."""
    out = model(input_ids, **kwargs)
    if isinstance(out, torch.Tensor):
        return out
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    raise TypeError(f"cannot find logits in what {type(model).__name__} returns ({type(out).__name__})")


def _number(value: float) -> str:
    return f"{value:.4g}"


# --- overfit one batch ---------------------------------------------------------------------------


def overfit_one_batch(
    model: nn.Module,
    batch: Any,
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    *,
    steps: int = OVERFIT_STEPS,
    lr: float = 1e-3,
    target: float = OVERFIT_TARGET,
    ratio: float = OVERFIT_RATIO,
) -> Check:
    """Train a copy of `model` on `batch` alone (Adam at `lr`, no weight decay, dropout off) for
    up to `steps` steps; passed when `loss_fn(copy, batch)` falls to `target` or to `ratio` of
    where it started."""
    trial = copy.deepcopy(model)
    trial.train()
    for module in trial.modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
            module.p = 0.0
    trainable = [p for p in trial.parameters() if p.requires_grad]
    if not trainable:
        return Check(
            "overfit_one_batch",
            False,
            "no parameter of the model requires a gradient: nothing can learn the batch",
            {"steps": 0},
        )
    optimizer = torch.optim.Adam(trainable, lr=lr, weight_decay=0.0)
    first = last = best = math.nan
    taken = 0
    for taken in range(1, steps + 1):
        loss = loss_fn(trial, batch)
        value = float(loss.detach())
        if taken == 1:
            first = value
            if value <= target:  # nothing left to learn: the check would pass without showing anything
                return Check(
                    "overfit_one_batch",
                    False,
                    f"the loss on the batch starts at {_number(value)}, at the target already, so fitting it shows "
                    "nothing: a loss mask that hides every token makes it 0 (or give a batch the model has not learnt)",
                    {
                        "steps": 1,
                        "initial_loss": value,
                        "final_loss": value,
                        "best_loss": value,
                        "lr": lr,
                        "target": target,
                    },
                )
        last, best = value, value if math.isnan(best) else min(best, value)
        if not math.isfinite(value) or value <= target or value <= ratio * first:
            break
        optimizer.zero_grad(set_to_none=True)
        if not loss.requires_grad:
            break  # the loss is detached from every parameter: no step can change it
        loss.backward()
        optimizer.step()
    passed = math.isfinite(last) and (last <= target or last <= ratio * first)
    details = {"steps": taken, "initial_loss": first, "final_loss": last, "best_loss": best, "lr": lr, "target": target}
    if passed:
        summary = (
            f"the loss on one batch fell from {_number(first)} to {_number(last)} in {taken} steps: the model can "
            "fit a batch, the gradient flows"
        )
    elif not math.isfinite(last):
        summary = (
            f"the loss on one batch became {last} after {taken} steps (from {_number(first)}): training on it diverges"
        )
    else:
        summary = (
            f"the loss on one batch only went from {_number(first)} to {_number(last)} in {taken} steps (wanted "
            f"{_number(target)}, or 1/{round(1 / ratio)} of the start): the gradient does not flow as it should (a "
            "detached graph, frozen or zeroed parameters, a loss mask that hides every token, a learning rate of 0)"
        )
    return Check("overfit_one_batch", passed, summary, details)


# --- causal mask ----------------------------------------------------------------------------------


def causal_mask_leak(
    model: nn.Module,
    input_ids: torch.Tensor,
    *,
    positions: list[int] | None = None,
    forward: Callable[[torch.Tensor], torch.Tensor] | None = None,
    atol: float = ATOL,
    rtol: float = RTOL,
) -> Check:
    """Change the token at each of `positions` (default: the middle and the last) and run again:
    the logits before it must not change. `forward`: how to get logits from token ids, when not
    `model(ids)` (see `logits_of`)."""
    run = forward or (lambda ids: logits_of(model, ids))
    input_ids = input_ids if input_ids.dim() > 1 else input_ids.unsqueeze(0)
    length = input_ids.shape[-1]
    probes = positions or sorted({max(1, length // 2), length - 1})
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            base = run(input_ids)
            vocab = base.shape[-1]
            leaks = []
            for probe in probes:
                if not 0 < probe < length:
                    raise ValueError(f"a probed position must be within 1..{length - 1}, not {probe}")
                altered = input_ids.clone()
                altered[..., probe] = (altered[..., probe] + 1) % vocab
                after = run(altered)
                moved = ~torch.isclose(after[..., :probe, :], base[..., :probe, :], atol=atol, rtol=rtol)
                if moved.any():
                    first = int(moved.reshape(-1, probe, vocab).any(dim=0).any(dim=-1).nonzero()[0])
                    gap = float((after[..., :probe, :] - base[..., :probe, :]).abs().max())
                    leaks.append({"changed": probe, "first_moved": first, "max_abs_diff": gap})
    finally:
        model.train(was_training)
    details = {"positions": probes, "length": length, "leaks": leaks, "atol": atol, "rtol": rtol}
    if not leaks:
        where = " and ".join(str(p) for p in probes)
        return Check(
            "causal_mask",
            True,
            f"changing the token at position {where} moved no logit before it: the mask hides the future",
            details,
        )
    leak = leaks[0]
    return Check(
        "causal_mask",
        False,
        f"changing the token at position {leak['changed']} moved the logits at position {leak['first_moved']} "
        f"(by up to {_number(leak['max_abs_diff'])}): the future leaks into the past, a broken causal mask "
        "(a loss far too good to be true follows)",
        details,
    )


# --- cached vs full forward -----------------------------------------------------------------------


def generates(model: nn.Module) -> bool:
    """Whether the model decodes with a key/value cache the way Hugging Face models do."""
    config = getattr(model, "config", None)
    return callable(getattr(model, "generate", None)) and getattr(config, "use_cache", None) is not None


def _cache_argument(model: nn.Module) -> str:
    """What the model's forward calls the cache: `cache` (transformers 5) or `past_key_values`."""
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"


def _cache_of(out: Any) -> Any:
    found = getattr(out, "cache", None)
    return found if found is not None else getattr(out, "past_key_values", None)


def cached_vs_full(
    model: nn.Module, input_ids: torch.Tensor, *, atol: float = CACHE_ATOL, rtol: float = CACHE_RTOL
) -> Check:
    """Decode `input_ids` one token at a time with the cache (`past_key_values`) and compare each
    position's logits with one full forward pass over the sequence."""
    input_ids = input_ids if input_ids.dim() > 1 else input_ids.unsqueeze(0)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            full = logits_of(model, input_ids, use_cache=False)
            out = model(input_ids[..., :1], use_cache=True)
            steps = [out.logits[..., -1, :]]
            name = _cache_argument(model)
            for t in range(1, input_ids.shape[-1]):
                out = model(input_ids[..., t : t + 1], use_cache=True, **{name: _cache_of(out)})
                steps.append(out.logits[..., -1, :])
    finally:
        model.train(was_training)
    cached = torch.stack(steps, dim=-2)
    gaps = (cached - full).abs()
    apart = ~torch.isclose(cached, full, atol=atol, rtol=rtol)
    per_position = apart.reshape(-1, *apart.shape[-2:]).any(dim=0).any(dim=-1)
    details = {"length": int(input_ids.shape[-1]), "max_abs_diff": float(gaps.max()), "atol": atol, "rtol": rtol}
    if not per_position.any():
        return Check(
            "cached_vs_full",
            True,
            f"decoding {details['length']} tokens with the cache gave the full forward's logits (largest gap "
            f"{_number(details['max_abs_diff'])})",
            details,
        )
    first = int(per_position.nonzero()[0])
    details["first_position"] = first
    details["gap_at_first"] = float(gaps[..., first, :].max())
    return Check(
        "cached_vs_full",
        False,
        f"decoding with the cache parts from the full forward at position {first} (logits up to "
        f"{_number(details['gap_at_first'])} apart): a cache bug there (a stale position id, wrong indexing, an "
        "off-by-one in the appended key/value)",
        details,
    )


# --- all of them ----------------------------------------------------------------------------------


def preflight(
    model: nn.Module,
    *,
    run: _Reporter | None = None,
    batch: Any = None,
    loss_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
    input_ids: torch.Tensor | None = None,
    overfit_steps: int = OVERFIT_STEPS,
    lr: float = 1e-3,
) -> list[Check]:
    """The checks the arguments allow: overfit one batch (`batch` and `loss_fn`), the causal mask
    (`input_ids`), and cached vs full forward (`input_ids`, for a model that generates with a
    cache). With `run`, the results are sent with it (`run.report_preflight`)."""
    checks = []
    if batch is not None and loss_fn is not None:
        checks.append(overfit_one_batch(model, batch, loss_fn, steps=overfit_steps, lr=lr))
    if input_ids is not None:
        checks.append(causal_mask_leak(model, input_ids))
        if generates(model):
            checks.append(cached_vs_full(model, input_ids))
    if not checks:
        raise ValueError("nothing to check: give batch= and loss_fn= (overfit one batch) and/or input_ids=")
    if run is not None:
        run.report_preflight(checks)
    return checks
