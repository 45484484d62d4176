"""The runs page's count line."""

from __future__ import annotations

from holter_dashboard.pages.runs import runs_count


def test_the_count_says_of_how_many_runs_when_every_match_is_shown() -> None:
    assert runs_count(12, 12, 1_040).children == "12 of 1,040 runs"


def test_the_count_says_how_many_match_when_the_page_holds_fewer() -> None:
    assert runs_count(500, 812, 2_000).children == "500 shown · 812 match · 2,000 runs"
