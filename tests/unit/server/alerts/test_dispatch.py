"""Retry timing of the dispatcher."""

from __future__ import annotations

from datetime import timedelta

from holter_server.services.dispatch import DeliveryError, _retry_after, next_attempt
from holter_server.store.models import DeliveryRow
from holter_server.store.runs import now


def rows(attempts: int, age_s: float) -> list[DeliveryRow]:
    return [DeliveryRow(attempts=attempts, created_at=now() - timedelta(seconds=age_s))]


def test_retry_after_is_respected() -> None:
    status, when = next_attempt(rows(0, 1), DeliveryError("429", retry_after=7), timedelta(hours=1))
    assert status == "pending" and 6 <= (when - now()).total_seconds() <= 7


def test_backoff_grows_and_is_capped_at_five_minutes() -> None:
    waits = [(next_attempt(rows(n, 1), DeliveryError("503"), timedelta(days=1))[1] - now()).total_seconds() for n in (0, 3, 20)]
    assert waits[0] < waits[1] < waits[2] <= 300


def test_after_give_up_the_delivery_fails_visibly() -> None:
    assert next_attempt(rows(3, 120), DeliveryError("down"), timedelta(seconds=60)) == ("failed", None)


def test_retry_after_reads_seconds_and_dates() -> None:
    assert _retry_after("3") == 3.0
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert _retry_after("soon") is None
