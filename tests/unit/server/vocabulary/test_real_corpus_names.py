"""The vocabulary against the real corpus (tests/data/real_curves): every real series' own name,
read among its run's other names, is understood as the kind its labels give it, wherever that
kind is one of Holter's; and no series the corpus calls "other" (rewards, KL to the reference,
clip fractions, per-token maxima) is read as a vital sign that can page someone."""

from __future__ import annotations

import pytest
from holter_server.vocabulary import understand_all
from holter_server.vocabulary.signals import SIGNAL_KIND_NAMES, signal

from tests.real_curves import load_corpus, runs
from tests.real_scoring import READ_OTHERWISE

HOLTER_KINDS = {s.kind for s in load_corpus()} & set(SIGNAL_KIND_NAMES)


def _understood(series_file: str) -> str:
    series = next(s for s in load_corpus() if s.file == series_file)
    return understand_all([s.metric_name for s in runs()[series.run]])[series.metric_name].kind


@pytest.mark.parametrize(
    "series_file", [s.file for s in load_corpus() if s.kind in HOLTER_KINDS and s.file not in READ_OTHERWISE]
)
def test_a_real_series_name_is_read_as_its_labelled_kind(series_file):
    series = next(s for s in load_corpus() if s.file == series_file)
    assert _understood(series_file) == series.kind


@pytest.mark.parametrize("series_file", sorted(READ_OTHERWISE))
def test_a_real_series_holter_reads_otherwise_is_read_as_said(series_file):
    assert _understood(series_file) == READ_OTHERWISE[series_file]


@pytest.mark.parametrize("series_file", [s.file for s in load_corpus() if s.kind == "other"])
def test_a_real_series_the_corpus_calls_other_is_never_a_vital_sign(series_file):
    assert signal(_understood(series_file)).watch != "vital"


def test_the_corpus_kinds_are_holter_s_or_other():
    assert {s.kind for s in load_corpus()} <= set(SIGNAL_KIND_NAMES) | {"other"} and len(HOLTER_KINDS) >= 6
