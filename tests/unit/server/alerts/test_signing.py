"""The generic webhook's HMAC signature verifies, and tampering or replay does not."""

from __future__ import annotations

from holter_server.alerts.signing import sign, verify

SECRET = "s3cret-signing-key-0123456789"


def test_a_signature_verifies_over_the_same_body() -> None:
    assert verify(SECRET, b'{"a":1}', sign(SECRET, b'{"a":1}'))


def test_a_changed_body_or_wrong_secret_fails() -> None:
    header = sign(SECRET, b'{"a":1}')
    assert not verify(SECRET, b'{"a":2}', header)
    assert not verify("another-secret-0123456789", b'{"a":1}', header)


def test_an_old_signature_is_refused_as_a_replay() -> None:
    header = sign(SECRET, b"x", timestamp=1_000)
    assert not verify(SECRET, b"x", header, now=1_000 + 301)
    assert verify(SECRET, b"x", header, now=1_000 + 299)


def test_a_malformed_header_is_refused() -> None:
    assert not verify(SECRET, b"x", "nonsense")
