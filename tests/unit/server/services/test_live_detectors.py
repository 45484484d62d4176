"""The detection loop's detectors at hand: bounded, least recently used first, and nothing kept
of a run once it has no detector at hand."""

from __future__ import annotations

from holter_server.services.detection import FINDINGS_EVERY_S, LiveDetectors, _Live


def live_at(step: int) -> _Live:
    return _Live(saved_step=step, kind="loss", detector=None, saved_at=0.0, fed_at=0.0, read_at=0.0, state_behind=False)


def test_past_its_limit_the_least_recently_used_detector_goes_first() -> None:
    live = LiveDetectors(limit=2)
    live.keep(("a", 1), live_at(1))
    live.keep(("b", 1), live_at(1))
    live.keep(("a", 1), live_at(2))  # used again: now the most recent
    live.keep(("c", 1), live_at(1))
    assert list(live) == [("a", 1), ("c", 1)]
    assert live[("a", 1)].saved_step == 2


def test_a_runs_findings_are_due_again_after_findings_every_s() -> None:
    live = LiveDetectors()
    assert live.findings_due("r", 100.0)  # never refreshed
    live.findings_at["r"] = 100.0
    assert not live.findings_due("r", 100.0 + FINDINGS_EVERY_S / 2)
    assert live.findings_due("r", 100.0 + FINDINGS_EVERY_S)


def test_prune_forgets_the_findings_time_of_runs_with_no_detector_at_hand() -> None:
    live = LiveDetectors()
    live.keep(("live", 1), live_at(1))
    live.findings_at.update({"live": 1.0, "ended": 1.0})
    live.prune()
    assert live.findings_at == {"live": 1.0}
