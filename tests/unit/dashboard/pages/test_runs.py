"""The runs page: its count line and how names are shown."""

from __future__ import annotations

import json

from holter_dashboard.pages.runs import page_of, runs_count, runs_table
from plotly.utils import PlotlyJSONEncoder


def test_the_count_says_of_how_many_runs_when_every_match_is_shown() -> None:
    assert runs_count(range(12), 12, 12, 1_040).children == "12 of 1,040 runs"


def test_the_count_says_which_page_of_the_runs_is_drawn() -> None:
    assert runs_count(range(50, 100), 120, 120, 2_000).children == "51–100 of 120 · 2,000 runs"


def test_the_count_says_how_many_match_when_the_service_listed_fewer() -> None:
    assert runs_count(range(0, 50), 500, 812, 2_000).children == "1–50 of 500 · 812 match · 2,000 runs"


def test_a_page_is_fifty_rows_and_past_the_last_page_is_the_last() -> None:
    assert page_of(120, 2) == range(50, 100) and page_of(120, 9) == range(100, 120)
    assert page_of(0, 3) == range(0, 0) and page_of(30, None) == range(0, 30)


def test_a_direction_override_in_a_run_name_is_spelled_out_in_the_table(vocab) -> None:  # type: ignore[no-untyped-def]
    run = {"id": "r1", "name": "baseline\u202e4pm.exe", "project": "p", "status": "running", "tags": [], "config": {}}
    table = json.dumps(runs_table([run], vocab, set(), [], []), cls=PlotlyJSONEncoder, ensure_ascii=False)
    assert "baseline\\\\u202e4pm.exe" in table and "\u202e" not in table
