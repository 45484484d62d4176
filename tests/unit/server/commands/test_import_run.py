"""`holter import` prints the service's reading of the run it imported, series by series and the
run as a whole (the analysis is `POST /runs/{id}/analyze`'s answer, built here from the same
pure parts the service uses)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from holter_server.commands.import_run import SentCounts, findings_report
from holter_server.detect import verdict
from holter_server.detect.classify import new_detector
from holter_server.detect.findings import cross_signal_findings
from holter_server.vocabulary import understand_all

from tests.real_curves import load_series


def analysis_of(curves: dict[str, str]) -> tuple[dict[str, Any], SentCounts]:
    """What the service answers for a run of these metrics (metric name -> corpus series)."""
    understood = understand_all(list(curves))
    detectors, sent, series = {}, SentCounts(), []
    for metric, name in curves.items():
        steps, values = load_series(name).arrays()
        for step in steps:
            sent.add(metric, int(step))
        detectors[metric] = detector = new_detector(metric, kind=understood[metric].kind)
        detector.add(steps, values)
        series.append(
            {
                "metric": metric,
                "kind": understood[metric].kind,
                "understood": understood[metric].to_dict(),
                "verdict": verdict(detector.events),
                "events": [e.to_dict() for e in detector.events],
            }
        )
    events = [e for d in detectors.values() for e in d.events]
    findings = cross_signal_findings(events, [d.snapshot() for d in detectors.values()])
    return {"series": series, "findings": [f.to_dict() for f in findings]}, sent


def test_report_reads_the_train_loss_against_the_eval_loss_of_the_run():
    # the real whisper-large-v2 fine-tune of the corpus: eval loss up at each of its 5 evals
    report = findings_report(*analysis_of({"loss": "whisper_ja_train_loss", "eval_loss": "whisper_ja_eval_loss"}))
    assert "the run, its series read together: warning" in report
    assert "overfitting at steps 1,000–5,000" in report and "too_good" in report


def test_report_of_a_healthy_run_has_no_run_level_section():
    report = findings_report(*analysis_of({"loss": "tinyllama_sft_train_loss", "eval_loss": "tinyllama_sft_eval_loss"}))
    assert "read together" not in report and "0 need attention" in report


def test_report_says_how_each_metric_was_understood_and_how_many_points_were_sent():
    report = findings_report(*analysis_of({"loss": "tinyllama_sft_train_loss", "my_probe": "tinyllama_sft_eval_loss"}))
    points = len(load_series("tinyllama_sft_eval_loss").arrays()[0])
    assert f"my_probe (unknown: watched only for NaN/±Inf and extreme outliers, {points:,} points)" in report


def test_without_rich_the_import_ends_with_its_plain_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """rich is the `progress` extra: without it there is no bar, the import goes on, and its last line is printed."""
    from holter_server.commands.import_run import ImportProgress

    monkeypatch.setitem(sys.modules, "rich.console", None)
    monkeypatch.setitem(sys.modules, "rich.progress", None)

    class Source:
        def progress(self) -> float:
            return 0.5

    progress = ImportProgress(Source())  # type: ignore[arg-type]
    progress.update(2048)
    progress.close(2048, 3)
    assert "2,048 points, 3 metrics in" in capsys.readouterr().err
