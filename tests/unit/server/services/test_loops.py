"""BackgroundWork: on a SQLite file one process at a time runs the background loops; the
detection loop's pacing; the alert dispatcher's sleep when idle and its wake on a queued delivery."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from holter_server.services.loops import AlertDispatcher, BackgroundWork, DetectionLoop, LoopService
from holter_server.store import alerts as alerts_store
from holter_server.store.database import background_lock_path, make_engine, make_session_factory, upgrade
from holter_server.store.runs import now
from sqlalchemy.orm import Session

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


def detection_loop(tmp_path: Path, cpu_share: float) -> DetectionLoop:
    engine = make_engine(f"sqlite:///{tmp_path / 'holter.db'}")
    return DetectionLoop(make_session_factory(engine), interval=0.5, period=1.0, cpu_share=cpu_share)


def test_a_light_detection_pass_waits_out_the_second(tmp_path: Path) -> None:
    loop = detection_loop(tmp_path, cpu_share=0.5)
    loop.last_cpu = 0.1
    assert loop.pause_after(done=10, took=0.1) == pytest.approx(0.9)


def test_a_long_detection_pass_is_spaced_to_keep_detection_within_its_share_of_a_core(tmp_path: Path) -> None:
    loop = detection_loop(tmp_path, cpu_share=0.5)
    loop.last_cpu = 1.5  # a lab's worth of metrics: 1.5 CPU-s in a 1.6 s pass
    assert loop.pause_after(done=10, took=1.6) == pytest.approx(1.4)
    # a backlog (a full pass) is no exception: it waits for the share, not for the second
    assert loop.pause_after(done=loop.limit, took=1.6) == pytest.approx(1.4)
    loop.last_cpu = 0.2
    assert loop.pause_after(done=loop.limit, took=0.3) == pytest.approx(0.1)


def test_without_a_cpu_share_a_backlog_is_worked_without_pause(tmp_path: Path) -> None:
    loop = detection_loop(tmp_path, cpu_share=0.0)
    loop.last_cpu = 1.5
    assert loop.pause_after(done=loop.limit, took=1.6) == 0.0
    assert loop.pause_after(done=0, took=0.01) == 0.5


def test_the_detection_pass_records_the_cpu_it_spent(tmp_path: Path) -> None:
    loop = detection_loop(tmp_path, cpu_share=0.5)
    upgrade(f"sqlite:///{tmp_path / 'holter.db'}")
    loop.last_cpu = -1.0
    assert loop.run_once() == 0
    assert 0.0 <= loop.last_cpu < 5.0


class CountingDispatcher(AlertDispatcher):
    """The real dispatcher, its rounds counted."""

    def __init__(self, tmp_path: Path, interval: float, idle_interval: float) -> None:
        url = f"sqlite:///{tmp_path / 'holter.db'}"
        upgrade(url)
        self.factory = make_session_factory(make_engine(url))
        super().__init__(
            self.factory,
            base_url="http://127.0.0.1:1",
            timeout=1.0,
            give_up_after=timedelta(hours=1),
            allow_private=True,
            interval=interval,
            idle_interval=idle_interval,
        )
        self.rounds = 0

    def run_once(self) -> int:
        self.rounds += 1
        return super().run_once()


def test_an_idle_dispatcher_polls_less_and_less_often_and_at_once_again_after_work(tmp_path: Path) -> None:
    dispatcher = CountingDispatcher(tmp_path, interval=0.25, idle_interval=2.0)
    assert [dispatcher.pause_after(done=0, took=0.01) for _ in range(6)] == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    assert dispatcher.pause_after(done=1, took=0.01) == 0.0
    assert dispatcher.pause_after(done=0, took=0.01) == 0.25


def queue_one_delivery(session: Session) -> None:
    """Add a channel (committed) and queue one alert to it, leaving that uncommitted."""
    channel = alerts_store.add_channel(
        session=session,
        name="c",
        kind="webhook",
        project=None,
        target="http://127.0.0.1:1/",
        signing_secret=None,
    )
    session.commit()
    alerts_store.queue_delivery(
        session=session,
        channel_id=channel.id,
        rule_id=None,
        run_id=None,
        event_id=None,
        purpose="alert",
        idempotency_key="k1",
        alert={},
        not_before=now(),
    )


def test_a_delivery_queued_in_the_process_wakes_a_sleeping_dispatcher(tmp_path: Path) -> None:
    dispatcher = CountingDispatcher(tmp_path, interval=60.0, idle_interval=60.0)
    dispatcher.start()
    try:
        assert wait_until(lambda: dispatcher.rounds == 1, timeout=5, interval=0.01)
        time.sleep(0.2)
        assert dispatcher.rounds == 1  # asleep: nothing to send, next look in a minute
        with dispatcher.factory() as session:
            queue_one_delivery(session)
            time.sleep(0.2)
            assert dispatcher.rounds == 1  # not before the commit: it would not see the row
            session.commit()
        assert wait_until(lambda: dispatcher.rounds >= 2, timeout=5, interval=0.01)
    finally:
        dispatcher.stop()


def test_a_rolled_back_delivery_wakes_no_dispatcher(tmp_path: Path) -> None:
    dispatcher = CountingDispatcher(tmp_path, interval=60.0, idle_interval=60.0)
    dispatcher.start()
    try:
        assert wait_until(lambda: dispatcher.rounds == 1, timeout=5, interval=0.01)
        with dispatcher.factory() as session:
            queue_one_delivery(session)
            session.rollback()
            session.commit()  # a later transaction that queued nothing
        time.sleep(0.3)
        assert dispatcher.rounds == 1
    finally:
        dispatcher.stop()
