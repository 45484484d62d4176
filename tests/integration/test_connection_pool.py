"""A process's Postgres connections stay open under bursts instead of being opened per request."""

from __future__ import annotations

import threading

import psycopg
import pytest
from holter_server.store import database
from holter_server.store.database import make_engine
from sqlalchemy import event, exc, text


def test_a_burst_of_concurrent_requests_reuses_the_connections_it_opened(postgres_url: str) -> None:
    engine = make_engine(postgres_url, pool_size=25)
    opened = []
    event.listen(engine, "connect", lambda connection, record: opened.append(connection))
    all_in = threading.Barrier(25)

    def request() -> None:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
            all_in.wait(timeout=30)  # 25 requests at once

    try:
        for _ in range(3):
            threads = [threading.Thread(target=request) for _ in range(25)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        # the first burst opened its 25 connections; the later bursts found them open
        assert len(opened) == 25
        assert engine.pool.checkedin() == 25
    finally:
        engine.dispose()


def test_a_process_keeps_ten_connections_by_default_and_no_overflow(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    try:
        assert (engine.pool.size(), engine.pool._max_overflow) == (10, 0)
    finally:
        engine.dispose()


def test_the_pool_size_is_the_most_connections_a_process_opens(postgres_url: str) -> None:
    engine = make_engine(postgres_url, pool_size=3)
    try:
        held = [engine.connect() for _ in range(3)]
        engine.pool._timeout = 0.2  # a fourth request waits for one of the three, here briefly
        with pytest.raises(exc.TimeoutError, match="limit of size 3 overflow 0"):
            engine.connect()
        for connection in held:
            connection.close()
    finally:
        engine.dispose()


def test_a_connection_in_steady_use_is_not_pinged_before_each_transaction(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(postgres_url)
    pings = []
    ping = engine.dialect.do_ping
    monkeypatch.setattr(engine.dialect, "do_ping", lambda connection: pings.append(1) or ping(connection))
    try:
        for _ in range(20):
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        assert pings == []
    finally:
        engine.dispose()


def test_a_connection_closed_while_idle_is_replaced_before_use(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(postgres_url)
    try:
        with engine.connect() as connection:
            first = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with psycopg.connect(postgres_url.replace("+psycopg", ""), autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(%s)", (first,))
        monkeypatch.setattr(database, "PING_AFTER_IDLE_S", 0.0)  # idle long enough to be doubted
        with engine.connect() as connection:  # no error: the dead one was found and replaced
            second = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        assert second != first
    finally:
        engine.dispose()
