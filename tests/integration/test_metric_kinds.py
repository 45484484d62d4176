"""What a metric is, end to end on SQLite and Postgres: each framework's real names through the
live service and through `holter import`; kinds declared by the client, a run, a batch or a
person on the run page (re-analysed when they change); the vocabulary route."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import holter
import httpx
import pytest
from holter.cli import main
from holter_readers.tabular import STEP_KEYS
from holter_server import vocabulary

from tests.conftest import new_run_id
from tests.frameworks import SCENARIOS, Scenario, write_file
from tests.servers import InProcessServer, ServerProcess
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def server(store_url: str) -> Iterator[InProcessServer]:
    """The service over the session's store, with an idle detection pass every 0.2 s, not 0.5:
    this module mostly waits for detection to settle on a finished run."""
    process = InProcessServer(store_url, settings={"detection_interval": 0.2}).start()
    yield process
    process.stop()


def events_of(api: httpx.Client, run_id: str, **params: str) -> list[dict]:
    answer = api.get(f"/runs/{run_id}/events", params={"limit": 1000, **params})
    answer.raise_for_status()
    return answer.json()["data"]


def settled(api: httpx.Client, run_id: str, expected: frozenset[tuple[str, str]]) -> list[dict]:
    """The run's events once the planted ones are in and nothing changed for STEADY_S, which spans
    at least two of the module's server's detection passes."""
    wait_until(lambda: expected <= {(e["kind"], e["metric"]) for e in events_of(api, run_id)}, timeout=60)
    previous, steady_since = None, time.monotonic()
    while True:
        current = sorted((e["id"], e["updated_at"], e["status"]) for e in events_of(api, run_id, status="open"))
        if current != previous:
            previous, steady_since = current, time.monotonic()
        elif time.monotonic() - steady_since >= STEADY_S:
            return events_of(api, run_id)
        time.sleep(0.15)


STEADY_S = 0.6


def metrics_of(api: httpx.Client, run_id: str) -> dict[str, dict]:
    return {m["name"]: m for m in api.get(f"/runs/{run_id}").json()["metrics"]}


def log_scenario(run: holter.Run, scenario: Scenario) -> None:
    series = scenario.series()
    by_step: dict[int, dict[str, float]] = {}
    for name, (steps, values) in series.items():
        for step, value in zip(steps.tolist(), values.tolist()):
            by_step.setdefault(step, {})[name] = value
    for step, row in sorted(by_step.items()):
        run.log(row, step=step)


def check_reading(api: httpx.Client, run_id: str, scenario: Scenario, events: list[dict]) -> None:
    """Every metric has its kind and says how it was understood; the planted problems are found;
    healthy signals are quiet; an unknown or merely statistical metric raises nothing above info."""
    metrics = metrics_of(api, run_id)
    # a file's step column (nanoGPT's `iter`) is its steps, not a metric
    assert set(scenario.kinds) - set(metrics) <= set(STEP_KEYS)
    assert {name: m["kind"] for name, m in metrics.items()} == {
        name: kind for name, kind in scenario.kinds.items() if name in metrics
    }
    for name, m in metrics.items():
        assert m["understood"]["source"] == ("unknown" if m["kind"] == "unknown" else "recognised"), name
        assert m["panel"] == vocabulary.signals.panel_of(m["kind"])
    live = [e for e in events if e["status"] != "withdrawn"]
    assert scenario.planted <= {(e["kind"], e["metric"]) for e in live}
    assert not [e for e in live if e["metric"] in scenario.quiet]
    quiet_kinds = {"unknown", "statistic", "reward"}
    assert all(e["severity"] == "info" for e in live if metrics.get(e["metric"] or "", {}).get("kind") in quiet_kinds)


@pytest.mark.parametrize("key", sorted(SCENARIOS))
def test_a_framework_s_names_are_understood_live(
    server: ServerProcess, api: httpx.Client, spool_dir: Path, key: str
) -> None:
    scenario = SCENARIOS[key]
    run = holter.init(project="frameworks", name=f"live {scenario.framework}", url=server.url)
    log_scenario(run, scenario)
    run.finish()
    check_reading(api, run.id, scenario, settled(api, run.id, scenario.planted))


@pytest.mark.parametrize("key", sorted(SCENARIOS))
def test_a_framework_s_names_are_understood_by_import(
    server: ServerProcess,
    api: httpx.Client,
    spool_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    key: str,
) -> None:
    scenario = SCENARIOS[key]
    path = write_file(scenario, tmp_path)
    run_id = new_run_id()
    assert (
        main(
            [
                "import",
                str(path),
                "--project",
                "frameworks",
                "--name",
                path.name,
                "--run-id",
                run_id,
                "--url",
                server.url,
            ]
        )
        == 0
    )
    report = capsys.readouterr().out
    for kind, metric in scenario.planted:
        assert f"] {kind} at " in report and f"{metric} (" in report
    unknown = [name for name, kind in scenario.kinds.items() if kind == "unknown"]
    assert all(f"{name} (unknown: watched only for NaN/±Inf and extreme outliers" in report for name in unknown)
    check_reading(api, run_id, scenario, settled(api, run_id, scenario.planted))


def test_kinds_given_to_init_win_over_the_name(server: ServerProcess, api: httpx.Client, spool_dir: Path) -> None:
    run = holter.init(project="kinds", name="declared", url=server.url, kinds={"score/*": "loss"})
    for step in range(200):
        run.log(
            {"score/ce": 2.0 - step / 400 if step < 150 else math.nan, "my_probe": 1.0 if step < 150 else math.nan},
            step=step,
        )
    run.finish()
    wait_until(
        lambda: (
            {e["metric"]: e["severity"] for e in events_of(api, run.id, kind="divergence")}
            == {"score/ce": "critical", "my_probe": "info"}
        )
    )
    metrics = metrics_of(api, run.id)
    assert (metrics["score/ce"]["kind"], metrics["score/ce"]["understood"]) == (
        "loss",
        {"source": "declared", "framework": None, "rule": "score/*", "note": None, "unit": None, "compute_only": False},
    )
    assert metrics["my_probe"]["kind"] == "unknown"


def test_define_metric_declares_kind_summary_and_step_metric(
    server: ServerProcess, api: httpx.Client, spool_dir: Path
) -> None:
    run = holter.init(project="kinds", name="define_metric", url=server.url)
    run.define_metric("train/ce", kind="loss", summary="min", step_metric="train/step")
    run.log({"train/ce": 3.0, "train/step": 0}, step=0)
    run.finish()
    metric = metrics_of(api, run.id)["train/ce"]
    assert (metric["kind"], metric["panel"], metric["summary"], metric["step_metric"]) == (
        "loss",
        "loss",
        "min",
        "train/step",
    )
    assert metric["understood"]["source"] == "declared"


def test_define_metric_that_declares_nothing_stores_nothing(
    server: ServerProcess, api: httpx.Client, spool_dir: Path
) -> None:
    run = holter.init(project="kinds", name="empty define", url=server.url)
    run.define_metric("epoch")  # wandb's way of saying a metric exists (issue 17): accepted, nothing to keep
    run.finish()
    assert api.get(f"/runs/{run.id}").json()["metric_definitions"] == {}


def test_a_batch_may_declare_kinds(api: httpx.Client) -> None:
    run_id = api.post("/runs", json={"project": "kinds", "name": "batch kinds"}).json()["id"]
    body = {"metrics": {"objective": {"steps": [0, 1], "values": [1.0, 0.9]}}, "kinds": {"objective": "eval_loss"}}
    assert api.post(f"/runs/{run_id}/points", json=body).status_code == 200
    assert metrics_of(api, run_id)["objective"]["kind"] == "eval_loss"


def test_a_batch_declaring_an_unknown_kind_is_refused_and_stores_nothing(api: httpx.Client) -> None:
    run_id = api.post("/runs", json={"project": "kinds", "name": "bad batch kinds"}).json()["id"]
    body = {"metrics": {"objective": {"steps": [0], "values": [1.0]}}, "kinds": {"objective": "temperature"}}
    answer = api.post(f"/runs/{run_id}/points", json=body)
    assert answer.status_code == 422 and "eval_loss" in answer.text
    assert metrics_of(api, run_id) == {}


def test_changing_a_metric_s_kind_analyses_it_again(server: ServerProcess, api: httpx.Client, spool_dir: Path) -> None:
    run = holter.init(project="kinds", name="patch", url=server.url)
    for step in range(300):
        run.log({"objective_v2": 3.0 - step / 300 if step < 250 else math.nan}, step=step)
    run.finish()
    wait_until(lambda: [(e["kind"], e["severity"]) for e in events_of(api, run.id)] == [("divergence", "info")])
    answer = api.patch(f"/runs/{run.id}/metrics/objective_v2", json={"kind": "loss"})
    assert (
        answer.status_code == 200
        and answer.json()["kind"] == "loss"
        and answer.json()["understood"]["source"] == "declared"
    )
    # the run is finished and no point arrives: the change alone has it read again, as a loss
    wait_until(lambda: [(e["kind"], e["severity"]) for e in events_of(api, run.id)] == [("divergence", "critical")])
    assert api.get(f"/runs/{run.id}").json()["health"] == "critical"
    back = api.patch(f"/runs/{run.id}/metrics/objective_v2", json={"kind": None})
    assert back.json()["kind"] == "unknown" and back.json()["understood"]["source"] == "unknown"
    wait_until(lambda: [(e["kind"], e["severity"]) for e in events_of(api, run.id)] == [("divergence", "info")])


def test_a_metric_name_with_slashes_can_be_patched(api: httpx.Client) -> None:
    run_id = api.post("/runs", json={"project": "kinds", "name": "slashes"}).json()["id"]
    api.post(f"/runs/{run_id}/points", json={"metrics": {"a/b/c": {"steps": [0], "values": [1.0]}}}).raise_for_status()
    answer = api.patch(f"/runs/{run_id}/metrics/a/b/c", json={"kind": "grad_norm"})
    assert answer.status_code == 200 and answer.json()["panel"] == "grad_norm"


def test_patching_an_unknown_kind_or_metric_says_what_is_wrong(api: httpx.Client) -> None:
    run_id = api.post("/runs", json={"project": "kinds", "name": "bad patch"}).json()["id"]
    api.post(f"/runs/{run_id}/points", json={"metrics": {"x": {"steps": [0], "values": [1.0]}}}).raise_for_status()
    bad_kind = api.patch(f"/runs/{run_id}/metrics/x", json={"kind": "temperature"})
    assert bad_kind.status_code == 422 and "grad_norm" in bad_kind.text
    assert api.patch(f"/runs/{run_id}/metrics/nope", json={"kind": "loss"}).status_code == 404
    assert metrics_of(api, run_id)["x"]["understood"]["source"] == "unknown"


def test_a_loss_read_before_its_run_showed_grpo_is_read_again_as_a_policy_loss(
    server: ServerProcess, api: httpx.Client, spool_dir: Path
) -> None:
    # TRL GRPO logs `loss` (its objective) beside `reward_std`; a loss seen alone first is a language-model loss
    values = SCENARIOS["trl_grpo"].series()["loss"][1]
    run = holter.init(project="kinds", name="late grpo marker", url=server.url)
    for step in range(200):
        run.log({"loss": float(values[step])}, step=step)
    run.flush()
    wait_until(lambda: metrics_of(api, run.id)["loss"]["kind"] == "loss" and events_of(api, run.id))
    for step in range(200, 260):
        run.log({"loss": float(values[step]), "reward_std": 0.3}, step=step)
    run.finish()
    wait_until(lambda: metrics_of(api, run.id)["loss"]["kind"] == "policy_loss")
    wait_until(lambda: not [e for e in events_of(api, run.id) if e["metric"] == "loss" and e["status"] == "open"])


def test_the_vocabulary_route_serves_the_one_vocabulary(api: httpx.Client) -> None:
    served = api.get("/vocabulary").json()
    assert served == json.loads(json.dumps(vocabulary.as_dict()))
    assert [s["name"] for s in served["severities"]] == ["info", "warning", "critical"]
    assert {k["name"] for k in served["signal_kinds"]} >= {"loss", "mismatch_ratio", "policy_loss", "unknown"}
    nemo = next(f for f in served["frameworks"] if f["name"] == "NeMo-RL")
    assert any(r["kind"] == "mismatch_ratio" and "token_mult_prob_error" in r["pattern"] for r in nemo["rules"])
