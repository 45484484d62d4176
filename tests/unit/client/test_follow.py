"""The pieces of `holter follow` that need no service: its options, its state file, telling
whether the watched process still runs, and what a distributed job's log becomes (read back from
an offline run's spool: exactly the requests the service would get, in order)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from holter.cli import parse_args
from holter.follow import Follower, FollowState, default_state_path, parse_kinds, process_alive
from holter.run import init
from holter.sender import decode_entry
from holter_readers.textlog import TextLogReader


def test_the_command_line_takes_the_follow_options_before_or_after_the_url() -> None:
    args = parse_args(
        [
            "--url",
            "http://127.0.0.1:1",
            "follow",
            "train.log",
            "--log-format",
            "megatron",
            "--idle",
            "600",
            "--pid",
            "42",
        ]
    )
    assert (args.command, args.path, args.log_format, args.idle, args.pid, args.url) == (
        "follow",
        "train.log",
        "megatron",
        600.0,
        42,
        "http://127.0.0.1:1",
    )
    assert parse_args(["follow", "runs/", "--url", "http://h:1"]).url == "http://h:1"


def test_kind_options_take_names_globs_and_a_bare_kind() -> None:
    assert parse_kinds(["lm loss=loss", "eval/*=eval_loss", "statistic"]) == {
        "lm loss": "loss",
        "eval/*": "eval_loss",
        "*": "statistic",
    }
    with pytest.raises(ValueError, match="expected NAME=KIND or KIND"):
        parse_kinds(["loss="])


def test_the_state_file_is_replaced_whole_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "state" / "x.json"
    state = FollowState(path)
    state.save(run_id="abc", position={"offset": 10})
    state.save(finished=True)
    assert json.loads(path.read_text()) == {"run_id": "abc", "position": {"offset": 10}, "finished": True}
    assert FollowState(path).data["run_id"] == "abc" and not list(path.parent.glob(".*tmp"))


def test_an_unreadable_state_file_starts_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.json"
    path.write_text("{torn")
    assert FollowState(path).data == {} and "starting over" in capsys.readouterr().err


def test_each_path_and_format_has_a_state_file_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLTER_SPOOL_DIR", str(tmp_path / "spool"))
    one = default_state_path(tmp_path / "train.log", "textlog")
    assert one.parent == tmp_path / "follow"
    assert one != default_state_path(tmp_path / "other.log", "textlog")
    assert one != default_state_path(tmp_path / "train.log", "csv")


def test_a_process_that_exited_is_not_alive_even_before_it_is_reaped() -> None:
    assert process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while process_alive(child.pid):  # a zombie until waited for: not alive
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child.wait()
    assert not process_alive(child.pid)


def followed(tmp_path: Path, text: str) -> list[tuple[str, Any]]:
    """What following a log of `text` into an offline run sends, request by request, in order."""
    log = tmp_path / "torchrun.log"
    log.write_text(text)
    run = init(project="p", offline=True, spool_dir=tmp_path / "spool", quiet=True, system_vitals=False)
    follower = Follower(TextLogReader(log), run, job=str(log))
    follower.poll(final=True)
    run.finish()
    sent = [decode_entry(entry.read_bytes()) for entry in sorted((tmp_path / "spool" / run.id).glob("*.json"))]
    return [(path, json.loads(body)) for path, body in sent]


def test_each_ranks_values_are_its_own_series_and_each_rank_joins_before_its_points(tmp_path: Path) -> None:
    sent = followed(
        tmp_path,
        "[default0]:step 0 | loss 2.0\n[default1]:step 0 | loss 2.1\n[default0]:step 1 | loss 1.9\n"
        "[default3]:step 0 | loss 2.3\n[default1]:step 1 | loss nan\n[default3]:step 1 | loss 2.2\n",
    )
    joins = [(body["rank"]["rank"], body["rank"]["world_size"]) for path, body in sent if "rank" in body]
    assert joins == [(0, 2), (1, 2), (3, 4)]  # once each, rank 0 with the first other, the world as far as seen
    (joined, *_) = [body["rank"] for _, body in sent if "rank" in body]
    assert joined["launcher"] == "follow" and joined["beats"] is False and joined["job"].endswith("torchrun.log")
    series: dict[str, dict[int, Any]] = {}
    for path, body in sent:
        if path.endswith("/points"):
            for name, column in body["metrics"].items():
                series.setdefault(name, {}).update(zip(column["steps"], column["values"]))
    assert series == {
        "loss": {0: 2.0, 1: 1.9},
        "holter/rank/1/loss": {0: 2.1, 1: "NaN"},
        "holter/rank/3/loss": {0: 2.3, 1: 2.2},
    }
    for rank in (1, 3):
        join = next(i for i, (_, body) in enumerate(sent) if body.get("rank", {}).get("rank") == rank)
        points = next(i for i, (_, body) in enumerate(sent) if f"holter/rank/{rank}/loss" in body.get("metrics", {}))
        assert join < points


def test_a_log_of_one_rank_makes_no_job(tmp_path: Path) -> None:
    sent = followed(tmp_path, "step 0 | loss 2.0\n[rank0]:step 1 | loss 1.9\n")
    assert not [body for _, body in sent if "rank" in body]
    assert [body["metrics"]["loss"]["steps"] for path, body in sent if path.endswith("/points")] == [[0, 1]]
