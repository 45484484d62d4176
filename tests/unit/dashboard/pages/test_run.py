"""The run page's pure pieces: the view a URL asks for."""

from __future__ import annotations

from holter_dashboard.pages.run.layout import view_from_query


def test_the_view_comes_from_the_url() -> None:
    view = view_from_query(smooth="0.9", log="1", x="time", start="100", end="200", metrics="loss,grad_norm")
    assert view == {
        "smoothing": 0.9,
        "log_y": True,
        "x_axis": "time",
        "start": 100,
        "end": 200,
        "metrics": ["loss", "grad_norm"],
    }
