"""A small DDP training for the tests of distributed jobs, run by torchrun (gloo, on the CPU).

Every rank runs this same script and calls plain `holter.init(project=..., name=...)` and
`run.watch(model)`: nothing in it says which rank it is. The fault the test plants is the
model's, read from the environment (FAULT, AT_STEP, ON_RANK), as a bad GPU or a bad shard is a
property of the machine or the data, not of the script:

* straggler: rank ON_RANK's forward takes 40 ms longer every step;
* hang: rank ON_RANK's forward blocks for good at step AT_STEP;
* nan: rank ON_RANK's batch holds a NaN at step AT_STEP;
* kill: rank ON_RANK kills itself with SIGKILL at step AT_STEP.

WATCH=tripwire watches with `holter.torch.watch(model, run, nan_tripwire=True)` instead.
PRINT=1 also prints each step's loss on every rank (`step 80 | loss nan`), for `holter follow`
to read from torchrun's output.
"""

from __future__ import annotations

import os
import signal
import time

import holter
import holter.torch
import torch
import torch.distributed as dist
from torch import nn

FAULT = os.environ.get("FAULT", "")
AT_STEP = int(os.environ.get("AT_STEP", "100"))
ON_RANK = int(os.environ.get("ON_RANK", "-1"))
STEPS = int(os.environ.get("STEPS", "200"))
PRINT = os.environ.get("PRINT") == "1"


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
        self.step = 0
        self.slow = FAULT in ("straggler", "hang") and dist.get_rank() == ON_RANK

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.slow and FAULT == "straggler":
            time.sleep(0.04)
        if self.slow and FAULT == "hang" and self.step >= AT_STEP:
            time.sleep(3600)
        return self.layers(x)


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = Model()
    ddp = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.02)
    run = holter.init(project=os.environ.get("PROJECT", "distributed"), name=os.environ.get("NAME", "ddp"))
    if os.environ.get("WATCH") == "tripwire":
        holter.torch.watch(ddp, run, every=10, nan_tripwire=True)
    else:
        run.watch(ddp)
    data = torch.Generator().manual_seed(1000 + dist.get_rank())  # each rank its own shard
    for step in range(STEPS):
        model.step = step
        x = torch.randn(16, 16, generator=data)
        y = x[:, :4].sum(1, keepdim=True) + 0.5 * torch.randn(16, 1, generator=data)
        if FAULT == "nan" and dist.get_rank() == ON_RANK and step == AT_STEP:
            x[0, 0] = float("nan")
        if FAULT == "kill" and dist.get_rank() == ON_RANK and step == AT_STEP:
            os.kill(os.getpid(), signal.SIGKILL)
        loss = nn.functional.mse_loss(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        run.log({"loss": loss.item()}, step=step)
        if PRINT:
            print(f"step {step} | loss {loss.item()}", flush=True)
        time.sleep(0.01)
    run.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
