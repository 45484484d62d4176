"""Waiting in tests for something another process or thread does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 30.0, interval: float = 0.2) -> T:
    """Call `condition` until it returns something true, and return that; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, (
            f"gave up after {timeout} s waiting for {getattr(condition, '__qualname__', condition)}"
        )
        time.sleep(interval)
