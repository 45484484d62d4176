"""Where this process stands in a distributed job, read from its launcher's environment.

A job of many ranks is one run (shared/DESIGN.md, "A job of many ranks"): every rank calls the
same `holter.init()`, and each learns from the environment its launcher set which job it belongs
to and which rank it is, so all of them join one run without a line of rank-specific code.

The launchers read, in this order (the first that names a rank wins; the job's identity is the
most specific one the environment holds):

* torchrun / torchelastic (and what runs through it: `accelerate launch`, Lightning's and
  Megatron's scripts): `RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `GROUP_RANK`, and the job's
  `TORCHELASTIC_RUN_ID` (a fresh uuid per single-node or `--standalone` launch; the user's
  `--rdzv-id` otherwise; "none" under a static rendezvous, where the job is told by its
  `MASTER_ADDR:MASTER_PORT`, or by `SLURM_JOB_ID` when SLURM started it);
* SLURM (`srun`): `SLURM_PROCID`, `SLURM_LOCALID`, `SLURM_NTASKS`, `SLURM_NODEID`, and
  `SLURM_JOB_ID`.`SLURM_STEP_ID`;
* Open MPI (`mpirun`, DeepSpeed's MPI launch): `OMPI_COMM_WORLD_RANK`, `_LOCAL_RANK`, `_SIZE`,
  the job from `PMIX_NAMESPACE` (or `OMPI_MCA_ess_base_jobid`);
* MPICH / Intel MPI / MVAPICH (Hydra's PMI): `PMI_RANK`, `PMI_SIZE`, `MPI_LOCALRANKID`, the job
  from `PMI_KVSNAME`, else `PMI_JOBID`;
* any other launcher that sets `RANK` and `WORLD_SIZE` (DeepSpeed's own `deepspeed` launcher,
  `torch.multiprocessing` scripts): the job from `MASTER_ADDR:MASTER_PORT`.

`HOLTER_JOB_ID` names the job outright, on every launcher. A process that is the only rank of its
job (`WORLD_SIZE=1`) is no distributed job. Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The name under which rank r > 0 of a job logs a metric it calls `name`: the run's own curves are
# rank 0's (the convention every framework follows), every other rank's are kept beside them as
# that rank's series. The service reads the rank back from the name (its vocabulary/ranks.py).
RANK_PREFIX = "holter/rank/"


def rank_series(name: str, rank: int) -> str:
    """The name rank `rank` logs `name` under: `name` itself on rank 0, `holter/rank/3/name` on rank 3."""
    return name if rank == 0 else f"{RANK_PREFIX}{rank}/{name}"


@dataclass(frozen=True)
class Job:
    """One rank of a distributed job: which job (`key`, the same on every rank), which rank, and
    where it runs. `node_rank` is the node's place among the job's nodes when the launcher says
    it; `restart` counts the launcher's restarts of the job (torchelastic, SLURM requeues)."""

    launcher: str
    key: str
    rank: int
    world_size: int
    local_rank: int | None = None
    node_rank: int | None = None
    host: str = ""
    pid: int = 0
    restart: int = 0

    def run_id(self, project: str, name: str | None) -> str:
        """The run id every rank of this job derives alike for a run of `project` called `name`."""
        digest = hashlib.sha256("\0".join((project, name or "", self.key)).encode()).hexdigest()
        return f"job-{digest[:16]}"

    def payload(self) -> dict[str, Any]:
        """What the service records of this rank when it joins the run."""
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "local_rank": self.local_rank,
            "node_rank": self.node_rank,
            "host": self.host[:256],
            "pid": self.pid,
            "launcher": self.launcher,
            "job": self.key[:256],
            "restart": self.restart,
        }


def _int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = env.get(name, "").strip()
        if value.lstrip("-").isdigit():
            return int(value)
    return None


def _master(env: Mapping[str, str]) -> str | None:
    address, port = env.get("MASTER_ADDR", "").strip(), env.get("MASTER_PORT", "").strip()
    return f"{address}:{port}" if address and port else None


def _slurm_job(env: Mapping[str, str]) -> str | None:
    job = env.get("SLURM_JOB_ID", "").strip() or env.get("SLURM_JOBID", "").strip()
    if not job:
        return None
    step = env.get("SLURM_STEP_ID", "").strip() or env.get("SLURM_STEPID", "").strip()
    return f"slurm:{job}.{step}" if step else f"slurm:{job}"


def _torchrun(env: Mapping[str, str]) -> tuple[str, str | None] | None:
    run_id = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if not run_id:
        return None
    if run_id != "none":
        return "torchrun", f"torchrun:{run_id}"
    # a static rendezvous has no id of its own: the SLURM job that started it, else its store's address
    slurm = _slurm_job(env)
    master = _master(env)
    return "torchrun", slurm or (f"torchrun:{master}" if master else None)


def job_from_environment(env: Mapping[str, str] | None = None) -> Job | None:
    """This process's place in a distributed job, from its launcher's environment; None outside
    one (or when it is the job's only rank, or nothing says which job it is)."""
    env = os.environ if env is None else env
    launcher: str | None = None
    key: str | None = None
    rank = world = local = node = None
    restart = 0
    torchrun = _torchrun(env)
    if torchrun is not None and _int(env, "RANK") is not None:
        launcher, key = torchrun
        rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        local, node = _int(env, "LOCAL_RANK"), _int(env, "GROUP_RANK")
        restart = _int(env, "TORCHELASTIC_RESTART_COUNT") or 0
    elif _int(env, "SLURM_PROCID") is not None and _slurm_job(env) and _int(env, "RANK") is None:
        launcher, key = "slurm", _slurm_job(env)
        rank, world = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS", "SLURM_NPROCS")
        local, node = _int(env, "SLURM_LOCALID"), _int(env, "SLURM_NODEID")
        restart = _int(env, "SLURM_RESTART_COUNT") or 0
    elif _int(env, "OMPI_COMM_WORLD_RANK") is not None:
        launcher = "mpi"
        namespace = env.get("PMIX_NAMESPACE", "").strip() or env.get("OMPI_MCA_ess_base_jobid", "").strip()
        key = f"mpi:{namespace}" if namespace else None
        rank, world = _int(env, "OMPI_COMM_WORLD_RANK"), _int(env, "OMPI_COMM_WORLD_SIZE")
        local, node = _int(env, "OMPI_COMM_WORLD_LOCAL_RANK"), _int(env, "OMPI_COMM_WORLD_NODE_RANK")
    elif _int(env, "PMI_RANK") is not None:
        launcher = "mpi"
        namespace = env.get("PMI_KVSNAME", "").strip() or env.get("PMI_JOBID", "").strip()
        key = f"mpi:{namespace}" if namespace else None
        rank, world = _int(env, "PMI_RANK"), _int(env, "PMI_SIZE")
        local = _int(env, "MPI_LOCALRANKID", "PMI_LOCAL_RANK")
    elif _int(env, "RANK") is not None:
        launcher = "env"
        rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        local, node = _int(env, "LOCAL_RANK"), _int(env, "GROUP_RANK", "NODE_RANK", "CROSS_RANK")
        master = _master(env)
        key = _slurm_job(env) or (f"env:{master}" if master else None)
    if launcher is None or rank is None or rank < 0:
        return None
    named = env.get("HOLTER_JOB_ID", "").strip()
    if named:
        key = f"named:{named}"
    if key is None or world is None or world < 2 or rank >= world:
        return None
    return Job(
        launcher=launcher,
        key=key,
        rank=rank,
        world_size=world,
        local_rank=local,
        node_rank=node,
        host=socket.gethostname(),
        pid=os.getpid(),
        restart=restart,
    )
