import json
import subprocess
import sys

import numpy as np
import pytest
from holter.cli import build_parser
from holter_server.commands import analyze

from tests.real_curves import load_series


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
    assert code == 2 and "unknown kind 'temperature'" in err and "eval_loss" in err


def test_expected_floor_turns_a_low_loss_into_too_good(capsys, healthy_csv):
    code, out, _ = run_analyze(capsys, str(healthy_csv), "--metric", "loss", "--expected-floor", "5")
    assert code == 1 and "too_good" in out


def test_console_entry_point_runs_analyze(nan_csv):
    done = subprocess.run(
        [sys.executable, "-m", "holter.cli", "analyze", str(nan_csv), "--format", "json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and json.loads(done.stdout)["series"][0]["verdict"] == "critical"


@pytest.fixture
def custom_diagnostics_csv(tmp_path):
    """A run file with a loss and twenty custom diagnostics Holter cannot know (attention entropy
    per head, made up here in the shape of the TRL run file the issue describes): they drift,
    jump and sit flat, as real diagnostics do."""
    rng = np.random.default_rng(3)
    t = np.arange(400)
    loss = 3.0 + 6.0 * np.exp(-t / 50) + rng.normal(0, 0.01, 400)
    columns = {"loss": loss}
    for head in range(20):
        drift = 1.0 + head * np.log1p(t) / 3 if head % 3 == 0 else np.full(400, 0.5 + head / 10)
        jump = np.where(t > 200 + head, 2.0, 1.0) if head % 3 == 1 else 1.0
        columns[f"attn_diag/head_{head}"] = drift * jump + rng.normal(0, 0.001, 400)
    path = tmp_path / "diagnostics.csv"
    path.write_text(
        "step,"
        + ",".join(columns)
        + "\n"
        + "".join(f"{s}," + ",".join(f"{v[s]:.6f}" for v in columns.values()) + "\n" for s in t)
    )
    return path


def test_unknown_names_raise_nothing_above_info(capsys, custom_diagnostics_csv):
    code, out, _ = run_analyze(capsys, str(custom_diagnostics_csv), "--format", "json")
    series = {s["metric"]: s for s in json.loads(out)["series"]}
    unknown = [s for name, s in series.items() if name.startswith("attn_diag/")]
    assert code == 0 and len(unknown) == 20
    assert all(s["kind"] == "unknown" and s["understood"]["source"] == "unknown" for s in unknown)
    assert all(e["severity"] == "info" for s in unknown for e in s["events"])


def test_a_nan_in_an_unknown_metric_is_reported_at_info(capsys, tmp_path):
    path = tmp_path / "odd.csv"
    path.write_text("step,my_probe\n" + "".join(f"{s},{'nan' if s >= 40 else 1.0}\n" for s in range(60)))
    code, out, _ = run_analyze(capsys, str(path))
    assert code == 0 and "my_probe (unknown: watched only for NaN/±Inf and extreme outliers, 60 points): notice" in out
    assert "[info] divergence at steps 40–59" in out


def test_kind_name_equals_kind_declares_a_metric_and_wins_over_its_name(capsys, custom_diagnostics_csv):
    _, out, _ = run_analyze(capsys, str(custom_diagnostics_csv), "--kind", "attn_diag/head_0=loss", "--format", "json")
    series = {s["metric"]: s for s in json.loads(out)["series"]}
    assert series["attn_diag/head_0"]["kind"] == "loss"
    assert series["attn_diag/head_0"]["understood"] == {
        "source": "declared",
        "framework": None,
        "rule": "attn_diag/head_0",
        "note": None,
        "unit": None,
        "compute_only": False,
    }
    assert series["attn_diag/head_3"]["kind"] == "unknown"


def test_kind_takes_a_glob(capsys, custom_diagnostics_csv):
    _, out, _ = run_analyze(
        capsys, str(custom_diagnostics_csv), "--kind", "attn_diag/*=statistic", "--kind", "loss=eval_loss"
    )
    assert "attn_diag/head_7 (statistic, declared as attn_diag/*, 400 points)" in out
    assert "loss (eval_loss, declared as loss, 400 points)" in out


def test_a_bare_kind_applies_to_every_metric(capsys, healthy_csv):
    _, out, _ = run_analyze(capsys, str(healthy_csv), "--kind", "grad_norm", "--format", "json")
    assert [(s["metric"], s["kind"]) for s in json.loads(out)["series"]] == [
        ("loss", "grad_norm"),
        ("learning_rate", "grad_norm"),
    ]


@pytest.fixture
def whisper_trainer_state(tmp_path):
    """A Seq2SeqTrainer trainer_state.json rebuilt from the real whisper-large-v2 fine-tune in the
    corpus (tests/data/real_curves, source in its labels.json): train loss every 25 steps, 5 evals."""
    history = []
    for name, key in (("whisper_ja_train_loss", "loss"), ("whisper_ja_eval_loss", "eval_loss")):
        steps, values = load_series(name).arrays()
        history += [{"step": int(s), key: float(v), "epoch": float(s) / 132} for s, v in zip(steps, values)]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 5000, "log_history": sorted(history, key=lambda h: h["step"])}))
    return path


def test_a_whole_run_file_is_read_train_against_eval(capsys, whisper_trainer_state):
    code, out, _ = run_analyze(capsys, str(whisper_trainer_state))
    assert code == 1 and "the run, its series read together: warning" in out
    assert "[warning] overfitting at steps 1,000–5,000: eval_loss turned up for good" in out
    assert "loss is 4,200x below eval_loss" in out


def test_json_output_carries_the_run_level_findings(capsys, whisper_trainer_state):
    _, out, _ = run_analyze(capsys, str(whisper_trainer_state), "--format", "json")
    findings = json.loads(out)["findings"]
    assert {(f["kind"], f["metric"]) for f in findings} == {("overfitting", "eval_loss"), ("too_good", "loss")}


def test_a_loss_rising_30_percent_after_its_minimum_is_named_and_exits_one(capsys, tmp_path):
    t = np.arange(4000)
    level = 3.2 + 7.6 * np.exp(-t / 300)
    level = np.where(t < 2500, level, level[2500] * (1 + 0.3 * (t - 2500) / 1500))
    loss = level * (1 + np.random.default_rng(1).normal(0, 0.01, 4000))
    path = tmp_path / "creep.csv"
    path.write_text("step,loss\n" + "".join(f"{s},{v}\n" for s, v in zip(t, loss)))
    code, out, _ = run_analyze(capsys, str(path))
    assert code == 1 and "divergence" in out and "has risen" in out and "still rising" in out


def test_the_report_leads_with_one_line_per_problem(capsys, tmp_path):
    # issue 46: the incident is the unit: a NaN in the loss and the gradient norms that follow it
    # is one problem, told first, with what it folded
    path = tmp_path / "nan.csv"
    rows = [f"{s},{'nan' if s >= 300 else 3.0 - s / 300},{'nan' if s >= 300 else 1.0}" for s in range(400)]
    path.write_text("step,loss,grad_norm\n" + "\n".join(rows) + "\n")
    code, out, _ = run_analyze(capsys, str(path))
    assert code == 1
    head = out.splitlines()
    assert head[0].endswith("2 series, 1 problem")
    assert head[1].startswith("  [critical]") and "folded" in head[1]
    answer = json.loads(run_analyze(capsys, str(path), "--format", "json")[1])
    (incident,) = [i for i in answer["incidents"] if i["severity"] != "info"]
    assert incident["severity"] == "critical" and incident["folded"]


def test_a_healthy_file_says_no_problem(capsys, healthy_csv):
    code, out, _ = run_analyze(capsys, str(healthy_csv))
    assert code == 0 and out.splitlines()[0].endswith("0 problems")


def _ppo_csv(path, kl, entropy):
    path.write_text(
        "global_step,approx_kl,entropy\n" + "".join(f"{i * 512},{k},{e}\n" for i, (k, e) in enumerate(zip(kl, entropy)))
    )
    return path


def test_a_ppo_runs_kl_blow_up_and_entropy_collapse_are_two_named_problems(capsys, tmp_path):
    # issue 45: CleanRL's PPO at a learning rate far too high, approx_kl 0.01 -> 0.8, entropy 0.5 -> 0.07
    n, rng = 300, np.random.default_rng(0)
    share = np.clip((np.arange(n) - 0.2 * n) / (0.6 * n), 0, 1)
    kl = 0.01 * 80**share * np.exp(rng.normal(0, 0.3, n))
    entropy = 0.5 * (0.07 / 0.5) ** share * (1 + rng.normal(0, 0.02, n))
    code, out, _ = run_analyze(capsys, str(_ppo_csv(tmp_path / "ppo.csv", kl, entropy)), "--format", "json")
    data = json.loads(out)
    named = {
        (s["metric"], e["kind"])
        for s in data["series"]
        for e in s["events"]
        if e["severity"] in ("warning", "critical")
    }
    assert code == 1 and named == {("approx_kl", "divergence"), ("entropy", "entropy_collapse")}
    assert len([i for i in data["incidents"] if i["severity"] in ("warning", "critical")]) == 2


def test_a_healthy_ppo_run_exits_zero(capsys, tmp_path):
    n, rng = 300, np.random.default_rng(1)
    kl = rng.uniform(0.01, 0.02, n) * np.exp(rng.normal(0, 0.3, n))
    entropy = np.linspace(0.7, 0.4, n) * (1 + rng.normal(0, 0.03, n))
    code, out, _ = run_analyze(capsys, str(_ppo_csv(tmp_path / "ppo.csv", kl, entropy)))
    assert code == 0, out
