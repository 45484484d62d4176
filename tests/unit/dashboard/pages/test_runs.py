"""The runs page: its count line and how names are shown."""

from __future__ import annotations

import json

from holter_dashboard.pages.runs import runs_count, runs_table
from plotly.utils import PlotlyJSONEncoder


def test_the_count_says_of_how_many_runs_when_every_match_is_shown() -> None:
    assert runs_count(12, 12, 1_040).children == "12 of 1,040 runs"


def test_the_count_says_how_many_match_when_the_page_holds_fewer() -> None:
    assert runs_count(500, 812, 2_000).children == "500 shown · 812 match · 2,000 runs"


def test_a_direction_override_in_a_run_name_is_spelled_out_in_the_table(vocab) -> None:  # type: ignore[no-untyped-def]
    run = {"id": "r1", "name": "baseline\u202e4pm.exe", "project": "p", "status": "running", "tags": [], "config": {}}
    table = json.dumps(runs_table([run], vocab, set(), [], []), cls=PlotlyJSONEncoder, ensure_ascii=False)
    assert "baseline\\\\u202e4pm.exe" in table and "\u202e" not in table
