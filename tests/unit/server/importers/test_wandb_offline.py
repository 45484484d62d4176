import math

import pytest
from holter_server.importers import ImportFormatError, detect_format, open_source

from tests.foreign_runs import write_wandb_offline_run


@pytest.fixture(scope="module")
def wandb_run(tmp_path_factory: pytest.TempPathFactory):
    return write_wandb_offline_run(tmp_path_factory.mktemp("wandb"))


def test_offline_run_folder_is_recognised(wandb_run):
    assert detect_format(wandb_run) == "wandb"
    assert detect_format(wandb_run.parent.parent) == "wandb"  # the folder holding wandb/ with one run


def test_train_global_step_is_the_step_not_the_log_call_count(wandb_run):
    points = list(open_source(wandb_run).points)
    loss = [p for p in points if p.metric == "train/loss"]
    assert [p.step for p in loss] == [8, 16, 24, 32, 40]
    assert [p.value for p in loss] == pytest.approx([1.9, 1.8, 1.7, 1.6, 1.5])
    (nan,) = [p for p in points if p.metric == "eval/loss"]
    assert nan.step == 40 and math.isnan(nan.value)
    assert not {"_step", "_timestamp", "_runtime", "train/global_step"} & {p.metric for p in points}


def test_wall_times_are_the_runs_own(wandb_run):
    times = [p.wall_time for p in open_source(wandb_run).points]
    assert all(t is not None and t > 1.6e9 for t in times) and times == sorted(times)


def test_config_and_name_come_from_the_run(wandb_run):
    source = open_source(wandb_run)
    list(source.points)
    assert source.name == "wandb-baseline"
    assert source.config == {"lr": 3e-4, "optim": {"name": "adamw", "betas": [0.9, 0.95]}, "warmup_steps": 100}


def test_step_column_overrides_the_choice(wandb_run):
    points = list(open_source(wandb_run, step_column="_step").points)
    assert [p.step for p in points if p.metric == "train/loss"] == [0, 1, 2, 3, 4]


def test_a_torn_last_record_ends_the_log_and_a_damaged_one_is_an_error(wandb_run, tmp_path):
    (log,) = wandb_run.glob("run-*.wandb")
    data = log.read_bytes()
    torn = tmp_path / "torn" / log.name
    torn.parent.mkdir()
    torn.write_bytes(data[: len(data) - 5])  # killed mid-write
    assert len([p for p in open_source(torn).points if p.metric == "train/loss"]) == 5
    damaged = tmp_path / "damaged" / log.name
    damaged.parent.mkdir()
    damaged.write_bytes(data[:200] + bytes([data[200] ^ 0xFF]) + data[201:])
    with pytest.raises(ImportFormatError, match="damaged record"):
        list(open_source(damaged).points)


TABLE_SCRIPT = """
import wandb
run = wandb.init(project="p", name="tables")
for step in range(3):
    table = wandb.Table(columns=["a", "b"], data=[[1, 2], [3, 4]])
    wandb.log({"loss": 1.0 - step / 10, "preds": table, "weights": wandb.Histogram([1, 2, 3]), "acc": {"top1": 0.5}})
wandb.finish()
"""


def test_tables_and_histograms_are_not_curves_their_metadata_neither(tmp_path):
    # W&B writes a logged Table as items under its key: preds/_type "table-file", preds/nrows, preds/ncols, preds/size
    run = write_wandb_offline_run(tmp_path, TABLE_SCRIPT)
    assert sorted({p.metric for p in open_source(run).points}) == ["acc/top1", "loss"]


def frame(kind: int, data: bytes) -> bytes:
    """One record of a LevelDB-style log: CRC-32 of type and data, length, type, data."""
    import struct
    import zlib

    return struct.pack("<IHB", zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF, len(data), kind) + data


def test_a_malformed_record_with_a_valid_checksum_is_a_format_error(tmp_path):
    pytest.importorskip("wandb")
    log = tmp_path / "run-abc.wandb"
    log.write_bytes(b":W&B\x00\x00\x01" + frame(1, b"\x0a\xff\xff\xff\xff\x0f"))  # a field longer than the record
    with pytest.raises(ImportFormatError, match=r"run-abc\.wandb: malformed record at byte 7"):
        list(open_source(log).points)
