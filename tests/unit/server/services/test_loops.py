"""BackgroundWork: on a SQLite file one process at a time runs the background loops."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from holter_server.services.loops import BackgroundWork, LoopService
from holter_server.store.database import background_lock_path
from tests.waiting import wait_until


class Counting(LoopService):
    name = "counting"

    def __init__(self) -> None:
        super().__init__(interval=0.01)
        self.rounds = 0

    def run_once(self) -> int:
        self.rounds += 1
        return 0


def test_a_sqlite_file_has_a_lock_beside_it_and_postgres_none(tmp_path: Path) -> None:
    assert background_lock_path(f"sqlite:///{tmp_path / 'holter.db'}") == tmp_path / "holter.db.worker.lock"
    assert background_lock_path("sqlite://") is None
    assert background_lock_path("postgresql+psycopg://postgres@127.0.0.1/test") is None


def test_only_the_holder_of_the_lock_runs_its_loops_and_another_takes_over(tmp_path: Path) -> None:
    lock = tmp_path / "holter.db.worker.lock"
    first, second = Counting(), Counting()
    leader, follower = BackgroundWork([first], lock, poll=0.02), BackgroundWork([second], lock, poll=0.02)
    leader.start()
    assert leader.running.wait(5)
    follower.start()
    time.sleep(0.3)
    assert not follower.running.is_set() and second.rounds == 0 and first.rounds > 0
    leader.stop()
    assert follower.running.wait(5) and wait_until(lambda: second.rounds > 0, timeout=5, interval=0.01)
    follower.stop()


def test_without_a_lock_the_loops_start_at_once_and_stop(tmp_path: Path) -> None:
    loop = Counting()
    work = BackgroundWork([loop], None)
    work.start()
    assert work.running.is_set() and wait_until(lambda: loop.rounds > 0, timeout=5, interval=0.01)
    work.stop()
    rounds = loop.rounds
    time.sleep(0.1)
    assert loop.rounds == rounds


def test_stopping_while_waiting_for_the_lock_starts_nothing(tmp_path: Path) -> None:
    lock = tmp_path / "holter.db.worker.lock"
    holder = BackgroundWork([Counting()], lock, poll=0.02)
    holder.start()
    assert holder.running.wait(5)
    waiting_loop = Counting()
    waiting = BackgroundWork([waiting_loop], lock, poll=0.02)
    waiting.start()
    waiting.stop()
    holder.stop()
    time.sleep(0.1)
    assert not waiting.running.is_set() and waiting_loop.rounds == 0
    assert not any(t.name == "holter-background-lock" for t in threading.enumerate())


def test_a_process_without_loops_leaves_the_lock_to_one_with_them(tmp_path: Path) -> None:
    lock = tmp_path / "holter.db.worker.lock"
    api_only = BackgroundWork([], lock, poll=0.02)
    api_only.start()
    loop = Counting()
    worker = BackgroundWork([loop], lock, poll=0.02)
    worker.start()
    assert worker.running.wait(5) and wait_until(lambda: loop.rounds > 0, timeout=5, interval=0.01)
    worker.stop()
    api_only.stop()

