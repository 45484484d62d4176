"""Which format a path is (importers.detect_format), found without blocking on what is no file."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from holter_server.importers import ImportFormatError, detect_format


def test_a_fifo_is_refused_before_anything_opens_it(tmp_path: Path) -> None:
    # issue 47: holter import of a FIFO named like a log blocked in open() for good
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def detect() -> None:
        try:
            detect_format(fifo)
        except ImportFormatError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=detect, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():  # unblock the old code's open() so the test process can end
        with open(fifo, "w"):
            pass
        pytest.fail("detecting the format of a FIFO blocked")
    assert outcome and "not a regular file" in str(outcome[0])
