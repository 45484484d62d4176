"""The parts of the wandb surface added for issue 32 whose rules the probe (tests/wandb_probe.py)
does not pin down one by one: which environment variable wins, how nested dicts and sweeps are
spread, what a disabled run writes, and the names kept on the run. Read back, as in
test_wandb_surface.py, from the requests an offline run leaves in its spool."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import holter
import pytest
from holter import sweeps

from tests.unit.client.test_wandb_surface import bodies, offline, points


@pytest.fixture(autouse=True)
def no_current_run(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("WANDB_") or name in ("HOLTER_PROJECT", "HOLTER_RUN_ID", "HOLTER_NAME", "HOLTER_MODE"):
            monkeypatch.delenv(name)
    yield
    holter.finish()


def test_an_argument_wins_over_holters_variable_which_wins_over_wandbs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_PROJECT", "from-wandb")
    monkeypatch.setenv("WANDB_NAME", "wandb-name")
    monkeypatch.setenv("HOLTER_NAME", "holter-name")
    run = holter.init(mode="offline", spool_dir=tmp_path)
    assert (run.project, run.name) == ("from-wandb", "holter-name")
    run = holter.init(project="given", name="given-name", mode="offline", spool_dir=tmp_path)
    assert (run.project, run.name) == ("given", "given-name")


def test_wandb_run_id_tags_and_labels_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_RUN_ID", "envrun1")
    monkeypatch.setenv("WANDB_TAGS", "a, b")
    monkeypatch.setenv("WANDB_RUN_GROUP", "g")
    monkeypatch.setenv("WANDB_JOB_TYPE", "eval")
    monkeypatch.setenv("WANDB_NOTES", "from the environment")
    run = offline(tmp_path)
    assert (run.id, run.tags, run.group, run.job_type, run.notes) == (
        "envrun1",
        ("a", "b"),
        "g",
        "eval",
        "from the environment",
    )
    registration = bodies(run, tmp_path, "/api/v1/runs")[0]
    assert (
        registration["tags"] == ["a", "b", "group:g", "job_type:eval"]
        and registration["notes"] == "from the environment"
    )


def test_wandb_mode_disabled_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setenv("HOLTER_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.chdir(tmp_path)
    run = holter.init(project="p", url="http://127.0.0.1:9")
    holter.log({"loss": 1.0})
    run.finish()
    assert run.disabled and list(tmp_path.iterdir()) == []


def test_holters_mode_wins_over_wandbs(monkeypatch: pytest.MonkeyPatch) -> None:
    from holter.current import resolve_mode

    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setenv("HOLTER_MODE", "offline")
    assert resolve_mode(None) == "offline" and resolve_mode("online") == "online"


def test_wandb_silent_keeps_init_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HOLTER_QUIET", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    holter.init(project="p", mode="offline", spool_dir=tmp_path)
    holter.termlog("hidden")
    holter.termwarn("shown")
    assert capsys.readouterr().err == "holter: WARNING shown\n"


def test_nested_dicts_become_paths_and_keep_their_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = offline(tmp_path)
    holter.log({"train": {"loss": 2.0, "sub": {"x": math.inf, "h": holter.Histogram([1, 2, 3]), "label": "a"}}})
    holter.log({"train": {"loss": 1.0}})
    found = points(run, tmp_path)
    assert found["train/loss"] == {0: 2.0, 1: 1.0} and found["train/sub/x"] == {0: "Infinity"}
    assert found["train/sub/h/median"] == {0: 2.0} and "train/sub/label" not in found
    assert "'train/sub/label' got a non-numeric value" in capsys.readouterr().err


def test_a_nested_dict_follows_a_glob_step_metric(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.define_metric("val/*", step_metric="epoch")
    holter.log({"val": {"acc": 0.5}, "epoch": 4})
    assert points(run, tmp_path)["val/acc"] == {4: 0.5}


def test_allow_val_change_is_not_a_config_key_and_setdefaults_keeps_what_is_set(tmp_path: Path) -> None:
    run = offline(tmp_path, config={"lr": 0.1})
    holter.config.update({"lr": 0.2}, allow_val_change=True)
    holter.config.setdefaults({"lr": 0.5, "epochs": 3})
    assert bodies(run, tmp_path, "/api/v1/runs")[-1]["config"] == {"lr": 0.2, "epochs": 3}


def test_config_include_and_exclude_keys_filter_the_init_config(tmp_path: Path) -> None:
    run = offline(tmp_path, config={"a": 1, "b": 2, "c": 3}, config_include_keys=["a", "b"], config_exclude_keys=["b"])
    assert dict(run.config) == {"a": 1}


def test_renaming_retagging_and_new_notes_are_sent_in_order(tmp_path: Path) -> None:
    run = offline(tmp_path, tags=["a"], group="g")
    run.name = "renamed"
    run.tags = (*run.tags, "best")
    run.notes = "why"
    sent = [body for body in bodies(run, tmp_path, "/api/v1/runs")]
    assert sent[-1] == {
        "id": run.id,
        "project": "p",
        "config": {},
        "name": "renamed",
        "tags": ["a", "best", "group:g"],
        "notes": "why",
    }
    assert run.tags == ("a", "best")


def test_run_dir_is_made_only_when_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = holter.init(project="p", mode="offline", spool_dir=tmp_path / "spool")
    assert not (tmp_path / "holter-files").exists()
    assert Path(run.dir) == tmp_path / "holter-files" / run.id and Path(run.dir).is_dir()


def test_the_urls_name_the_runs_page_and_its_project(tmp_path: Path) -> None:
    run = holter.init(project="my proj", mode="offline", spool_dir=tmp_path, url="http://holter:8765/")
    assert run.url == run.get_url() == f"http://holter:8765/runs/{run.id}"
    assert run.project_url == "http://holter:8765/?project=my%20proj" and run.sweep_url is None


def test_mark_preempting_raises_an_info_alert_at_the_last_step(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.log({"loss": 1.0}, step=41)
    holter.mark_preempting()
    (sent,) = bodies(run, tmp_path, "/alerts")
    assert (sent["title"], sent["severity"], sent["step"]) == ("preempting", "info", 41)


def test_restore_and_models_are_accepted_and_explained_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from holter import surface

    surface._notes.clear()
    run = offline(tmp_path)
    assert holter.restore("model.h5") is None and run.use_model("m:latest") is None
    run.log_model("model.pt")
    err = capsys.readouterr().err
    assert err.count("are accepted and not stored") == 1 and "restore() finds nothing" in err


def test_join_and_teardown_finish_the_current_run(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.join()
    second = offline(tmp_path)
    holter.teardown(exit_code=1)
    assert (run.status, second.status, holter.run) == ("finished", "crashed", None)


def test_errors_are_wandbs_hierarchy() -> None:
    assert issubclass(holter.NoRunError, holter.errors.UsageError) and issubclass(holter.NoRunError, RuntimeError)
    assert issubclass(holter.errors.AuthenticationError, holter.errors.CommError)
    assert issubclass(holter.errors.UnsupportedError, holter.errors.UsageError)
    assert holter.Error is holter.errors.Error


# --- sweeps ---------------------------------------------------------------------------------------


def trials(sweep_id: str, count: int | None = None) -> list[tuple[dict[str, Any], str | None, list[str]]]:
    seen: list[tuple[dict[str, Any], str | None, list[str]]] = []

    def train() -> None:
        run = holter.init(mode="disabled", config={"lr": 1.0, "keep": True})
        seen.append((dict(run.config), run.sweep_id, run._all_tags()))

    holter.agent(sweep_id, function=train, count=count)
    return seen


def test_a_grid_sweep_runs_every_combination_in_order_over_the_scripts_config() -> None:
    sweep_id = holter.sweep(
        {"method": "grid", "parameters": {"lr": {"values": [0.1, 0.2]}, "layers": {"values": [1, 2]}}}
    )
    seen = trials(sweep_id)
    assert [(c["lr"], c["layers"]) for c, _, _ in seen] == [(0.1, 1), (0.1, 2), (0.2, 1), (0.2, 2)]
    assert all(c["keep"] is True and sid == sweep_id and f"sweep:{sweep_id}" in tags for c, sid, tags in seen)


def test_a_random_sweep_draws_within_each_distribution() -> None:
    sweep_id = holter.sweep(
        {
            "method": "random",
            "parameters": {
                "lr": {"min": 1e-4, "max": 1e-2, "distribution": "log_uniform_values"},
                "layers": {"min": 2, "max": 4},
                "dropout": {"min": 0.0, "max": 0.5},
                "opt": {"parameters": {"name": {"value": "adam"}, "beta": {"values": [0.9, 0.99]}}},
            },
        }
    )
    seen = trials(sweep_id, count=30)
    assert len(seen) == 30
    for config, _, _ in seen:
        assert 1e-4 <= config["lr"] <= 1e-2 and config["layers"] in (2, 3, 4) and 0.0 <= config["dropout"] <= 0.5
        assert config["opt"]["name"] == "adam" and config["opt"]["beta"] in (0.9, 0.99)
    assert len({config["lr"] for config, _, _ in seen}) == 30


def test_a_failed_trial_is_marked_crashed_and_the_next_runs(tmp_path: Path) -> None:
    sweep_id = holter.sweep({"method": "grid", "parameters": {"x": {"values": [1, 2]}}})
    runs: list[Any] = []

    def train() -> None:
        runs.append(holter.init(project="p", mode="offline", spool_dir=tmp_path))
        if holter.config.x == 1:
            raise RuntimeError("trial failed")

    holter.agent(sweep_id, function=train)
    assert [run.status for run in runs] == ["crashed", "finished"]


def test_an_unknown_sweep_runs_the_function_once_without_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    assert trials("made-elsewhere") == [({"lr": 1.0, "keep": True}, "made-elsewhere", ["sweep:made-elsewhere"])]
    assert "was not created by this process" in capsys.readouterr().err


def test_a_sweep_program_runs_with_its_parameters_in_the_environment_and_arguments(tmp_path: Path) -> None:
    program = tmp_path / "train.py"
    out = tmp_path / "out.txt"
    program.write_text(
        "import sys, holter\n"
        "run = holter.init(mode='disabled', config={'lr': 9.0})\n"
        f"open({str(out)!r}, 'a').write(repr((dict(run.config), run.sweep_id, sys.argv[1:])) + '\\n')\n"
    )
    sweep_id = holter.sweep({"method": "grid", "program": str(program), "parameters": {"lr": {"values": [0.5]}}})
    holter.agent(sweep_id)
    assert out.read_text().splitlines() == [repr(({"lr": 0.5}, sweep_id, ["--lr=0.5"]))]
    assert sweeps.active() is None


def test_nested_dicts_gathered_with_commit_false_merge_leaf_by_leaf(tmp_path: Path) -> None:
    run = offline(tmp_path)
    holter.log({"train": {"loss": 2.0}}, commit=False)
    holter.log({"train": {"acc": 0.5}})
    assert points(run, tmp_path) == {"train/loss": {0: 2.0}, "train/acc": {0: 0.5}}
