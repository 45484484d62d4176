"""Live detection in the service, on SQLite and Postgres: events appear within seconds, once
each; they agree with the batch classifier; a restart changes nothing."""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path

import holter
import httpx
import numpy as np
import pytest
from holter.demo.synthetic import SyntheticRun
from holter_server.store.models import EventRow
from sqlalchemy import select

from tests.conftest import own_store
from tests.real_curves import load_series
from tests.servers import ServerProcess
from tests.waiting import wait_until

STEPS = 3000


def stream(run: holter.Run, synthetic: SyntheticRun, start: int, stop: int) -> None:
    for step in range(start, stop):
        run.log(synthetic.metrics(step), step=step)
        if step % 100 == 0:
            run.log({"eval_loss": synthetic.eval_loss(step)}, step=step)


def events_of(url: str, run_id: str, **params: str) -> list[dict]:
    answer = httpx.get(f"{url}/api/v1/runs/{run_id}/events", params={"limit": 1000, **params})
    answer.raise_for_status()
    return answer.json()["data"]


def settled_events(url: str, run_id: str) -> list[dict]:
    """Events once detection has caught up with every stored point (no change over 2 passes)."""
    previous: list[dict] | None = None
    deadline = time.monotonic() + 60
    while True:
        current = sorted(events_of(url, run_id), key=lambda e: e["id"])
        stamp = [(e["id"], e["updated_at"]) for e in current]
        if previous is not None and stamp == previous and current:
            return current
        assert time.monotonic() < deadline
        previous = stamp
        time.sleep(1.2)


PLANTED = {
    ("spike", "loss"),
    ("spike", "grad_norm"),
    ("grad_norm_precursor", "loss"),
    ("sawtooth", "logprob_mismatch"),
    ("mismatch_off_zero", "logprob_mismatch"),
    ("level_shift", "tokens_per_s"),
    ("systems_slowdown", "tokens_per_s"),
    ("divergence", "act_norm/layer.5"),
    ("activation_growth", "act_norm/layer.5"),
    ("layer_dominance", "act_norm/layer.5"),
}


def test_planted_problems_are_named_within_seconds_once_each(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="live", name="planted", url=server.url)
    stream(run, SyntheticRun(STEPS, seed=1), 0, STEPS)
    run.flush()
    logged = time.monotonic()
    wait_until(lambda: {(e["kind"], e["metric"]) for e in events_of(server.url, run.id)} >= PLANTED)
    assert time.monotonic() - logged < 10
    run.finish()
    events = settled_events(server.url, run.id)
    assert {(e["kind"], e["metric"]) for e in events} == PLANTED
    assert Counter((e["kind"], e["metric"], e["start_step"]) for e in events).most_common(1)[0][1] == 1
    by_kind = {e["kind"]: e for e in events}
    assert by_kind["sawtooth"]["period"] == pytest.approx(64, rel=0.1)
    assert "64" in by_kind["mismatch_off_zero"]["summary"]
    assert (
        "grad_norm" in by_kind["grad_norm_precursor"]["summary"] and "loss" in by_kind["grad_norm_precursor"]["summary"]
    )
    assert "tokens_per_s" in by_kind["systems_slowdown"]["summary"] and "loss" in by_kind["systems_slowdown"]["summary"]
    assert "layer.5" in by_kind["layer_dominance"]["summary"]
    assert all(e["detector_version"] for e in events)


def test_a_healthy_run_raises_nothing(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="live", name="healthy", url=server.url)
    stream(run, SyntheticRun(STEPS, seed=2, planted=False), 0, STEPS)
    run.finish()
    time.sleep(3)
    assert events_of(server.url, run.id) == []
    assert httpx.get(f"{server.url}/api/v1/runs/{run.id}").json()["health"] == "healthy"


def test_live_events_agree_with_the_batch_classifier(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="live", name="agree", url=server.url)
    stream(run, SyntheticRun(STEPS, seed=3), 0, STEPS)
    run.finish()
    live = settled_events(server.url, run.id)
    batch = httpx.post(f"{server.url}/api/v1/runs/{run.id}/analyze", timeout=60).json()
    batch_events = [e for series in batch["series"] for e in series["events"]] + batch["findings"]

    def key(e: dict) -> tuple:
        start = None if e["kind"] == "layer_dominance" else e["start_step"]  # judged on latest values
        return (e["kind"], e["metric"], start, e["severity"])

    assert sorted(map(key, live)) == sorted(map(key, batch_events))
    per_metric = {(e["kind"], e["metric"], e["start_step"]): e for e in live}
    for e in (e for series in batch["series"] for e in series["events"]):
        assert per_metric[(e["kind"], e["metric"], e["start_step"])]["summary"] == e["summary"]


def test_a_growing_divergence_is_updated_not_duplicated(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="live", name="nan", url=server.url)
    for step in range(300):
        run.log({"loss": 3.0 - step / 300}, step=step)
    for step in range(300, 320):
        run.log({"loss": math.nan}, step=step)
    run.flush()
    wait_until(lambda: any(e["kind"] == "divergence" for e in events_of(server.url, run.id)))
    first = [e for e in events_of(server.url, run.id) if e["kind"] == "divergence"]
    for step in range(320, 400):
        run.log({"loss": math.nan}, step=step)
    run.finish()
    wait_until(lambda: [e["end_step"] for e in events_of(server.url, run.id, kind="divergence")] == [399])
    (grown,) = events_of(server.url, run.id, kind="divergence")
    assert grown["id"] == first[0]["id"] and grown["start_step"] == 300
    assert "NaN" in grown["summary"] and "300" in grown["summary"]


def test_a_restart_mid_run_neither_misses_nor_repeats_events(store_url: str, spool_dir: Path, tmp_path: Path) -> None:
    server = ServerProcess(own_store(store_url, tmp_path), log_path=tmp_path / "server.log").start()
    try:
        synthetic = SyntheticRun(STEPS, seed=4)
        run = holter.init(project="live", name="restart", url=server.url)
        stream(run, synthetic, 0, 1500)  # the loss spike at step 1,200 is in the first half
        run.flush()
        wait_until(lambda: any(e["kind"] == "spike" and e["metric"] == "loss" for e in events_of(server.url, run.id)))
        server.kill()
        server.start()
        stream(run, synthetic, 1500, STEPS)
        run.finish(timeout=60)
        batch = httpx.post(f"{server.url}/api/v1/runs/{run.id}/analyze", timeout=60).json()
        expected = sorted((e["kind"], e["metric"], e["start_step"]) for s in batch["series"] for e in s["events"])
        detector_kinds = {"spike", "divergence", "plateau", "sawtooth", "too_good", "level_shift"}

        def per_metric() -> list[tuple[str, str, int]]:
            return sorted(
                (e["kind"], e["metric"], e["start_step"])
                for e in events_of(server.url, run.id)
                if e["kind"] in detector_kinds
            )

        # the restarted worker first has to start and claim the run, and passes are paced a
        # second apart: "no change for a moment" is not "caught up", so wait for the batch's answer
        # (a missed event never comes, a repeated one never goes: both time out)
        found: list[tuple[str, str, int]] = []

        def caught_up() -> bool:
            found[:] = per_metric()
            return found == expected

        try:
            wait_until(caught_up, timeout=90, interval=1.0)
        except AssertionError:
            assert found == expected  # the difference, not just "gave up"
        assert len(found) == len(set(found))
    finally:
        server.stop()


def log_real_run(run: holter.Run, *series: tuple[str, str]) -> None:
    """Log corpus series (tests/data/real_curves) step by step as the trainer did, under their metric names."""
    by_step: dict[int, dict[str, float]] = {}
    for name, metric in series:
        for step, value in zip(*load_series(name).arrays()):
            by_step.setdefault(int(step), {})[metric] = float(value)
    for step in sorted(by_step):
        run.log(by_step[step], step=step)


def test_run_level_findings_are_named_live_from_a_handful_of_evals(server: ServerProcess, spool_dir: Path) -> None:
    # the real whisper-large-v2 fine-tune: eval loss up at each of its 5 evals while train falls to 0.0002
    run = holter.init(project="live", name="whisper", url=server.url)
    log_real_run(run, ("whisper_ja_train_loss", "loss"), ("whisper_ja_eval_loss", "eval_loss"))
    run.finish()
    wait_until(lambda: {"overfitting", "too_good"} <= {e["kind"] for e in events_of(server.url, run.id)})
    events = settled_events(server.url, run.id)
    (overfit,) = [e for e in events if e["kind"] == "overfitting"]
    assert overfit["metric"] == "eval_loss" and overfit["start_step"] == 1000 and overfit["severity"] == "warning"
    gaps = [e for e in events if e["kind"] == "too_good" and e["details"].get("cause") == "train_far_below_eval"]
    assert [e["metric"] for e in gaps] == ["loss"]
    batch = httpx.post(f"{server.url}/api/v1/runs/{run.id}/analyze", timeout=60).json()
    assert {(f["kind"], f["metric"], f["start_step"]) for f in batch["findings"]} == {
        (e["kind"], e["metric"], e["start_step"]) for e in events if "signals" in e["details"]
    }


def test_a_loss_printing_zero_beside_a_zero_gradient_norm_is_named_a_broken_run_live(
    server: ServerProcess, spool_dir: Path
) -> None:
    # ms-swift GRPO with every advantage zero: loss and grad_norm exactly 0.0 from step 1
    run = holter.init(project="live", name="swift", url=server.url)
    log_real_run(run, ("swift_grpo_zero_loss", "loss"), ("swift_grpo_zero_grad_norm", "grad_norm"))
    run.finish()
    wait_until(lambda: any(e["kind"] == "plateau" and e["metric"] == "loss" for e in events_of(server.url, run.id)))
    (broken,) = [e for e in events_of(server.url, run.id) if e["kind"] == "plateau" and e["metric"] == "loss"]
    assert broken["severity"] == "critical" and "grad_norm" in broken["summary"]


def test_a_grpo_loss_printing_zero_while_it_learns_raises_nothing_live(server: ServerProcess, spool_dir: Path) -> None:
    # Unsloth GRPO on triage data: TRL prints the loss as 0.0 while grad norm and KL move
    run = holter.init(project="live", name="triage", url=server.url)
    log_real_run(
        run,
        ("unsloth_grpo_triage_loss", "loss"),
        ("unsloth_grpo_triage_grad_norm", "grad_norm"),
        ("unsloth_grpo_triage_kl", "kl"),
        ("unsloth_grpo_triage_reward", "reward"),
    )
    run.finish()
    time.sleep(3)
    assert [e for e in events_of(server.url, run.id) if e["severity"] != "info"] == []


def test_a_detector_rebuilt_from_a_state_older_than_its_progress_finds_the_same_events(tmp_path: Path) -> None:
    """Detection saves a detector's state only every few seconds (its progress every pass); a
    process that has to rebuild it from the older state reads again from the detector's own last
    step and ends with the same events as one that never stopped, none twice."""
    from holter_server.schemas.points import read_batch
    from holter_server.services import detection
    from holter_server.services.ingest import ingest_batch
    from holter_server.store import runs as runs_store
    from holter_server.store.database import make_engine, make_session_factory, upgrade
    from holter_server.store.models import DetectorStateRow

    url = f"sqlite:///{tmp_path / 'holter.db'}"
    upgrade(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    live_detectors = detection.LiveDetectors()  # this test's detection loop
    rng = np.random.default_rng(7)
    loss = 2.0 * np.exp(-np.arange(600) / 400) + rng.normal(0, 0.01, 600)
    loss[450] = 40.0  # a spike after the restart
    with factory() as session:
        for run_id in ("steady", "restarted"):
            runs_store.create_or_resume_run(session=session, run_id=run_id, project="p", name=None, config={}, tags=[])
        session.commit()
    for start in range(0, 600, 50):
        steps = list(range(start, start + 50))
        for run_id in ("steady", "restarted"):
            with factory() as session:
                ingest_batch(
                    session=session,
                    run_id=run_id,
                    batch=read_batch(
                        {"metrics": {"loss": {"steps": steps, "values": loss[start : start + 50].tolist()}}}
                    ),
                    max_metrics=100,
                )
                session.commit()
        if start == 400:  # the process ends: its detectors are gone, their saved states behind
            with factory() as session:
                row = session.get(DetectorStateRow, ("restarted", 1))
                assert row is not None and row.state["last_step"] < row.detected_step
            for key in [key for key in live_detectors if key[0] == "restarted"]:
                del live_detectors[key]
        detection.detect_pending(session_factory=factory, live=live_detectors)
    states = {run_id: live_detectors[(run_id, 1)].detector.state() for run_id in ("steady", "restarted")}  # type: ignore[union-attr]
    with factory() as session:
        events = {
            run_id: sorted(
                (e.kind, e.metric, e.start_step, e.severity)
                for e in session.scalars(
                    select(EventRow).where(EventRow.run_id == run_id, EventRow.status != "withdrawn")
                )
            )
            for run_id in ("steady", "restarted")
        }
    engine.dispose()
    assert ("spike", "loss", 450) in {e[:3] for e in events["steady"]}
    assert events["restarted"] == events["steady"]
    assert states["restarted"]["finite_seen"] == 600
    assert states["restarted"] == states["steady"]


def test_a_series_its_detector_cannot_read_does_not_stop_detection_of_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from holter_server.detect.incremental import IncrementalDetector
    from holter_server.schemas.points import read_batch
    from holter_server.services import detection
    from holter_server.services.ingest import ingest_batch
    from holter_server.store import runs as runs_store
    from holter_server.store.database import make_engine, make_session_factory, upgrade
    from holter_server.store.models import DetectorStateRow

    real_add = IncrementalDetector.add

    def add(self: IncrementalDetector, steps: list[int], values: list[float]):  # type: ignore[no-untyped-def]
        if self.metric == "poison_loss" and steps[0] < 100:
            raise IndexError("a detector bug")
        return real_add(self, steps, values)

    monkeypatch.setattr(IncrementalDetector, "add", add)
    url = f"sqlite:///{tmp_path / 'holter.db'}"
    upgrade(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    live_detectors = detection.LiveDetectors()  # this test's detection loop
    loss = [2.0 - step / 1000 for step in range(200)]
    loss[150] = math.nan
    with factory() as session:
        runs_store.create_or_resume_run(session=session, run_id="r", project="p", name=None, config={}, tags=[])
        for start in (0, 100):
            metrics = {
                name: {"steps": list(range(start, start + 100)), "values": loss[start : start + 100]}
                for name in ("poison_loss", "loss")
            }
            ingest_batch(session=session, run_id="r", batch=read_batch({"metrics": metrics}), max_metrics=100)
            session.commit()
            detection.detect_pending(session_factory=factory, live=live_detectors)
        kinds = {(e.kind, e.metric) for e in session.scalars(select(EventRow).where(EventRow.run_id == "r"))}
        progress = {
            row.metric_id: row.detected_step
            for row in session.scalars(select(DetectorStateRow).where(DetectorStateRow.run_id == "r"))
        }
    engine.dispose()
    assert ("divergence", "loss") in kinds
    assert ("divergence", "poison_loss") in kinds  # its fresh detector read the points after the failure
    assert progress == {1: 199, 2: 199}
    assert "detection of 'poison_loss' in run r failed at steps 0-99" in caplog.text


def test_quiet_points_wait_for_a_later_read_and_an_outlier_is_read_at_once(
    empty_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A detector's cost is per call: a second's unremarkable points wait (up to WAIT_S) to be
    read with the next ones, once per pass; a spike is read in the pass it arrives in, and the
    points waiting when the run finishes in the next pass."""
    from holter_server.schemas.points import read_batch
    from holter_server.services import detection, lifecycle
    from holter_server.services.ingest import ingest_batch
    from holter_server.store import runs as runs_store
    from holter_server.store.database import make_engine, make_session_factory, upgrade
    from holter_server.store.models import DetectorStateRow

    url = empty_store_url
    upgrade(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    live_detectors = detection.LiveDetectors()  # this test's detection loop
    rng = np.random.default_rng(11)
    loss = 2.0 + rng.normal(0, 0.02, 490)
    loss[415] = 40.0

    def log(start: int, stop: int) -> int:
        """Log steps [start, stop), run one pass; returns how far detection has read."""
        with factory() as session:
            batch = read_batch(
                {"metrics": {"loss": {"steps": list(range(start, stop)), "values": loss[start:stop].tolist()}}}
            )
            ingest_batch(session=session, run_id="r", batch=batch, max_metrics=100)
            session.commit()
        # claimed once in the pass, waiting or not
        assert detection.detect_pending(session_factory=factory, live=live_detectors) <= 1
        with factory() as session:
            row = session.get(DetectorStateRow, ("r", 1))
            assert row is not None
            return row.detected_step

    with factory() as session:
        runs_store.create_or_resume_run(session=session, run_id="r", project="p", name=None, config={}, tags=[])
        session.commit()
    try:
        assert log(0, 400) == 399
        assert log(400, 410) == 399  # unremarkable: waits, unread in the store
        assert log(410, 420) == 419  # a spike at 415: read at once, with the points that waited
        with factory() as session:
            assert ("spike", 415) in {
                (e.kind, e.start_step) for e in session.scalars(select(EventRow).where(EventRow.run_id == "r"))
            }
        assert log(420, 430) == 419
        assert log(430, 440) == 419
        monkeypatch.setattr(detection, "WAIT_S", 0.0)  # as when WAIT_S has passed
        assert log(440, 450) == 449
        assert log(450, 460) == 459
        monkeypatch.setattr(detection, "WAIT_S", 60.0)
        assert log(460, 470) == 459
        live_detectors.clear()  # the process ends while points wait in its memory
        assert log(470, 480) == 479  # a detector rebuilt from the saved state reads them from the store
        with factory() as session:
            row = session.get(DetectorStateRow, ("r", 1))
            assert row is not None and row.state["finite_seen"] == 480
        assert log(480, 490) == 479
        with factory() as session:  # no later points come to a finished run: what waits is read now
            run = runs_store.get_run(session=session, run_id="r")
            assert run is not None
            lifecycle.finish(session=session, run=run, status="finished")
            session.commit()
        detection.detect_pending(session_factory=factory, live=live_detectors)
        with factory() as session:
            row = session.get(DetectorStateRow, ("r", 1))
            assert row is not None and row.detected_step == 489
        assert ("r", 1) in live_detectors
        monkeypatch.setattr(detection, "QUIET_S", 0.0)  # as when the finished run has been quiet that long
        detection.detect_pending(session_factory=factory, live=live_detectors)
        # its state saved, nothing of the ended run stays in the loop's memory
        assert not live_detectors and not live_detectors.findings_at
    finally:
        engine.dispose()


def test_waiting_metrics_are_moved_back_in_the_queue_only_when_the_pass_goes_on(
    empty_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass in several groups moves the metrics whose points wait back in the queue (each is
    claimed once in it); a group that took every metric with new points ends the pass and
    leaves their progress rows as they were: no write per waiting metric per pass, and their
    detected_step still behind the points that wait."""
    from holter_server.schemas.points import read_batch
    from holter_server.services import detection
    from holter_server.services.ingest import ingest_batch
    from holter_server.store import runs as runs_store
    from holter_server.store.database import make_engine, make_session_factory, upgrade
    from holter_server.store.models import DetectorStateRow

    upgrade(empty_store_url)
    engine = make_engine(empty_store_url)
    factory = make_session_factory(engine)
    live_detectors = detection.LiveDetectors()
    names = ["loss", "eval_loss", "accuracy"]

    def log(start: int, stop: int) -> None:
        steps = list(range(start, stop))
        metrics = {
            name: {"steps": steps, "values": [2.0 + i - 0.001 * s for s in steps]} for i, name in enumerate(names)
        }
        with factory() as session:
            ingest_batch(session=session, run_id="r", batch=read_batch({"metrics": metrics}), max_metrics=100)
            session.commit()

    def rows() -> dict[int, tuple[int, object]]:
        with factory() as session:
            return {
                row.metric_id: (row.detected_step, row.updated_at)
                for row in session.scalars(select(DetectorStateRow).where(DetectorStateRow.run_id == "r"))
            }

    try:
        with factory() as session:
            runs_store.create_or_resume_run(session=session, run_id="r", project="p", name=None, config={}, tags=[])
            session.commit()
        log(0, 400)
        assert detection.detect_pending(session_factory=factory, live=live_detectors) == 3
        monkeypatch.setattr(detection, "WAIT_S", 600.0)  # however slow this machine: their points wait
        read = rows()
        assert {step for step, _ in read.values()} == {399}

        log(400, 410)
        # groups of one: each metric claimed once in the pass; those of the groups the pass went on
        # after are moved back in the queue, behind the last
        assert detection.detect_pending(session_factory=factory, live=live_detectors, per_transaction=1) == 3
        moved = rows()
        assert {step for step, _ in moved.values()} == {399}
        assert sorted(moved[m][1] > read[m][1] for m in read) == [False, True, True]

        log(410, 420)
        # one group takes them all: the pass ends with it, and nothing is written for them
        assert detection.detect_pending(session_factory=factory, live=live_detectors, per_transaction=10) == 3
        assert rows() == moved
        assert all(len(live_detectors[("r", m)].waiting[0]) == 20 for m in read)
    finally:
        engine.dispose()
