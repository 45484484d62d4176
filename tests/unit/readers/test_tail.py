"""Reading a growing file: whole lines only, and never a line held without bound."""

from __future__ import annotations

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
