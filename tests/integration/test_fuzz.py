"""Property-based fuzzing of the whole API (schemathesis against the OpenAPI document of a real
server, on SQLite and Postgres): whatever it sends, the service never answers 5xx.

Bounded budget: HOLTER_FUZZ_EXAMPLES examples per operation (default 10). Driven through
Hypothesis directly rather than schemathesis' pytest plugin, which does not run under pytest 9.
"""

from __future__ import annotations

import os

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from tests.servers import ServerProcess  # noqa: E402

EXAMPLES = int(os.environ.get("HOLTER_FUZZ_EXAMPLES", "10"))
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                         suppress_health_check=list(HealthCheck))


def test_no_request_makes_the_service_fail(server: ServerProcess) -> None:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @FUZZ_SETTINGS
        @given(case=operation.as_strategy())
        def fuzz(case) -> None:  # type: ignore[no-untyped-def]
            response = case.call(timeout=60)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} {response.status_code}: {response.text[:200]}")

        fuzz()
    assert operations > 40
    assert failures == [], "\n".join(failures)
