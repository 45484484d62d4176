"""The wandb-shaped surface of the client (holter/current.py, Run.log's commit and step axes,
summary, alert, Histogram, media, offline and disabled modes), read back from what an offline
run leaves in its spool: exactly the requests the service would get, in order."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import holter
import pytest
from holter.current import resolve_mode
from holter.media import Histogram
from holter.sender import decode_entry


@pytest.fixture(autouse=True)
def no_current_run() -> Iterator[None]:
    yield
    holter.finish()


def offline(tmp_path: Path, **options: Any) -> holter.Run:
    return holter.init(project="p", mode="offline", spool_dir=tmp_path, **options)


def load_entry_json(entry_file: Path) -> tuple[str, Any]:
    """A spool entry as (path, decoded body)."""
    path, body = decode_entry(entry_file.read_bytes())
    return path, json.loads(body)


def requests(run: Any, tmp_path: Path) -> list[tuple[str, Any]]:
    run.finish()
    return [load_entry_json(entry) for entry in sorted((tmp_path / run.id).glob("*.json"))]


def points(run: Any, tmp_path: Path) -> dict[str, dict[int, float]]:
    found: dict[str, dict[int, float]] = {}
    for path, body in requests(run, tmp_path):
        if path.endswith("/points"):
            for name, column in body["metrics"].items():
                found.setdefault(name, {}).update(zip(column["steps"], column["values"]))
    return found


def bodies(run: Any, tmp_path: Path, suffix: str) -> list[Any]:
    return [body for path, body in requests(run, tmp_path) if path.endswith(suffix)]


def test_log_without_a_step_counts_calls_like_wandb(tmp_path: Path) -> None:
    run = offline(tmp_path)
    for value in (3.0, 2.0, 1.0):
        holter.log({"loss": value})
    assert points(run, tmp_path) == {"loss": {0: 3.0, 1: 2.0, 2: 1.0}}


def test_commit_false_gathers_values_into_one_step_and_the_last_value_wins(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.log({"loss": 9.0}, commit=False)
    holter.log({"loss": 2.5, "lr": 0.1}, commit=False)
    holter.log({"acc": 0.5})
    holter.log({"loss": 2.0})
    assert points(run, tmp_path) == {"loss": {0: 2.5, 1: 2.0}, "lr": {0: 0.1}, "acc": {0: 0.5}}


def test_values_gathered_with_commit_false_are_sent_by_finish(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.log({"loss": 1.0}, step=7, commit=False)
    assert points(run, tmp_path) == {"loss": {7: 1.0}}


def test_a_later_step_ends_the_gathered_one(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.log({"loss": 1.0}, step=4, commit=False)
    holter.log({"loss": 0.5}, step=5)
    assert points(run, tmp_path) == {"loss": {4: 1.0, 5: 0.5}}
    assert run.step == 6


def test_a_metric_with_a_step_metric_is_logged_at_that_metrics_value(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.define_metric("epoch")
    holter.define_metric("val/*", step_metric="epoch")
    holter.log({"loss": 1.0})
    holter.log({"val/acc": 0.5, "epoch": 3})
    holter.log({"val/loss": 0.7})  # no epoch here: the last one logged
    assert points(run, tmp_path) == {"loss": {0: 1.0}, "val/acc": {3: 0.5}, "epoch": {1: 3.0}, "val/loss": {3: 0.7}}


def test_a_step_metric_that_is_not_a_whole_number_leaves_the_metric_at_the_runs_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = offline(tmp_path)
    holter.define_metric("val/acc", step_metric="epoch")
    holter.log({"val/acc": 0.5, "epoch": 1.5})
    assert points(run, tmp_path)["val/acc"] == {0: 0.5}
    assert "whole number" in capsys.readouterr().err


def test_define_metric_sends_summary_goal_and_axis_and_a_bare_one_sends_nothing(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.define_metric("epoch")
    holter.define_metric("val/acc", step_metric="epoch", summary="max", goal="maximize")
    sent = [body["metrics"] for body in bodies(run, tmp_path, "/api/v1/runs") if body.get("metrics")]
    assert sent[-1] == {"val/acc": {"summary": "max", "step_metric": "epoch", "goal": "maximize"}}
    assert all("epoch" not in metrics for metrics in sent)


def test_config_changes_of_every_shape_are_sent(tmp_path: Path) -> None:
    run = offline(tmp_path, config={"lr": 0.1})
    holter.config.update({"batch": 32})
    holter.config["warmup"] = 10
    holter.config.seed = 0
    last = bodies(run, tmp_path, "/api/v1/runs")[-1]
    assert last["config"] == {"lr": 0.1, "batch": 32, "warmup": 10, "seed": 0}


def test_summary_items_updates_and_deletions_are_sent_in_order(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.log({"loss": 2.0})
    holter.summary["best"] = 0.9
    run.summary.update({"final": math.nan})
    holter.summary.note = "ok"
    del holter.summary["best"]
    assert dict(run.summary) == {"loss": 2.0, "final": "NaN", "note": "ok"}
    assert [body["values"] for body in bodies(run, tmp_path, "/summary")] == [
        {"best": 0.9},
        {"final": "NaN"},
        {"note": "ok"},
        {"best": None},
    ]


@pytest.mark.parametrize(
    ("level", "severity"),
    [(None, "info"), (holter.AlertLevel.WARN, "warning"), ("ERROR", "critical"), ("warning", "warning")],
)
def test_an_alert_carries_its_level_as_a_severity(tmp_path: Path, level: Any, severity: str) -> None:
    run = offline(tmp_path)
    holter.log({"loss": 1.0})
    holter.alert(title="loss high", text="above 1", level=level)
    (sent,) = bodies(run, tmp_path, "/alerts")
    assert (sent["title"], sent["text"], sent["severity"], sent["step"]) == ("loss high", "above 1", severity, 0)


def test_an_alert_with_the_same_title_within_its_wait_is_not_sent_again(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.alert("stuck", "no progress")
    holter.alert("stuck", "still none")
    holter.alert("other", "")
    holter.alert("again", "", wait_duration=0)
    holter.alert("again", "", wait_duration=0)
    assert [body["title"] for body in bodies(run, tmp_path, "/alerts")] == ["stuck", "other", "again", "again"]


def test_an_unknown_alert_level_is_refused() -> None:
    with pytest.raises(ValueError, match="alert level 'loud'"):
        holter.Run.alert(object.__new__(holter.Run), "t", "x", level="loud")  # type: ignore[arg-type]


@pytest.mark.parametrize(("exit_code", "status"), [(None, "finished"), (0, "finished"), (1, "crashed")])
def test_finish_with_a_non_zero_exit_code_marks_the_run_crashed(
    tmp_path: Path, exit_code: int | None, status: str
) -> None:
    run = offline(tmp_path)
    holter.finish(exit_code=exit_code)
    assert run.status == status and bodies(run, tmp_path, "/finish") == [{"status": status}]


def test_init_makes_the_run_current_and_finish_forgets_it(tmp_path: Path) -> None:
    with pytest.raises(holter.NoRunError):
        holter.log({"loss": 1.0})
    with pytest.raises(holter.NoRunError):
        holter.config.update({"a": 1})
    run = offline(tmp_path, config={"a": 1})
    assert holter.run is run and holter.config is run.config and holter.summary is run.summary
    run.finish()
    assert holter.run is None


def test_init_again_finishes_the_current_run_unless_told_to_return_it(tmp_path: Path) -> None:
    first = offline(tmp_path)
    assert offline(tmp_path, reinit="return_previous") is first
    second = offline(tmp_path)
    assert first.status == "finished" and holter.run is second


def test_wandb_options_without_meaning_are_noted_once_and_unknown_ones_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = offline(
        tmp_path,
        entity="lab-x1",
        settings=holter.Settings(start_method="thread"),
        group="g",
        job_type="eval",
        tags=["a"],
        notes="why",
    )
    assert "ignored: settings" in capsys.readouterr().err
    assert (run.entity, run.group, run.job_type, run.tags, run.path) == (
        "lab-x1",
        "g",
        "eval",
        ("a",),
        f"lab-x1/p/{run.id}",
    )
    registration = bodies(run, tmp_path, "/api/v1/runs")[0]
    assert registration["tags"] == ["a", "group:g", "job_type:eval"] and registration["notes"] == "why"
    with pytest.raises(TypeError, match="entitty"):
        holter.init(project="p", mode="disabled", entitty="typo")


def test_dir_holds_the_offline_spool(tmp_path: Path) -> None:
    run = holter.init(project="p", mode="offline", dir=tmp_path)
    holter.log({"loss": 1.0})
    run.finish()
    assert list((tmp_path / "holter-spool" / run.id).glob("*.json"))


def test_disabled_mode_accepts_everything_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLTER_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setenv("HOLTER_MODE", "disabled")
    run = holter.init(project="p", config={"lr": 0.1}, url="http://127.0.0.1:9")
    holter.config.update({"batch": 8})
    holter.define_metric("val/*", step_metric="epoch")
    holter.log({"loss": 1.0, "h": holter.Histogram([1, 2])}, commit=False)
    holter.summary["best"] = 1
    holter.alert("t", "x")
    with run.timed_step(tokens=10):
        pass
    holter.finish(exit_code=1)
    assert (
        isinstance(run, holter.DisabledRun) and run.status == "crashed" and dict(run.config) == {"lr": 0.1, "batch": 8}
    )
    assert not (tmp_path / "spool").exists()


@pytest.mark.parametrize(
    ("given", "mode"),
    [(None, "online"), ("", "online"), ("OFFLINE", "offline"), ("dryrun", "offline"), ("disabled", "disabled")],
)
def test_the_mode_comes_from_holter_mode_when_not_given(
    monkeypatch: pytest.MonkeyPatch, given: str | None, mode: str
) -> None:
    if given is not None:
        monkeypatch.setenv("HOLTER_MODE", given)
    else:
        monkeypatch.delenv("HOLTER_MODE", raising=False)
    assert resolve_mode(None) == mode


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="online, offline or disabled"):
        resolve_mode("cloud")


def test_a_logged_histogram_becomes_its_quantiles_at_its_step(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.log({"loss": 1.0, "grads": holter.Histogram(list(range(101)))})
    found = points(run, tmp_path)
    assert {name: values[0] for name, values in found.items() if name.startswith("grads/")} == {
        "grads/min": 0.0,
        "grads/p5": 5.0,
        "grads/p25": 25.0,
        "grads/median": 50.0,
        "grads/p75": 75.0,
        "grads/p95": 95.0,
        "grads/max": 100.0,
    }
    assert found["loss"] == {0: 1.0}


def test_histogram_quantiles_agree_with_numpy_for_arrays_and_lists() -> None:
    np = pytest.importorskip("numpy")
    values = np.random.default_rng(0).normal(size=1001)
    values[3] = np.nan  # left out, as every non-finite value
    finite = values[np.isfinite(values)]
    expected = np.quantile(finite, [0, 0.05, 0.25, 0.5, 0.75, 0.95, 1])
    assert list(Histogram(values).quantiles.values()) == pytest.approx(expected)
    assert list(Histogram(values.tolist()).quantiles.values()) == pytest.approx(expected)


def test_histogram_from_bins_interpolates_inside_them() -> None:
    quantiles = Histogram(np_histogram=([0, 10, 10, 0], [0.0, 1.0, 2.0, 3.0, 4.0])).quantiles
    assert quantiles == pytest.approx(
        {"min": 1.0, "p5": 1.1, "p25": 1.5, "median": 2.0, "p75": 2.5, "p95": 2.9, "max": 3.0}
    )


def test_a_histogram_without_a_finite_value_logs_nothing() -> None:
    assert Histogram([math.nan, math.inf]).points("h") == {}
    with pytest.raises(ValueError, match="one of the two"):
        Histogram()


def test_media_values_are_accepted_noted_once_and_not_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = offline(tmp_path)
    table = holter.Table(columns=["a"], data=[[1]])
    table.add_data(2)
    holter.Table()
    holter.log({"samples": table, "picture": holter.Image(b"..."), "loss": 1.0})
    artifact = holter.Artifact("model", type="model")
    artifact.add_file("model.pt")
    run.log_artifact(artifact)
    assert points(run, tmp_path) == {"loss": {0: 1.0}}
    err = capsys.readouterr().err
    assert (
        err.count("Table values are accepted and not stored") == 1
        and "Image values" in err
        and "non-numeric" not in err
    )


def test_a_tag_longer_than_the_service_keeps_is_cut_to_128_characters(tmp_path: Path) -> None:
    run = offline(tmp_path, tags=["t" * 500, "", "short"])
    registration = bodies(run, tmp_path, "/api/v1/runs")[0]
    assert registration["tags"] == ["t" * 128, "short"]
