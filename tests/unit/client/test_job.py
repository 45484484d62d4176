"""Which distributed job a process belongs to, from its launcher's environment (holter/job.py)."""

from __future__ import annotations

import pytest
from holter.job import Job, job_from_environment, rank_series

TORCHRUN = {
    "RANK": "3",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "8",
    "GROUP_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "TORCHELASTIC_RUN_ID": "4f1c6b2e-0d5a-4a43-9f0e-3c1b2a6d7e8f",
    "TORCHELASTIC_RESTART_COUNT": "0",
    "MASTER_ADDR": "node-0",
    "MASTER_PORT": "29500",
}


def test_torchrun_gives_rank_world_node_and_the_rendezvous_id_as_the_job() -> None:
    job = job_from_environment(TORCHRUN)
    assert job is not None
    assert (job.launcher, job.rank, job.world_size, job.local_rank, job.node_rank) == ("torchrun", 3, 8, 1, 1)
    assert job.key == "torchrun:4f1c6b2e-0d5a-4a43-9f0e-3c1b2a6d7e8f"


def test_every_rank_of_one_job_derives_the_same_run_id_and_another_job_another() -> None:
    ids = {job_from_environment({**TORCHRUN, "RANK": str(r)}).run_id("gpt", "baseline") for r in range(8)}  # type: ignore[union-attr]
    assert len(ids) == 1
    other = job_from_environment({**TORCHRUN, "TORCHELASTIC_RUN_ID": "another"})
    assert other is not None and other.run_id("gpt", "baseline") not in ids
    assert job_from_environment(TORCHRUN).run_id("gpt", "other-name") not in ids  # type: ignore[union-attr]


def test_a_static_rendezvous_is_told_by_its_slurm_job_else_its_store_address() -> None:
    static = {**TORCHRUN, "TORCHELASTIC_RUN_ID": "none"}
    assert job_from_environment(static).key == "torchrun:node-0:29500"  # type: ignore[union-attr]
    under_slurm = {**static, "SLURM_JOB_ID": "81234", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3"}
    assert job_from_environment(under_slurm).key == "slurm:81234.0"  # type: ignore[union-attr]


def test_srun_without_torchrun_gives_the_slurm_task() -> None:
    env = {
        "SLURM_JOB_ID": "991",
        "SLURM_STEP_ID": "2",
        "SLURM_PROCID": "5",
        "SLURM_LOCALID": "1",
        "SLURM_NTASKS": "16",
        "SLURM_NODEID": "2",
        "SLURM_RESTART_COUNT": "1",
    }
    job = job_from_environment(env)
    assert job is not None
    assert (job.launcher, job.key, job.rank, job.world_size, job.local_rank, job.node_rank, job.restart) == (
        "slurm",
        "slurm:991.2",
        5,
        16,
        1,
        2,
        1,
    )


def test_open_mpi_and_hydra_give_their_ranks_and_namespaces() -> None:
    ompi = {
        "OMPI_COMM_WORLD_RANK": "2",
        "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": "0",
        "PMIX_NAMESPACE": "prterun-host-123@1",
    }
    job = job_from_environment(ompi)
    assert job is not None and (job.launcher, job.rank, job.world_size, job.key) == (
        "mpi",
        2,
        4,
        "mpi:prterun-host-123@1",
    )
    hydra = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "PMI_KVSNAME": "kvs_4242_0"}
    job = job_from_environment(hydra)
    assert job is not None and (job.rank, job.world_size, job.local_rank, job.key) == (1, 2, 1, "mpi:kvs_4242_0")


def test_deepspeeds_launcher_is_read_from_rank_world_size_and_master() -> None:
    env = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29611"}
    job = job_from_environment(env)
    assert job is not None and (job.launcher, job.key) == ("env", "env:127.0.0.1:29611")


@pytest.mark.parametrize(
    "env",
    [
        {},  # no launcher
        {**TORCHRUN, "WORLD_SIZE": "1", "RANK": "0"},  # a job of one rank
        {"RANK": "0", "WORLD_SIZE": "2"},  # nothing says which job
        {**TORCHRUN, "RANK": "9"},  # a rank beyond the world
        {**TORCHRUN, "RANK": "x"},
    ],
)
def test_no_job_where_the_environment_does_not_make_one(env: dict[str, str]) -> None:
    assert job_from_environment(env) is None


def test_holter_job_id_names_the_job_on_any_launcher() -> None:
    job = job_from_environment({"RANK": "0", "WORLD_SIZE": "2", "HOLTER_JOB_ID": "sweep-7/trial-3"})
    assert job is not None and job.key == "named:sweep-7/trial-3"


def test_rank_zeros_series_are_the_runs_own_and_the_others_keep_theirs_apart() -> None:
    assert rank_series("loss", 0) == "loss"
    assert rank_series("train/loss", 3) == "holter/rank/3/train/loss"


def test_what_a_rank_tells_the_service_when_it_joins() -> None:
    job = Job(launcher="torchrun", key="torchrun:x", rank=1, world_size=4, local_rank=1, host="gpu-3", pid=42)
    assert job.payload() == {
        "rank": 1,
        "world_size": 4,
        "local_rank": 1,
        "node_rank": None,
        "host": "gpu-3",
        "pid": 42,
        "launcher": "torchrun",
        "job": "torchrun:x",
        "restart": 0,
    }
