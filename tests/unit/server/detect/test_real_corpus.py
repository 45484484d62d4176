"""The classifier on real public training runs (tests/data/real_curves, sources in its
labels.json): quiet on every healthy series, and every labelled event found — spikes near their
labelled step, divergences, plateaus, too-good losses, periodic slow steps with their period
within 5% — with the run-level labels read on each run's train and eval series together.

Each holds twice: with the kind each series is labelled (the classifier on its own), and with the
kind `holter import` / `holter analyze` would read from the logged names (the vocabulary's
understanding of each name among its run's names)."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from tests.real_curves import healthy_runs, load_corpus
from tests.real_scoring import READ_OTHERWISE, SeriesReading, events_to_find, in_the_data, match, read_corpus

MIN_RECALL = 0.95
LONG_RUN_STEPS = 5000


@cache
def readings() -> dict[str, SeriesReading]:
    return {r.series.file: r for r in read_corpus()}


@cache
def readings_by_name() -> dict[str, SeriesReading]:
    return {r.series.file: r for r in read_corpus(by_name=True)}


def read(series: str) -> SeriesReading:
    return readings()[series]


def read_by_name(series: str) -> SeriesReading:
    return readings_by_name()[series]


def _labelled(series_files: set[str] | None = None) -> list[Any]:
    """One pytest param (series file, label) per labelled event the data shows, of `series_files` or all."""
    return [
        pytest.param(s.file, label, id=f"{s.name}-{label.kind}@{label.start_step}")
        for s in load_corpus()
        if series_files is None or s.file in series_files
        for label in events_to_find(s)
        if in_the_data(s, label)
    ]


HEALTHY = [s.file for s in load_corpus() if s.healthy and s.kind != "other"]
LABELLED = _labelled({s.file for s in load_corpus() if s.kind != "other"})
# by name every series is read as the vocabulary understands it: "other" ones too (a reward, a KL)
HEALTHY_BY_NAME = [s.file for s in load_corpus() if s.healthy]
LABELLED_BY_NAME = _labelled()


def _alarms(reading: SeriesReading) -> list[tuple[str, str, str]]:
    return [(e.kind, e.severity, e.summary) for e in reading.alarms]


def _events(reading: SeriesReading) -> list[tuple[str, int, int, float | None]]:
    return [(e.kind, e.start_step, e.end_step, e.period) for e in reading.events or ()]


@pytest.mark.parametrize("series", HEALTHY)
def test_healthy_real_series_raises_no_warning_or_critical(series: str) -> None:
    assert _alarms(read(series)) == []


@pytest.mark.parametrize("series", HEALTHY_BY_NAME)
def test_healthy_real_series_read_by_its_logged_name_raises_no_warning_or_critical(series: str) -> None:
    assert _alarms(read_by_name(series)) == []


@pytest.mark.parametrize("series,label", LABELLED)
def test_labelled_event_is_found(series: str, label) -> None:  # type: ignore[no-untyped-def]
    reading = read(series)
    assert match(reading, label) is not None, _events(reading)


@pytest.mark.parametrize("series,label", [p for p in LABELLED_BY_NAME if p.values[0] not in READ_OTHERWISE])
def test_labelled_event_is_found_reading_the_series_by_its_logged_name(series: str, label) -> None:  # type: ignore[no-untyped-def]
    reading = read_by_name(series)
    assert match(reading, label) is not None, _events(reading)


def test_at_least_95_percent_of_the_labelled_events_the_data_shows_are_found() -> None:
    found = [match(read(s), label) is not None for s, label in (p.values for p in LABELLED)]
    assert sum(found) / len(found) >= MIN_RECALL


def test_at_least_95_percent_of_the_labelled_events_are_found_reading_every_series_by_its_logged_name() -> None:
    # the series read otherwise count here too, as misses where the name cannot tell
    found = [match(read_by_name(s), label) is not None for s, label in (p.values for p in LABELLED_BY_NAME)]
    assert sum(found) / len(found) >= MIN_RECALL


def test_the_corpus_has_ten_healthy_runs_of_5000_steps_or_more_and_labelled_events_to_score_on() -> None:
    # a run counts when every one of its series is healthy and its steps reach 5,000
    assert len(healthy_runs(LONG_RUN_STEPS)) >= 10
    assert len(HEALTHY) >= 20 and len(LABELLED) >= 20


def test_shard_load_period_of_modded_nanogpt_is_found_within_five_percent() -> None:
    reading = read("mng124m_valueembed_step_time_ms.csv")
    (saw,) = [e for e in reading.events or () if e.kind == "sawtooth"]
    assert abs(saw.period - 189) <= 0.05 * 189 and saw.details["p_value"] < 1e-3


def test_dozens_of_one_step_spikes_in_a_long_healthy_run_are_no_sawtooth_and_no_alarm() -> None:
    reading = read("llmc_gpt2_124m_grad_norm.csv")
    events = reading.events or ()
    assert sum(e.kind == "spike" for e in events) >= 20
    assert "sawtooth" not in {e.kind for e in events} and reading.alarms == []


def test_eval_loss_turning_up_at_every_one_of_five_evals_while_train_falls_is_overfitting() -> None:
    (finding,) = [e for e in read("whisper_ja_eval_loss.csv").events or () if e.kind == "overfitting"]
    assert finding.start_step == 1000 and "loss kept falling" in finding.summary


def test_train_loss_three_orders_of_magnitude_below_eval_is_too_good() -> None:
    found = [
        e
        for e in read("whisper_ja_train_loss.csv").events or ()
        if e.kind == "too_good" and e.details.get("cause") == "train_far_below_eval"
    ]
    assert found and found[0].details["ratio"] >= 1000


def test_memorised_loss_at_its_last_printed_digit_is_too_good_not_frozen() -> None:
    kinds = {(e.kind, e.details.get("cause")) for e in read("whisper_ja_train_loss.csv").events or ()}
    assert ("too_good", None) in kinds and ("plateau", "frozen") not in kinds


def test_loss_printing_exactly_zero_is_a_broken_run_only_beside_a_dead_gradient() -> None:
    broken = [e for e in read("swift_grpo_zero_loss.csv").events or () if e.kind == "plateau"]
    learning = read("unsloth_grpo_triage_loss.csv").events or ()
    assert [e.severity for e in broken] == ["critical"] and "grad_norm" in broken[0].summary
    assert [e for e in learning if e.kind == "plateau"] == []
