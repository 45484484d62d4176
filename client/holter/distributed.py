"""What a rank of a `torch.distributed` job can see of its collectives, fed to its `CollectiveClock`.

* A `DistributedDataParallel` model gets a communication hook that is DDP's own default (each
  gradient bucket averaged by an all-reduce, `default_hooks.allreduce_hook`) with a clock around
  it: a bucket is launched when this rank's gradients for it are ready, and completed when every
  rank's have been summed. The main thread waits for the last bucket at the end of backward, so
  the last completion minus the last launch is the step's wait for the other ranks. On the steps
  whose timings are logged, the hook also sums the squares of the bucket before the all-reduce:
  this rank's own gradient norm (`holter/dist/local_grad_norm`), which after the all-reduce every
  rank shares, so only before it can one rank's bad batch be told from its peers'.
* `torch.distributed`'s blocking collectives (`all_reduce`, `barrier`, `all_gather`, ...) called
  from the training script are timed as they block (called with `async_op=True` they are not:
  the wait happens where the script waits for them). On CUDA a blocking NCCL call returns once
  enqueued, so this measures the CPU's view of it.

DDP takes one communication hook: a model that already has one (PowerSGD, fp16 compression)
keeps it, and says so once; its waits are then not timed.

This module imports torch; `import holter` does not import it.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
import torch.distributed as dist

from holter.ranks import LOCAL_GRAD_NORM, CollectiveClock

_WRAPPED = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
)
_clock: CollectiveClock | None = None  # the clock the process's wrapped collectives feed (one run's)


def time_collectives(clock: CollectiveClock) -> None:
    """Time `torch.distributed`'s blocking collectives into `clock` from now on (once per process;
    a later clock replaces the earlier one)."""
    global _clock  # noqa: PLW0603 — the wrappers are installed once per process and read the current clock
    first = _clock is None
    _clock = clock
    if not first:
        return
    for name in _WRAPPED:
        original = getattr(dist, name, None)
        if original is None or getattr(original, "_holter_timed", False):
            continue
        setattr(dist, name, _timed(name, original))


def _timed(name: str, original: Any) -> Any:
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        clock = _clock
        if clock is None or kwargs.get("async_op"):
            return original(*args, **kwargs)
        started = clock.entered(name)
        try:
            return original(*args, **kwargs)
        finally:
            clock.left(started)

    call._holter_timed = True  # type: ignore[attr-defined]
    return call


class DdpTiming:
    """The communication hook on one DDP model (see the module doc)."""

    def __init__(self, model: torch.nn.Module, clock: CollectiveClock) -> None:
        self.clock = clock
        self.attached = False
        self._norm_squares: torch.Tensor | None = None
        self.measure_norm = False

        def hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks the annotations: none here
            return self._hook(state, bucket)

        try:
            model.register_comm_hook(state=None, hook=hook)  # type: ignore[operator]
        except (RuntimeError, ValueError) as exc:  # a hook of its own, or registered after training began
            print(f"holter: the DDP model's collectives are not timed ({exc})", file=sys.stderr)
            return
        self.attached = True

    def step_started(self) -> None:
        """A step begins: the last one's local gradient norm goes with its timings."""
        squares, self._norm_squares = self._norm_squares, None
        if squares is not None:
            self.clock.extra[LOCAL_GRAD_NORM] = float(squares.sqrt())

    def _hook(self, state: Any, bucket: Any) -> torch.futures.Future[torch.Tensor]:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        if self.measure_norm:
            squares = bucket.buffer().detach().float().pow(2).sum()
            self._norm_squares = squares if self._norm_squares is None else self._norm_squares + squares
        self.clock.launched("all_reduce (DDP gradients)")
        future = default_hooks.allreduce_hook(state, bucket)
        clock = self.clock

        def done(finished: torch.futures.Future[torch.Tensor]) -> torch.Tensor:
            clock.completed()
            return finished.value()

        return future.then(done)


def is_ddp(model: Any) -> bool:
    """Whether `model` is a `DistributedDataParallel` wrapper."""
    return isinstance(model, torch.nn.parallel.DistributedDataParallel)
