"""The pieces of `holter follow` that need no service: its options, its state file, and telling
whether the watched process still runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from holter.cli import parse_args
from holter.follow import FollowState, default_state_path, parse_kinds, process_alive


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
