"""The dashboard's shared components: the health badge counts problems, not events."""

from __future__ import annotations

from holter_dashboard.components import health_badge


def test_the_health_badge_counts_one_problem_however_many_events_it_made(vocab) -> None:  # type: ignore[no-untyped-def]
    # one creeping failure: 3 events on the loss, 43 info-level throughput findings (issue 46)
    assert health_badge("critical", vocab, 46, {"critical": 1}).children == "critical · 1 problem"


def test_the_health_badge_counts_problems_of_every_severity(vocab) -> None:  # type: ignore[no-untyped-def]
    assert health_badge("critical", vocab, 9, {"critical": 1, "warning": 2}).children == "critical · 3 problems"


def test_info_findings_alone_are_no_problem_to_count(vocab) -> None:  # type: ignore[no-untyped-def]
    assert health_badge("info", vocab, 40, {}).children == "info"


def test_a_service_that_does_not_count_problems_shows_its_open_events(vocab) -> None:  # type: ignore[no-untyped-def]
    assert health_badge("warning", vocab, 4).children == "warning · 4"
