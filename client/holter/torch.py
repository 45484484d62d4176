"""Vital signs from a PyTorch model: gradient norms and activation RMS, per layer.

    import holter, holter.torch
    run = holter.init(project="gpt", name="baseline")
    watch = holter.torch.watch(model, run, every=50)
    ...                      # the training loop, unchanged
    watch.remove()

After every backward pass of a logged step, `watch` logs (under `holter/`, so that a trainer's
own `grad_norm` is never mixed with these):

* `holter/grad_norm`: the L2 norm of all gradients together (what `clip_grad_norm_` returns,
  before clipping when measured before it);
* `holter/grad_norm/<layer>`: the L2 norm of one layer's gradients; a layer whose parameters got
  no gradient (frozen) logs exactly 0, which the service reads as "no learning signal";
* `holter/act_norm/<layer>`: the root mean square of the layer's output in that step's forward pass.

Layers are grouped the way transformer code is written: everything inside one element of a
`ModuleList` or `Sequential` (a transformer block such as `model.layers.3` or `transformer.h.3`)
is one layer; any other parameter belongs to the module that owns it (`transformer.wte`,
`lm_head`).

Cost: on steps that are not logged the hooks only count. On a logged step the norms stay tensors
on the device and are copied to the host once, together, after backward: one synchronisation per
logged step, which reading any number needs anyway. Forward passes without gradients
(`torch.no_grad`, `torch.inference_mode`: evaluation, generation) are ignored.

A step is one backward pass, counted from 0, unless `step` is given: a function returning the
caller's step (e.g. the optimizer step under gradient accumulation), in which case the
gradients measured after the last backward of a step are the ones logged.

With `nan_tripwire=True` it also checks every step for the first module whose forward output,
and the first parameter whose gradient, became NaN or ±Inf, and tells the service (see
`holter.nonfinite`), which attaches it to the divergence it explains.

Also here: `preflight(model, ...)`, the pre-flight checks (overfit one batch, causal-mask leakage,
cached vs full forward: holter/preflight.py); `flops_per_token(model, seq_len=...)` and
`peak_flops()` for MFU with `run.timed_step(..., flops_per_token=..., peak_flops=...)`, and
`watch_loader(loader, run)`, the time each step waits for its batch (`holter.loader`).

This module imports torch; `import holter` does not import it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import torch
from torch import nn
from torch.autograd import Variable

from holter.loader import LoaderWatch, watch_loader
from holter.nonfinite import NonFiniteStep, NonFiniteTripwire
from holter.preflight import Check, cached_vs_full, causal_mask_leak, overfit_one_batch, preflight
from holter.throughput import peak_flops_for

__all__ = [
    "Check",
    "Layer",
    "LoaderWatch",
    "NonFiniteStep",
    "Watch",
    "cached_vs_full",
    "causal_mask_leak",
    "flops_per_token",
    "layers_of",
    "overfit_one_batch",
    "peak_flops",
    "preflight",
    "watch",
    "watch_loader",
]

GRAD_NORM = "holter/grad_norm"
GRAD_NORM_PREFIX = "holter/grad_norm/"
ACT_NORM_PREFIX = "holter/act_norm/"


class _Logger(Protocol):
    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None: ...


class _Reporter(_Logger, Protocol):
    def report_nonfinite(
        self, step: int, *, forward: Mapping[str, Any] | None = None, gradient: Mapping[str, Any] | None = None
    ) -> None: ...


class Layer:
    """One layer as `watch` reports it: its name, its module (None for parameters owned by the
    watched model itself) and its parameters."""

    def __init__(self, name: str, module: nn.Module | None) -> None:
        self.name = name
        self.module = module
        self.parameters: list[nn.Parameter] = []


def layers_of(model: nn.Module) -> list[Layer]:
    """The model's parameters grouped into layers, in registration order (see the module doc)."""
    modules = dict(model.named_modules())
    layers: dict[str, Layer] = {}
    for name, parameter in model.named_parameters():
        owner = name.rpartition(".")[0]
        layer_name = _layer_path(model, owner) if owner else name
        if layer_name not in layers:
            layers[layer_name] = Layer(layer_name, modules[layer_name] if owner else None)
        layers[layer_name].parameters.append(parameter)
    return list(layers.values())


def _layer_path(model: nn.Module, owner: str) -> str:
    """The path of the outermost container element on the way to `owner`, else `owner` itself."""
    module: nn.Module = model
    parts = owner.split(".")
    for depth, part in enumerate(parts):
        if isinstance(module, (nn.ModuleList, nn.Sequential)):
            return ".".join(parts[: depth + 1])
        module = getattr(module, part)
    return owner


class Watch:
    """The hooks `watch` put on a model; `remove()` takes them off."""

    def __init__(
        self, model: nn.Module, run: _Logger, every: int, step: Callable[[], int] | None, nan_tripwire: bool = False
    ) -> None:
        if every < 1:
            raise ValueError(f"every must be at least 1, not {every}")
        if nan_tripwire and not callable(getattr(run, "report_nonfinite", None)):
            raise TypeError(f"nan_tripwire needs a run that can report it (a holter.Run), not {type(run).__name__}")
        self.model = model
        self.run = run
        self.every = every
        self._step_fn = step
        self._count = 0
        # a rank of a distributed job: its steps and its waits in collectives feed the run's clock
        # (holter/ranks.py, holter/distributed.py); ranks other than 0 log no per-layer norms, which
        # after the all-reduce every rank shares, and their own gradient norm before it instead
        owner = getattr(run, "run", run)  # Run.watch logs through a wrapper of the run
        self._clock = getattr(owner, "rank_clock", None)
        # the step a rank is in, as its run counts: Run.watch's count of passes starts at 1 (wandb's)
        self._clock_step: Callable[[], int] = (lambda: owner.step) if owner is not run else (lambda: self.step)
        job = getattr(owner, "job", None)
        self._norms = job is None or job.rank == 0
        self._ddp = None
        if self._clock is not None:
            from holter import distributed

            self._clock.hooked = True
            distributed.time_collectives(self._clock)
            if distributed.is_ddp(model):
                self._ddp = distributed.DdpTiming(model, self._clock)
        self._layers = layers_of(model) if self._norms else []
        self._activations: dict[str, torch.Tensor] = {}
        self._capturing = False
        self._backward_queued = False
        self._pending: tuple[int, dict[str, torch.Tensor]] | None = None
        self._handles = [
            model.register_forward_pre_hook(self._before_forward),
            model.register_forward_hook(self._after_forward),
        ]
        for layer in self._layers:
            if layer.module is not None:
                self._handles.append(
                    layer.module.register_forward_hook(self._activation_hook(ACT_NORM_PREFIX + layer.name))
                )
        # after the model's own pre-hook above, so a step is open before its first module is checked
        self._tripwire = NonFiniteTripwire(model, self._report_nonfinite) if nan_tripwire else None

    @property
    def step(self) -> int:
        """The step the next backward pass is logged at."""
        return self._step_fn() if self._step_fn is not None else self._count

    @step.setter
    def step(self, value: int) -> None:
        if self._step_fn is not None:
            raise AttributeError("this watch follows the step function it was given")
        self._count = value

    @property
    def nonfinite(self) -> NonFiniteStep | None:
        """The latest step the tripwire found non-finite values at (None before any, or without it).

        On a GPU a step's checks are read a step or two later, so this can lag the training loop;
        `remove()` reads all of them."""
        return self._tripwire.last if self._tripwire is not None else None

    @property
    def layer_names(self) -> list[str]:
        """The `<layer>` part of the per-layer metric names, in model order."""
        return [layer.name for layer in self._layers]

    def remove(self) -> None:
        """Take every hook off the model and log what a step-function watch still holds."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._tripwire is not None:
            self._tripwire.remove()
        self._flush_pending()

    def _before_forward(self, module: nn.Module, args: Any) -> None:
        if not torch.is_grad_enabled():
            self._capturing = False
            return
        step = self.step
        if self._clock is not None and self._clock_step() != self._clock.step:
            if self._ddp is not None:
                self._ddp.step_started()
            self._clock.step_started(self._clock_step())
            if self._ddp is not None:
                self._ddp.measure_norm = self._clock.due()
        if self._pending is not None and self._pending[0] != step:
            self._flush_pending()
        self._capturing = self._norms and step % self.every == 0
        if self._tripwire is not None:
            self._tripwire.open(step)

    def _activation_hook(self, metric: str) -> Callable[[nn.Module, Any, Any], None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if not self._capturing or not torch.is_grad_enabled():
                return
            tensor = next(_tensors(output), None)
            if tensor is not None and tensor.numel():
                self._activations[metric] = torch.linalg.vector_norm(tensor.detach(), dtype=torch.float32) / math.sqrt(
                    tensor.numel()
                )

        return hook

    def _after_forward(self, module: nn.Module, args: Any, output: Any) -> None:
        if not torch.is_grad_enabled():
            return
        outputs = [t for t in _tensors(output) if t.requires_grad]
        if outputs:
            torch.autograd.graph.register_multi_grad_hook(outputs, self._on_backward_start, mode="any")

    def _on_backward_start(self, grad: torch.Tensor) -> None:
        # Parameter gradients are complete only when the whole backward pass is; the engine runs
        # queued callbacks then (FSDP and DDP use the same mechanism).
        if not self._backward_queued:
            self._backward_queued = True
            Variable._execution_engine.queue_callback(self._after_backward)

    def _after_backward(self) -> None:
        self._backward_queued = False
        step = self.step
        if self._tripwire is not None:
            # reported ahead of the step's norms: the service hears the cause before its consequences
            # (the non-finite norms), and folds them into the incident the report leads
            self._tripwire.close()
        if self._norms and step % self.every == 0:
            norms = self._gradient_norms()
            norms.update(self._activations)
            self._activations = {}
            if self._step_fn is None:
                self._log(step, norms)
            else:
                self._pending = (step, norms)
        if self._step_fn is None:
            self._count += 1

    def _report_nonfinite(self, found: NonFiniteStep) -> None:
        parts = [f"output of {found.forward.name} ({found.forward.value})"] if found.forward else []
        parts += [f"gradient of {found.gradient.name} ({found.gradient.value})"] if found.gradient else []
        print(f"holter: non-finite values at step {found.step:,}; first: {', '.join(parts)}", file=sys.stderr)
        self.run.report_nonfinite(  # type: ignore[attr-defined]
            found.step,
            forward=found.forward.payload() if found.forward else None,
            gradient=found.gradient.payload() if found.gradient else None,
        )

    def _gradient_norms(self) -> dict[str, torch.Tensor]:
        per_layer: dict[str, torch.Tensor] = {}
        device: torch.device | None = None
        for layer in self._layers:
            grads = [_dense(p.grad) for p in layer.parameters if p.grad is not None]
            if not grads:
                continue
            device = device or grads[0].device
            norms = [torch.linalg.vector_norm(g, dtype=torch.float32).to(device) for g in grads]
            per_layer[GRAD_NORM_PREFIX + layer.name] = torch.linalg.vector_norm(torch.stack(norms))
        if device is None:
            return {
                GRAD_NORM: torch.zeros(()),
                **{GRAD_NORM_PREFIX + layer.name: torch.zeros(()) for layer in self._layers},
            }
        zero = torch.zeros((), device=device)
        ordered = {
            GRAD_NORM_PREFIX + layer.name: per_layer.get(GRAD_NORM_PREFIX + layer.name, zero) for layer in self._layers
        }
        return {GRAD_NORM: torch.linalg.vector_norm(torch.stack(list(ordered.values()))), **ordered}

    def _flush_pending(self) -> None:
        if self._pending is not None:
            step, norms = self._pending
            self._pending = None
            self._log(step, norms)

    def _log(self, step: int, norms: dict[str, torch.Tensor]) -> None:
        device = next(iter(norms.values())).device
        values = torch.stack([n.to(device) for n in norms.values()]).tolist()  # the one host copy
        self.run.log(dict(zip(norms, values)), step=step)


def watch(
    model: nn.Module,
    run: _Logger,
    every: int = 50,
    *,
    step: Callable[[], int] | None = None,
    nan_tripwire: bool = False,
) -> Watch:
    """Log `model`'s gradient norms and activation RMS to `run` on every `every`-th step.

    `run` is a `holter.Run` (anything with `log(metrics, step=)`); `step`, when given, returns
    the step to log at (default: the count of backward passes). With `nan_tripwire`, every step
    is also checked for the first module output and the first gradient to become NaN or ±Inf,
    and the first step of each such episode is reported to the service (`run.report_nonfinite`).
    Returns the `Watch`; call its `remove()` to take the hooks off.
    """
    return Watch(model, run, every, step, nan_tripwire)


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """The floating-point tensors in a module output: a tensor, or tuples, lists and dicts of them."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)


def _dense(grad: torch.Tensor) -> torch.Tensor:
    return grad.coalesce().values() if grad.is_sparse else grad


# --- MFU ------------------------------------------------------------------------------------------

_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
_HEAD_DIM_KEYS = ("head_dim", "d_kv")
_WIDTH_KEYS = ("hidden_size", "n_embd", "d_model", "dim")


def flops_per_token(
    model: nn.Module,
    seq_len: int,
    *,
    n_layers: int | None = None,
    attention_width: int | None = None,
    parameters: int | None = None,
) -> float:
    """Training FLOPs per token of a decoder-style transformer: 6·N + 12·L·d·T.

    The estimate of PaLM (Chowdhery et al. 2022, appendix B: "6N + 12LHQT") and of nanoGPT's
    `estimate_mfu`: a multiply-add is 2 FLOPs in the forward pass and 4 in the backward, so the
    parameters cost 6·N per token; attention adds, per layer, the scores Q·Kᵀ and their weighted
    sum of V, 2·2·T·d forward and twice that backward, counted over the full T×T square (as PaLM
    does, although a causal mask leaves half of it unused).

    * N: `parameters`, else every parameter that multiplies: all of the model's parameters but its
      embedding tables (a lookup costs nothing), except a table tied to the output layer, which
      is that layer's matmul. For a mixture of experts pass the parameters active per token.
    * L, d (heads x head dimension) and T = `seq_len`, the length the model is trained at: `n_layers`
      and `attention_width`, else from the model's `config` (Hugging Face and nanoGPT names:
      `num_hidden_layers`/`n_layer`, `num_attention_heads` x `head_dim`, or `hidden_size`/`n_embd`),
      else from its `nn.MultiheadAttention` modules; a ValueError names what to pass otherwise.

    MFU is then tokens/s x this / the device's peak FLOP/s (`run.timed_step(tokens=...,
    flops_per_token=..., peak_flops=...)`).
    """
    if seq_len < 1:
        raise ValueError(f"seq_len must be at least 1, not {seq_len}")
    if parameters is None:
        parameters = _multiplying_parameters(model)
    layers, width = _attention_shape(model, n_layers, attention_width)
    return 6.0 * parameters + 12.0 * layers * width * seq_len


def _multiplying_parameters(model: nn.Module) -> int:
    tables = {id(m.weight) for m in model.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag))}
    modules = dict(model.named_modules())
    # a table tied to the output layer shows up again under that (non-embedding) module
    tied = {
        id(p)
        for name, p in model.named_parameters(remove_duplicate=False)
        if id(p) in tables and not isinstance(modules.get(name.rpartition(".")[0]), (nn.Embedding, nn.EmbeddingBag))
    }
    return sum(p.numel() for p in model.parameters() if id(p) not in tables or id(p) in tied)


def _attention_shape(model: nn.Module, n_layers: int | None, width: int | None) -> tuple[int, int]:
    config = getattr(model, "config", None)

    def first(keys: tuple[str, ...]) -> int | None:
        for key in keys:
            value = getattr(config, key, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    if config is not None:
        n_layers = n_layers or first(_LAYER_KEYS)
        heads, head_dim = first(_HEAD_KEYS), first(_HEAD_DIM_KEYS)
        width = width or (heads * head_dim if heads and head_dim else first(_WIDTH_KEYS))
    attention = [m for m in model.modules() if isinstance(m, nn.MultiheadAttention)]
    if attention:
        n_layers = n_layers or len(attention)
        width = width or attention[0].embed_dim
    if not n_layers or not width:
        raise ValueError(
            f"cannot tell the number of layers and the attention width of {type(model).__name__}: "
            "pass n_layers= and attention_width= (heads x head dimension)"
        )
    return n_layers, width


def peak_flops(device: torch.device | int | str | None = None) -> float:
    """The peak dense bf16 FLOP/s of a CUDA (or ROCm) device, looked up by the name
    `torch.cuda.get_device_name` gives it (see `holter.throughput.PEAK_FLOPS`)."""
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device here: give peak_flops as a number of FLOP/s")
    return peak_flops_for(torch.cuda.get_device_name(device))
