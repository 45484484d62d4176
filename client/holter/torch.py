"""Vital signs from a PyTorch model: gradient norms and activation RMS, per layer.

    import holter, holter.torch
    run = holter.init(project="gpt", name="baseline")
    watch = holter.torch.watch(model, run, every=50)
    ...                      # the training loop, unchanged
    watch.remove()

After every backward pass of a logged step, `watch` logs:

* `grad_norm`: the L2 norm of all gradients together (what `clip_grad_norm_` returns, before
  clipping when measured before it);
* `grad_norm/<layer>`: the L2 norm of one layer's gradients; a layer whose parameters got no
  gradient (frozen) logs exactly 0, which the service reads as "no learning signal";
* `act_norm/<layer>`: the root mean square of the layer's output in that step's forward pass.

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

This module imports torch; `import holter` does not import it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import torch
from torch import nn
from torch.autograd import Variable

GRAD_NORM = "grad_norm"
GRAD_NORM_PREFIX = "grad_norm/"
ACT_NORM_PREFIX = "act_norm/"


class _Logger(Protocol):
    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None: ...


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

    def __init__(self, model: nn.Module, run: _Logger, every: int, step: Callable[[], int] | None) -> None:
        if every < 1:
            raise ValueError(f"every must be at least 1, not {every}")
        self.model = model
        self.run = run
        self.every = every
        self._step_fn = step
        self._count = 0
        self._layers = layers_of(model)
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
                self._handles.append(layer.module.register_forward_hook(self._activation_hook(ACT_NORM_PREFIX + layer.name)))

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
    def layer_names(self) -> list[str]:
        """The `<layer>` part of the per-layer metric names, in model order."""
        return [layer.name for layer in self._layers]

    def remove(self) -> None:
        """Take every hook off the model and log what a step-function watch still holds."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._flush_pending()

    def _before_forward(self, module: nn.Module, args: Any) -> None:
        if not torch.is_grad_enabled():
            self._capturing = False
            return
        step = self.step
        if self._pending is not None and self._pending[0] != step:
            self._flush_pending()
        self._capturing = step % self.every == 0

    def _activation_hook(self, metric: str) -> Callable[[nn.Module, Any, Any], None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if not self._capturing or not torch.is_grad_enabled():
                return
            tensor = next(_tensors(output), None)
            if tensor is not None and tensor.numel():
                self._activations[metric] = torch.linalg.vector_norm(tensor.detach(), dtype=torch.float32) / math.sqrt(tensor.numel())

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
        if step % self.every == 0:
            norms = self._gradient_norms()
            norms.update(self._activations)
            self._activations = {}
            if self._step_fn is None:
                self._log(step, norms)
            else:
                self._pending = (step, norms)
        if self._step_fn is None:
            self._count += 1

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
            return {GRAD_NORM: torch.zeros(()), **{GRAD_NORM_PREFIX + layer.name: torch.zeros(()) for layer in self._layers}}
        zero = torch.zeros((), device=device)
        ordered = {GRAD_NORM_PREFIX + layer.name: per_layer.get(GRAD_NORM_PREFIX + layer.name, zero) for layer in self._layers}
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


def watch(model: nn.Module, run: _Logger, every: int = 50, *, step: Callable[[], int] | None = None) -> Watch:
    """Log `model`'s gradient norms and activation RMS to `run` on every `every`-th step.

    `run` is a `holter.Run` (anything with `log(metrics, step=)`); `step`, when given, returns
    the step to log at (default: the count of backward passes). Returns the `Watch`; call its
    `remove()` to take the hooks off.
    """
    return Watch(model, run, every, step)


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
