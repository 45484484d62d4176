"""commands/worker.quiet_collector: the worker's start-up objects out of the collector's sight."""

from __future__ import annotations

import gc

from holter_server.commands import worker


def test_the_worker_freezes_what_it_built_and_collects_less_often() -> None:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    try:
        worker.quiet_collector()
        assert gc.get_freeze_count() > 10_000  # the modules and libraries imported so far
        assert gc.get_threshold() == worker.COLLECT_EVERY
        assert worker.COLLECT_EVERY[0] > before[0]
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
