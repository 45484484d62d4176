"""Reading a growing file: whole lines only, never a line held without bound, a file cut or
replaced read again from its start, and nothing opened that is not a regular file."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from holter_readers import tail
from holter_readers.tail import FileTail


def test_only_whole_lines_are_taken_and_the_offset_is_past_each(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"one\ntwo\r\nthr")
    reader = FileTail(path)
    assert list(reader.lines()) == [b"one", b"two\r"] and reader.offset == 9
    assert list(reader.lines(final=True)) == [b"thr"] and reader.offset == 12


def test_carriage_returns_end_lines_for_progress_bars(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b" 1%|x| 1/9 [\r 2%|x| 2/9 [\n")
    assert list(FileTail(path).lines(carriage_returns=True)) == [b" 1%|x| 1/9 [", b" 2%|x| 2/9 ["]


def test_an_endless_line_is_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tail, "MAX_LINE", 16)
    monkeypatch.setattr(tail, "CHUNK", 8)
    path = tmp_path / "log"
    path.write_bytes(b"short\n" + b"x" * 100 + b"\nafter\n")
    assert list(FileTail(path).lines()) == [b"short", None, b"after"]


def test_a_file_cut_shorter_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a\nb\n")
    reader = FileTail(path)
    list(reader.lines())
    path.write_bytes(b"c\n")  # truncated in place: same inode, shorter
    assert list(reader.lines()) == [b"c"] and reader.restarted


def test_a_log_cut_and_written_again_past_the_offset_is_read_from_its_start(tmp_path: Path) -> None:
    """A job re-run with `> log`: the same inode, and by the next look the new log is longer than
    the old offset, so size and inode alone would go on in the middle of it (issue 47)."""
    path = tmp_path / "log"
    path.write_bytes(b"".join(b"old %d\n" % n for n in range(50)))
    said: list[str] = []
    reader = FileTail(path, say=said.append)
    assert len(list(reader.lines())) == 50
    inode = path.stat().st_ino
    with path.open("wb") as handle:  # truncated in place, then written past the old offset
        handle.write(b"".join(b"new %d\n" % n for n in range(300)))
    assert path.stat().st_ino == inode and path.stat().st_size > reader.offset
    assert list(reader.lines())[:2] == [b"new 0", b"new 1"] and reader.restarted
    assert said == [f"{path} was truncated or replaced; reading it again from the start"]
    reader.restarted = False
    assert list(reader.lines()) == [] and not reader.restarted and len(said) == 1  # said once


def test_a_cut_and_rewritten_log_is_noticed_by_the_next_process_too(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"".join(b"step %d | loss 2.0\n" % n for n in range(105)))
    first = FileTail(path)
    list(first.lines())
    kept = json.loads(json.dumps(first.position()))  # as the follower's state file keeps it
    with path.open("wb") as handle:
        handle.write(b"".join(b"step %d | loss 1.5\n" % n for n in range(300)))
    second = FileTail(path)
    second.restore(kept)
    lines = list(second.lines())
    assert len(lines) == 300 and lines[0] == b"step 0 | loss 1.5" and second.restarted


def test_a_log_that_only_grew_goes_on_where_it_stopped(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a\nb\n")
    first = FileTail(path)
    list(first.lines())
    with path.open("ab") as handle:
        handle.write(b"c\n")
    second = FileTail(path)
    second.restore(first.position())
    assert list(second.lines()) == [b"c"] and not second.restarted


def test_a_position_kept_before_the_checksum_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a\nb\nc\n")
    stat = path.stat()
    reader = FileTail(path)
    reader.restore({"offset": 4, "identity": [stat.st_dev, stat.st_ino]})  # a state file of an older holter
    assert list(reader.lines()) == [b"c"] and not reader.restarted


def test_a_line_longer_than_the_limit_is_not_handed_over_even_when_it_came_whole(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"short\n" + b"x" * 5000 + b"\nafter\n")  # all of it in one chunk
    assert list(FileTail(path).lines(max_line=1024)) == [b"short", None, b"after"]


def in_a_thread(work: Callable[[], object], fifo: Path) -> bool:
    """Whether `work` finished within 10 s; a thread stuck opening the FIFO is let go by opening
    its other end, so the test cannot hang."""
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(10)
    stuck = thread.is_alive()
    if stuck:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
    return not stuck


def test_a_fifo_is_never_opened_and_is_said_once(tmp_path: Path) -> None:
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    said: list[str] = []
    reader = FileTail(fifo, say=said.append)
    got: list[object] = []
    assert in_a_thread(lambda: got.extend([*reader.lines(), *reader.lines(final=True)]), fifo)
    assert got == [] and said == [f"{fifo} is not a regular file (a FIFO, a device or a socket); it is not read"]


def test_a_file_resolving_outside_its_folder_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "outside").write_bytes(b"secret\n")
    folder = tmp_path / "followed"
    folder.mkdir()
    (folder / "inside").write_bytes(b"mine\n")
    (folder / "out.log").symlink_to(tmp_path / "outside")
    (folder / "in.log").symlink_to(folder / "inside")
    said: list[str] = []
    assert list(FileTail(folder / "out.log", root=folder, say=said.append).lines()) == []
    assert said == [f"{folder / 'out.log'} resolves outside {folder}; it is not read"]
    assert list(FileTail(folder / "in.log", root=folder).lines()) == [b"mine"]
