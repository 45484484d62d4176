"""The real-curve corpus itself is sound: parseable data, one labels entry per file, documented vocabulary,
pinned sources, and the mix of healthy and failing runs that issue 14 asks for."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

from tests.real_curves import (
    CORPUS,
    LABEL_KINDS,
    PROBLEM_LABELS,
    SERIES_KINDS,
    healthy_runs,
    load_corpus,
    load_series,
    read_curve,
    runs,
)

CSV_FILES = sorted(path.name for path in CORPUS.glob("*.csv"))
LABELS = json.loads((CORPUS / "labels.json").read_text())
README = (CORPUS / "README.md").read_text()
PINNED = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+:[^@\s]+@[0-9a-f]{40}$")
ISSUE_URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|discussions)/\d+(#[\w-]+)?$")


@pytest.mark.parametrize("file", CSV_FILES)
def test_every_csv_parses_with_strictly_increasing_integer_steps(file):
    with (CORPUS / file).open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["step", "value"]
    assert len(rows) > 1, "a series needs at least one point"
    steps = [int(step) for step, _ in rows[1:]]  # int("3.0") raises: steps are integers as written
    values = [float(value) for _, value in rows[1:]]
    assert all(later > earlier for earlier, later in zip(steps, steps[1:]))
    assert len(values) == len(steps)


def test_every_csv_has_a_labels_entry_and_every_entry_a_csv():
    assert set(CSV_FILES) == set(LABELS)


@pytest.mark.parametrize("file", sorted(LABELS))
def test_every_entry_names_its_metric_run_evidence_and_labels(file):
    entry = LABELS[file]
    for field in ("metric_name", "run", "evidence", "source"):
        assert isinstance(entry[field], str) and entry[field].strip(), field
    assert entry["kind"] in SERIES_KINDS
    assert entry["labels"], "every series says what the source shows, healthy included"


def test_every_label_kind_is_in_the_documented_vocabulary():
    used = {label["kind"] for entry in LABELS.values() for label in entry["labels"]}
    assert used <= set(LABEL_KINDS)
    for kind in LABEL_KINDS:  # the README documents every kind the loader knows
        assert f"`{kind}`" in README, kind


@pytest.mark.parametrize("file", sorted(LABELS))
def test_every_source_is_a_pinned_repository_path_or_an_issue_url(file):
    source = LABELS[file]["source"]
    assert PINNED.match(source) or ISSUE_URL.match(source), source


@pytest.mark.parametrize("file", sorted(LABELS))
def test_every_label_window_lies_within_its_series(file):
    steps, _ = read_curve(CORPUS / file)
    for label in LABELS[file]["labels"]:
        assert label["start_step"] <= label["end_step"]
        assert steps[0] <= label["start_step"] and label["end_step"] <= steps[-1], label
        assert label["note"].strip()


def test_periodic_labels_carry_their_period():
    periodic = [label for entry in LABELS.values() for label in entry["labels"] if label["kind"] == "periodic_spike"]
    assert periodic
    assert all(label.get("period", 0) > 0 for label in periodic)


def test_labels_the_data_cannot_show_say_why():
    hidden = [label for entry in LABELS.values() for label in entry["labels"] if label.get("in_data") is False]
    assert hidden
    assert all(label.get("not_in_data_because") for label in hidden)
    assert all(label["kind"] in PROBLEM_LABELS for label in hidden)


def test_every_eval_loss_is_grouped_with_the_train_loss_of_its_run():
    for run, members in runs().items():
        kinds = {series.kind for series in members}
        if "eval_loss" in kinds:
            assert "loss" in kinds, run


def test_the_corpus_has_at_least_forty_series():
    assert len(load_corpus()) >= 40


def test_at_least_ten_healthy_runs_reach_5000_steps_or_more():
    # runs, not series: every series of the run healthy, its logged steps reaching 5,000
    long_healthy = healthy_runs(5000)
    assert len(long_healthy) >= 10
    # pretraining, fine-tuning and RL runs all among them
    frameworks = {s.framework or "" for members in long_healthy.values() for s in members}
    assert {"llm.c", "modded-nanogpt"} <= frameworks  # pretraining
    assert any("Trainer" in f for f in frameworks)  # SFT and fine-tunes
    assert sum(any("PPO" in (s.framework or "") for s in members) for members in long_healthy.values()) >= 2  # RL


def test_a_run_with_one_unhealthy_series_is_no_healthy_run():
    assert "whisper_large_v2_ja" in runs() and "whisper_large_v2_ja" not in healthy_runs()


@pytest.mark.parametrize(
    "problem",
    [
        {"divergence_nan", "divergence_nonfinite"},  # went NaN / Inf
        {"flat_zero_gradient", "plateau_stuck"},  # flat-lined
        {"divergence_overfitting"},  # eval loss turning up while train falls
        {"divergence_finite"},  # a loss that explodes and stays up without going NaN
        {"train_far_below_eval", "too_good"},  # leaked / too good
        {"periodic_spike"},  # periodic slow steps
    ],
)
def test_each_problem_class_has_a_real_example(problem):
    assert any(label.kind in problem for series in load_corpus() for label in series.labels)


def test_a_loss_stuck_at_exactly_zero_is_present():
    stuck = [s for s in load_corpus() if s.kind == "loss" and any(lb.kind == "plateau_stuck" for lb in s.labels)]
    assert any(np.all(s.arrays()[1] == 0.0) for s in stuck)


def test_a_gradient_norm_of_exactly_zero_is_present():
    flat = [s for s in load_corpus() if any(lb.kind == "flat_zero_gradient" for lb in s.labels)]
    assert any(s.kind == "grad_norm" and np.all(s.arrays()[1] == 0.0) for s in flat)


def test_overfitting_examples_have_few_eval_points_beside_their_train_loss():
    overfit = [s for s in load_corpus() if any(lb.kind == "divergence_overfitting" for lb in s.labels)]
    assert any(len(s.arrays()[0]) <= 20 for s in overfit)
    for series in overfit:
        assert any(m.kind == "loss" for m in runs()[series.run]), series.run


def test_rl_runs_log_reward_kl_clip_and_a_policy_loss_that_swings_around_zero():
    rl = [s for s in load_corpus() if any(name in (s.framework or "") for name in ("GRPO", "PPO"))]
    names = {s.metric_name for s in rl}
    assert {"reward", "kl"} <= names
    assert any(name.startswith("clip_ratio") for name in names)
    swinging = [s for s in rl if s.kind == "loss" and s.healthy and "GRPO" in (s.framework or "")]
    assert any(np.nanmin(s.arrays()[1]) < 0 < np.nanmax(s.arrays()[1]) for s in swinging)


def test_a_finite_divergence_stays_finite_and_never_comes_back():
    diverged = [s for s in load_corpus() if any(lb.kind == "divergence_finite" for lb in s.labels)]
    assert diverged
    for series in diverged:
        steps, values = series.arrays()
        label = next(lb for lb in series.labels if lb.kind == "divergence_finite")
        before = values[steps < label.start_step]
        after = values[(steps >= label.start_step) & (steps <= label.end_step)]
        assert np.all(np.isfinite(values)), series.name
        assert before.size and np.min(after) > 5 * np.max(before), series.name


def test_logprob_mismatch_series_include_a_nonzero_gap_and_an_exact_zero_by_design():
    mismatch = [s for s in load_corpus() if s.kind == "logprob_mismatch"]
    assert all(s.healthy for s in mismatch)
    assert any(np.all(s.arrays()[1] > 0) and len(s.arrays()[0]) >= 100 for s in mismatch)
    assert any(np.all(s.arrays()[1] == 0.0) for s in mismatch)  # bitwise-consistent route: 0.0 is the goal


def test_a_verl_run_logs_its_ppo_metrics_per_step():
    verl = [s for s in load_corpus() if (s.framework or "").startswith("verl")]
    names = {s.metric_name for s in verl}
    assert {"actor/pg_loss", "actor/ppo_kl", "actor/pg_clipfrac", "actor/grad_norm", "critic/score/mean"} <= names
    for series in verl:
        steps, _ = series.arrays()
        assert np.all(np.diff(steps) == 1), series.name  # one logged line per step, none skipped


def test_periodic_labels_of_timing_series_sit_on_slow_steps():
    for series in load_corpus():
        if series.kind not in {"step_time", "throughput"}:
            continue
        steps, values = series.arrays()
        median = np.median(values)
        for label in (lb for lb in series.labels if lb.kind == "periodic_spike"):
            for step in np.arange(label.start_step, label.end_step + 1, label.period):
                value = values[steps == int(step)]
                assert value.size == 1, (series.name, step)
                slow = value[0] > 1.5 * median if series.kind == "step_time" else value[0] < median / 1.5
                assert slow, (series.name, int(step), value[0], median)


def test_throughput_or_step_time_series_are_present():
    assert len([s for s in load_corpus() if s.kind in {"throughput", "step_time"}]) >= 2


def test_loader_reads_a_series_by_name_and_its_run():
    series = load_series("whisper_ja_eval_loss")
    steps, values = series.arrays()
    assert series.kind == "eval_loss" and series.run == "whisper_large_v2_ja"
    assert steps.dtype == np.int64 and len(steps) == len(values) == 5
    assert {s.name for s in runs()["whisper_large_v2_ja"]} >= {"whisper_ja_train_loss", "whisper_ja_eval_loss"}
    with pytest.raises(KeyError):
        load_series("no_such_series")


def test_loader_keeps_nan_values_as_logged():
    _, values = load_series("nanogpt_gpt2_fp16_train_loss").arrays()
    assert np.isnan(values[-1]) and np.isfinite(values[0])


def test_problem_labels_map_to_a_classifier_kind_and_benign_ones_to_none():
    assert all(LABEL_KINDS[kind] is not None for kind in PROBLEM_LABELS)
    assert LABEL_KINDS["healthy"] is None and LABEL_KINDS["plateau_converged"] is None


def test_the_corpus_folder_stays_under_six_megabytes():
    assert sum(path.stat().st_size for path in CORPUS.iterdir()) < 6 * 1024 * 1024
