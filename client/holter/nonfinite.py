"""The non-finite tripwire: which module made the first NaN or Inf of a step, and which gradient.

`holter.torch.watch(model, run, nan_tripwire=True)` uses it. The chapter's advice for a NaN is to
"install hooks that check each operation's output for non-finite values; the first op that emits
a NaN is your culprit (or sits one step downstream of it)". On every training step (not only on
logged ones) this checks:

* the output of every module, and its first floating-point input, in the order the modules
  finish their forward pass (a child before its parent). The module to blame is the first one
  whose output is non-finite while its input was finite: the NaN was made by its own code (or
  its children's, which would have been named first). An `attn` block whose softmax of a
  fully masked row makes a NaN is named even though its output projection is the first module
  to *return* one. When every non-finite output had a non-finite input (NaN in the batch
  itself, or made by code outside any module), the first non-finite output is named instead,
  marked as having received it;
* every parameter's gradient, in the order the backward pass completed them.

Nothing waits for the device per module: each check is a reduction queued on the device (the
sum of the tensor, in float32: NaN and ±Inf survive a sum), kept as a 0-dim tensor, and after
the backward pass all of them are stacked and copied to the host at once. On CUDA the copy is
asynchronous and read at a later step, once an event says it has landed, so the tripwire adds no
synchronisation at all; on the CPU the values are simply there. (A finite tensor whose float32 sum
overflows, values near 1e38, counts as non-finite: such activations are about to overflow anyway.)

A report goes out once per episode: the first step that has non-finite values after one that had
none. A run that diverges sends one report, not one per step; an fp16 loss scaler that skips an
overflowing step now and then sends one each time, which the service reads as information only
unless the loss diverges.

This module imports torch; `import holter` does not import it.
"""

from __future__ import annotations

import math
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from holter.wire import name_of

# Containers return what their last child returned (or are never called): checking them again
# would cost a pass over the tensor and could never name anything their child did not.
_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)
# Results not yet read from the device; past this many, the oldest is waited for.
MAX_PENDING = 4
# Checks held for one step. Forward passes that record gradients but are never followed by a
# backward pass (generation that forgot `torch.no_grad()`) would otherwise pile them up: past this
# many, the next forward pass closes the step as if its backward pass had run.
MAX_CHECKS_PER_STEP = 100_000


@dataclass(frozen=True)
class Origin:
    """Where non-finite values first appeared: a module (forward) or a parameter (gradient)."""

    name: str
    value: str  # "NaN", "Infinity" or "-Infinity": what the check saw
    inputs_finite: bool = True  # forward only: False when the module received them

    def payload(self) -> dict[str, Any]:
        """As the service's `POST /runs/{id}/nonfinite` takes it."""
        data: dict[str, Any] = {"name": self.name, "value": self.value}
        if not self.inputs_finite:
            data["inputs_finite"] = False
        return data


@dataclass(frozen=True)
class NonFiniteStep:
    """One step's finding: the first non-finite forward output and gradient (either may be None)."""

    step: int
    forward: Origin | None
    gradient: Origin | None


def _floating(value: Any) -> Iterator[torch.Tensor]:
    """The floating-point tensors in a module's output: a tensor, or tuples, lists and dicts of them."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and value.numel():
            yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _floating(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _floating(item)


def _sum(tensor: torch.Tensor) -> torch.Tensor:
    # One reduction kernel, no host sync. float32 accumulation keeps fp16/bf16 sums from
    # overflowing on finite values; a sum is 30-60x cheaper than max(|x|) or isfinite().all() on CPU.
    return tensor.detach().sum(dtype=torch.float32)


class _Call:
    """One module call of the step: where its input and output checks sit in the step's list."""

    __slots__ = ("inputs", "name", "outputs")

    def __init__(self, name: str, inputs: list[int]) -> None:
        self.name = name
        self.inputs = inputs
        self.outputs: list[int] = []


class _Pending:
    """A closed step whose checks are on their way to the host."""

    __slots__ = ("calls", "copied", "forward_count", "grad_names", "step", "values")

    def __init__(
        self,
        step: int,
        calls: list[_Call],
        grad_names: list[str],
        forward_count: int,
        values: torch.Tensor,
        copied: Any = None,
    ) -> None:
        self.step = step
        self.calls = calls
        self.grad_names = grad_names
        self.forward_count = forward_count
        self.values = values
        self.copied = copied  # a CUDA event recorded after the copy; None when `values` is already there


class NonFiniteTripwire:
    """Hooks that check every module's output and every gradient for NaN and ±Inf, per step.

    `open(step)` starts a step (the watch calls it at each forward pass that records gradients),
    `close()` ends it after the backward pass and queues its checks for reading, `poll()` reads
    whatever has reached the host and calls `report` with the first step of each non-finite
    episode, `remove()` takes the hooks off and reads what is left.
    """

    def __init__(self, model: nn.Module, report: Callable[[NonFiniteStep], None]) -> None:
        self._report = report
        self._step: int | None = None
        self._sums: list[torch.Tensor] = []
        self._calls: list[_Call] = []
        self._stack: list[_Call] = []
        self._known: dict[int, tuple[weakref.ref[torch.Tensor], int]] = {}
        self._grad_order: list[int] = []
        self._grad_seen: set[int] = set()
        self._pending: deque[_Pending] = deque()
        self._in_episode = False
        self.last: NonFiniteStep | None = None
        root_name = type(model).__name__
        self._parameters = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        self._handles = []
        for name, module in model.named_modules():
            if isinstance(module, _CONTAINERS):
                continue
            label = name or root_name
            self._handles.append(module.register_forward_pre_hook(self._before(label), with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._after))
        for index, (_, parameter) in enumerate(self._parameters):
            self._handles.append(parameter.register_post_accumulate_grad_hook(self._grad_ready(index)))

    # --- one step ------------------------------------------------------------------------------

    def open(self, step: int) -> None:
        """A forward pass that records gradients starts; the first one of a step names it."""
        if self._step is not None and len(self._sums) > MAX_CHECKS_PER_STEP:
            self.close()
        if self._step is None:
            self._step = step

    def close(self) -> None:
        """The backward pass ended: queue this step's checks for the host and read what is ready."""
        step, self._step = self._step, None
        sums, self._sums = self._sums, []
        calls, self._calls = self._calls, []
        order, self._grad_order = self._grad_order, []
        self._grad_seen = set()
        self._stack = []
        self._known = {}
        if step is not None:
            grads = [(self._parameters[i][0], self._parameters[i][1].grad) for i in order]
            grads = [(name, g) for name, g in grads if g is not None]
            forward_count = len(sums)
            if grads:
                dense = [g.coalesce().values() if g.is_sparse else g for _, g in grads]
                # one fused kernel group for all gradients (what clip_grad_norm_ uses); an L2 norm
                # in float32 is non-finite exactly when a value is, short of float32 overflow
                sums.extend(torch._foreach_norm(dense, 2, dtype=torch.float32))
            if sums:
                device = sums[0].device
                values = torch.stack([s.to(device) for s in sums])
                self._pending.append(self._to_host(step, calls, [name for name, _ in grads], forward_count, values))
        self.poll()

    def _to_host(
        self, step: int, calls: list[_Call], grad_names: list[str], forward_count: int, values: torch.Tensor
    ) -> _Pending:
        if values.device.type == "cuda":
            host = values.to("cpu", non_blocking=True)
            copied = torch.cuda.Event()
            copied.record()
            return _Pending(step, calls, grad_names, forward_count, host, copied)
        return _Pending(step, calls, grad_names, forward_count, values.cpu())

    def poll(self, *, wait: bool = False) -> None:
        """Read the closed steps whose checks reached the host (all of them with `wait`)."""
        while self._pending:
            oldest = self._pending[0]
            if oldest.copied is not None and not oldest.copied.query():
                if not wait and len(self._pending) <= MAX_PENDING:
                    return
                oldest.copied.synchronize()
            self._pending.popleft()
            self._read(oldest)

    def remove(self) -> None:
        """Take the hooks off and read every step still on its way."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.poll(wait=True)

    # --- the hooks ------------------------------------------------------------------------------

    def _check(self, tensor: torch.Tensor) -> int:
        """The index of this tensor's check, reusing the one made when it was an earlier output."""
        known = self._known.get(id(tensor))
        if known is not None and known[0]() is tensor:
            return known[1]
        self._sums.append(_sum(tensor))
        index = len(self._sums) - 1
        self._known[id(tensor)] = (weakref.ref(tensor), index)
        return index

    def _before(self, name: str) -> Callable[[nn.Module, tuple[Any, ...], dict[str, Any]], None]:
        def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if self._step is None or not torch.is_grad_enabled():
                return
            # The first floating-point input only: later ones are often masks, legitimately -inf.
            first = next(_floating(args), None)
            if first is None:
                first = next(_floating(kwargs), None)
            self._stack.append(_Call(name, [self._check(first)] if first is not None else []))

        return hook

    def _after(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._step is None or not torch.is_grad_enabled() or not self._stack:
            return
        call = self._stack.pop()
        call.outputs = [self._check(t) for t in _floating(output)]
        self._calls.append(call)

    def _grad_ready(self, index: int) -> Callable[[torch.Tensor], None]:
        def hook(parameter: torch.Tensor) -> None:
            if index not in self._grad_seen:
                self._grad_seen.add(index)
                self._grad_order.append(index)

        return hook

    # --- reading --------------------------------------------------------------------------------

    def _read(self, pending: _Pending) -> None:
        values = pending.values.tolist()
        bad = [not math.isfinite(v) for v in values]
        if not any(bad):
            self._in_episode = False
            return
        if self._in_episode:
            return
        self._in_episode = True
        forward = self._forward_origin(pending.calls, values, bad)
        gradient = next(
            (
                Origin(name, name_of(values[pending.forward_count + i]))
                for i, name in enumerate(pending.grad_names)
                if bad[pending.forward_count + i]
            ),
            None,
        )
        self.last = NonFiniteStep(pending.step, forward, gradient)
        self._report(self.last)

    @staticmethod
    def _forward_origin(calls: list[_Call], values: list[float], bad: list[bool]) -> Origin | None:
        received: Origin | None = None
        for call in calls:  # in the order the modules finished
            out = next((i for i in call.outputs if bad[i]), None)
            if out is None:
                continue
            if not any(bad[i] for i in call.inputs):
                return Origin(call.name, name_of(values[out]))
            received = received or Origin(call.name, name_of(values[out]), inputs_finite=False)
        return received
