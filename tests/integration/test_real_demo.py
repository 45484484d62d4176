"""The real demo: each small CPU training streams into a real service and shows its diagnosis.

Shortened runs (about half the demo's steps); about 30-60 s on two cores.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

torch = pytest.importorskip("torch")

from holter.cli import REAL_SCENARIOS, main
from holter.demo import real
from holter_server.detect import classify_series, is_alarm, verdict

from tests.servers import ServerProcess
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One SQLite-backed service for the whole module: the trainings, not the store, are under test."""
    folder = tmp_path_factory.mktemp("real_demo")
    process = ServerProcess(f"sqlite:///{folder / 'holter.db'}", log_path=folder / "server.log").start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def corpus() -> Iterator[real.Corpus]:
    """The demo's corpus, trained on one thread as `holter demo --real` does."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield real.Corpus.generate()
    torch.set_num_threads(threads)


def stored_events(server: ServerProcess, run_id: str, metric: str) -> list:
    series = httpx.get(f"{server.url}/api/v1/runs/{run_id}/metrics/{metric}/points", timeout=30).json()
    return classify_series(series["steps"], series["values"], metric=metric)


def test_the_cli_offers_every_scenario() -> None:
    assert list(REAL_SCENARIOS) == list(real.SCENARIOS)


@pytest.mark.parametrize("scenario", list(real.scenarios(scale=0.5)), ids=lambda s: s.name)
def test_scenario_shows_its_diagnosis(
    scenario: real.Scenario, sqlite_server: ServerProcess, corpus: real.Corpus, spool_dir: Path
) -> None:
    recorder = real.stream_scenario(scenario, url=sqlite_server.url, project="real-demo", corpus=corpus)
    run_id = recorder.run.id
    stored = {m["name"]: m["count"] for m in httpx.get(f"{sqlite_server.url}/api/v1/runs/{run_id}").json()["metrics"]}
    assert stored["loss"] == scenario.steps and stored["holter/grad_norm"] == len(range(0, scenario.steps, 5))
    assert "holter/act_norm/blocks.0" in stored and "holter/throughput/tokens_per_s" in stored
    if scenario.expected == "healthy":
        for metric in ("loss", "eval_loss", "holter/grad_norm"):
            assert not is_alarm(verdict(stored_events(sqlite_server, run_id, metric))), metric
    else:
        kinds = {e.kind for e in stored_events(sqlite_server, run_id, scenario.metric) if e.severity != "info"}
        assert scenario.expected in kinds
    if scenario.finding:
        assert_service_raised(sqlite_server, run_id, scenario)


def assert_service_raised(server: ServerProcess, run_id: str, scenario: real.Scenario) -> None:
    """The live service names the scenario's cross-signal finding: the module the NaN came from, the stall."""

    def found() -> list[dict]:
        events = httpx.get(
            f"{server.url}/api/v1/runs/{run_id}/events", params={"kind": scenario.finding}, timeout=30
        ).json()["data"]
        # a NaN report stands alone until a divergence is detected and it is attached to it (at
        # the run's next findings refresh); the gradient norm's divergence may be found first and
        # the report moves to the loss's once that one is found: wait for the loss's
        return [e for e in events if e["severity"] != "info" and (scenario.nan_block is None or e["metric"] == "loss")]

    (event,) = wait_until(found)
    planted = int(scenario.steps * real.PLANTED_FROM)
    if scenario.nan_block is not None:
        assert event["summary"].startswith(
            f"first non-finite output at step {planted}: `blocks.{scenario.nan_block}.attn` (forward"
        )
        assert event["metric"] == "loss" and event["severity"] == "critical"
    else:
        assert event["summary"].startswith("input pipeline stall: the step waited")
        assert planted <= event["start_step"] <= planted + 10


def test_rl_mismatch_spikes_with_the_period_set_by_rollouts_num(
    sqlite_server: ServerProcess, corpus: real.Corpus, spool_dir: Path
) -> None:
    scenario = replace(real.SCENARIOS["rl_mismatch"], rollouts_num=4, steps=100)
    recorder = real.stream_scenario(scenario, url=sqlite_server.url, project="real-demo", corpus=corpus)
    events = stored_events(sqlite_server, recorder.run.id, scenario.metric)
    periods = {e.period for e in events if e.kind == "sawtooth"}
    assert periods == {real.SLOTS / (real.PROMPTS * 4)}  # 24 steps; the demo's rollouts_num=8 gives 12


def test_holter_demo_real_streams_the_chosen_scenario(
    sqlite_server: ServerProcess, corpus: real.Corpus, spool_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["demo", "--real", "--scenario", "frozen", "--url", sqlite_server.url, "--project", "real-demo-cli"]) == 0
    )
    out = capsys.readouterr().out
    assert "training frozen" in out and "loss: critical (plateau)" in out
    runs = httpx.get(f"{sqlite_server.url}/api/v1/runs", params={"project": "real-demo-cli"}).json()
    assert runs["count"] == 1 and runs["data"][0]["status"] == "finished"
