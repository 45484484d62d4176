"""Input-pipeline stalls: how long each step waited for its batch.

    for batch in holter.torch.watch_loader(loader, run):   # or holter.loader.watch_loader
        ...                                                  # the training step, unchanged

A step whose accelerator sits idle while the data loader prepares the next batch shows up as a
throughput drop with no change in the loss; the chapter's advice is to look for it before
anything else. `watch_loader` wraps any iterable (a `torch.utils.data.DataLoader`, a generator)
and logs, per batch, at the step the batch was trained at:

* `holter/loader/wait_s`: seconds spent inside the loader's `next()` for this batch (for the first batch
  of a pass, `iter()` too: starting the workers is part of the wait);
* `holter/loader/compute_s`: seconds from receiving the batch until asking for the next one, the loop
  body: the step's own work;
* `holter/loader/wait_fraction`: wait / (wait + compute), the share of the step spent waiting.

Each wait is also handed to the run (`Run.note_data_wait`), so that `run.timed_step` counts the
first step's wait in its whole-step throughput (later steps measure it from the previous step's
end). The service reads the fraction with a healthy ceiling (a step that spends more than a fifth of
its time waiting is stalled) and names an input pipeline stall when it rises while the compute
time does not. On a GPU the host runs ahead of the device, so the loop body's wall time is the
device's pace only when the body waits for the device somewhere (`loss.item()`, a logged value):
without such a wait the host fills the queue, and the wait shows up as device idle time instead.

Standard library only; works with anything iterable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

WAIT = "holter/loader/wait_s"
COMPUTE = "holter/loader/compute_s"
WAIT_FRACTION = "holter/loader/wait_fraction"

T = TypeVar("T")


class _Logger(Protocol):
    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None: ...


class LoaderWatch(Generic[T]):
    """An iterable over `loader`'s batches that logs each step's wait for data; see the module doc.

    Iterate it as the loader itself, once per epoch; steps count on across epochs.
    """

    def __init__(
        self,
        loader: Iterable[T],
        run: _Logger,
        *,
        step: Callable[[], int] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.loader = loader
        self.run = run
        self._step_fn = step
        self._clock = clock
        self._count = 0
        # a `holter.Run` takes each wait for its timed step's whole-step time (holter/throughput.py)
        self._note_wait: Callable[[float], None] | None = getattr(run, "note_data_wait", None)

    def __iter__(self) -> Iterator[T]:
        clock = self._clock
        asked = clock()
        iterator = iter(self.loader)
        previous: tuple[int, float, float] | None = None  # step, wait, when its batch arrived
        while True:
            if previous is not None:
                step, wait, arrived = previous
                self._log(step, wait, asked - arrived)
            try:
                batch = next(iterator)
            except StopIteration:
                return
            arrived = clock()
            previous = (self._next_step(), arrived - asked, arrived)
            if self._note_wait is not None:
                self._note_wait(arrived - asked)
            yield batch
            asked = clock()

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def _next_step(self) -> int:
        # Read when the batch is handed over: a loop that counts its own step moves it on in the body.
        if self._step_fn is not None:
            return self._step_fn()
        step, self._count = self._count, self._count + 1
        return step

    def _log(self, step: int, wait: float, compute: float) -> None:
        total = wait + compute
        metrics = {WAIT: wait, COMPUTE: compute}
        if total > 0:
            metrics[WAIT_FRACTION] = wait / total
        self.run.log(metrics, step=step)


def watch_loader(loader: Iterable[T], run: _Logger, *, step: Callable[[], int] | None = None) -> LoaderWatch[T]:
    """Wrap `loader` so that iterating it logs each step's wait for its batch to `run`.

    `step`, when given, returns the step a batch is trained at (read as the batch is handed over);
    by default batches are counted from 0 across epochs. Returns the `LoaderWatch`.
    """
    return LoaderWatch(loader, run, step=step)
