"""The runs page's config filter."""

from __future__ import annotations

from holter_dashboard.pages.runs import config_matches


def test_config_filter() -> None:
    assert config_matches({"optim": {"lr": 0.0003}}, "optim.lr=0.0003")
    assert not config_matches({"lr": 1}, "lr=2") and config_matches({"lr": 1}, "lr") and config_matches({}, "")
