import json
import subprocess
import sys

import numpy as np
import pytest
from holter.cli import build_parser

from holter_server.commands import analyze


def run_analyze(capsys, *argv):
    code = analyze.run(build_parser().parse_args(["analyze", *argv]))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def healthy_csv(tmp_path):
    t = np.arange(600)
    loss = 3.2 + 7.6 * np.exp(-t / 40) + np.random.default_rng(0).normal(0, 0.01, 600)
    path = tmp_path / "run.csv"
    path.write_text("step,loss,learning_rate\n" + "".join(f"{s},{v},0.001\n" for s, v in zip(t, loss)))
    return path


@pytest.fixture
def nan_csv(tmp_path):
    path = tmp_path / "grad.csv"
    path.write_text("step,grad_norm\n" + "".join(f"{s},{'nan' if s >= 30 else 1.0 + s / 100}\n" for s in range(50)))
    return path


def test_healthy_file_exits_zero_and_says_healthy(capsys, healthy_csv):
    code, out, _ = run_analyze(capsys, str(healthy_csv))
    assert code == 0 and "loss (loss, 600 points): healthy" in out


def test_learning_rate_column_is_not_analysed(capsys, healthy_csv):
    _, out, _ = run_analyze(capsys, str(healthy_csv))
    assert "learning_rate (" not in out


def test_problem_found_exits_one_and_prints_the_summary(capsys, nan_csv):
    code, out, _ = run_analyze(capsys, str(nan_csv))
    assert code == 1 and "became NaN at step 30" in out


def test_json_output_has_series_with_metric_kind_verdict_and_events(capsys, nan_csv):
    code, out, _ = run_analyze(capsys, str(nan_csv), "--format", "json")
    data = json.loads(out)
    series = data["series"][0]
    assert code == 1 and {"metric", "kind", "verdict", "events"} <= set(series)
    event = series["events"][0]
    assert (series["metric"], series["kind"], series["verdict"]) == ("grad_norm", "grad_norm", "critical")
    assert {"kind", "start_step", "end_step", "peak_step", "severity", "score", "period", "summary"} <= set(event)


def test_missing_file_exits_two_with_one_line_on_stderr(capsys, tmp_path):
    code, out, err = run_analyze(capsys, str(tmp_path / "missing.csv"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "no such file" in err


def test_unknown_metric_exits_two_and_lists_the_metrics(capsys, healthy_csv):
    code, _, err = run_analyze(capsys, str(healthy_csv), "--metric", "acc")
    assert code == 2 and "'acc'" in err and "loss" in err


def test_unknown_kind_exits_two(capsys, healthy_csv):
    code, _, err = run_analyze(capsys, str(healthy_csv), "--kind", "temperature")
    assert code == 2 and "unknown --kind" in err


def test_expected_floor_turns_a_low_loss_into_too_good(capsys, healthy_csv):
    code, out, _ = run_analyze(capsys, str(healthy_csv), "--metric", "loss", "--expected-floor", "5")
    assert code == 1 and "too_good" in out


def test_console_entry_point_runs_analyze(nan_csv):
    done = subprocess.run([sys.executable, "-m", "holter.cli", "analyze", str(nan_csv), "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and json.loads(done.stdout)["series"][0]["verdict"] == "critical"
