"""The post-mortem summary reads like a colleague's write-up."""

from __future__ import annotations

import pytest
from holter_server.postmortem.summary import write_summary
from holter_server.vocabulary.events import EVENT_KIND_NAMES, SUMMARISED_KINDS


def event(kind: str, metric: str | None, step: int, severity: str = "warning", **extra: object) -> dict:
    return {
        "kind": kind,
        "metric": metric,
        "start_step": step,
        "end_step": step,
        "severity": severity,
        "score": 1.0,
        "summary": extra.pop("summary", f"{metric} {kind}"),
        "status": "open",
        "details": extra.pop("details", {}),
        **extra,
    }


def test_a_divergence_after_gradient_spikes_and_a_slowdown_are_told_in_order_of_gravity() -> None:
    events = [
        event("spike", "grad_norm", 8000),
        event("spike", "grad_norm", 8200),
        event("spike", "grad_norm", 8400),
        event(
            "systems_slowdown",
            "tokens_per_s",
            6000,
            summary=(
                "tokens_per_s fell 40% at step 6,000 (52,000 → 31,200) while loss carried on unchanged: "
                "a systems problem"
            ),
        ),
        event("divergence", "loss", 8412, severity="critical", details={"cause": "nonfinite"}),
    ]
    text = write_summary(name="gpt2-baseline", status="crashed", last_step=8500, events=events)
    assert text.startswith(
        "gpt2-baseline ran to step 8,500 and crashed: loss went non-finite at step 8,412 after 3 gradient-norm spikes"
    )
    assert "tokens_per_s fell 40% at step 6,000 (52,000 → 31,200) with the loss unchanged" in text


def test_a_healthy_run_says_so() -> None:
    assert (
        write_summary(name="r", status="finished", last_step=1000, events=[])
        == "r ran to step 1,000 and finished: a healthy run, nothing to report."
    )


def test_dismissed_events_are_left_out() -> None:
    dismissed = {**event("divergence", "loss", 10, severity="critical"), "status": "dismissed"}
    assert "healthy" in write_summary(name="r", status="finished", last_step=20, events=[dismissed])


def test_a_recurring_mismatch_gives_its_period() -> None:
    text = write_summary(
        name="grpo",
        status="finished",
        last_step=3000,
        events=[event("mismatch_off_zero", "logprob_mismatch", 1856, severity="critical", period=64.0)],
    )
    assert "left ≈0 at step 1,856, every 64 steps" in text


def test_the_tripwire_an_input_stall_overfitting_and_gpu_findings_are_told() -> None:
    told = {
        "first_nonfinite": "first non-finite output at step 1,200: `blocks.1.attn` (forward, nan)",
        "input_stall": "input pipeline stall: the step waited 60% of its time for data from step 4,000",
        "overfitting": "eval_loss turned up for good after step 1,000",
        "gpu_memory_leak": "GPU 0 memory climbed from 62% to 91%",
        "gpu_idle": "GPU 3 utilisation fell to 2%",
        "gpu_throttled": "GPU 0 clocks were cut for heat",
    }
    events = [event(kind, "m", 1000 + i, summary=text) for i, (kind, text) in enumerate(told.items())]
    text = write_summary(name="r", status="finished", last_step=5000, events=events)
    assert all(sentence in text for sentence in told.values())


@pytest.mark.parametrize("kind", EVENT_KIND_NAMES)
def test_the_summary_tells_what_the_vocabulary_says_it_tells(kind: str) -> None:
    text = write_summary(
        name="r",
        status="finished",
        last_step=5000,
        events=[event(kind, "loss", 100, summary=f"the {kind} sentence", period=10.0, score=3.0)],
    )
    assert ("a healthy run" not in text) == (kind in SUMMARISED_KINDS)


def test_a_sawtooth_gives_the_config_parameter_its_period_matches() -> None:
    saw = event("sawtooth", "loss", 64, period=64.0, details={"period_note": "period 64 = rollouts_num"})
    text = write_summary(name="r", status="finished", last_step=1000, events=[saw], kinds={"loss": "loss"})
    assert "loss followed a sawtooth with period 64 steps from step 64 (period 64 = rollouts_num)" in text


def test_loss_spikes_shared_with_twin_runs_are_put_on_the_batch() -> None:
    twinned = event("spike", "loss", 946, details={"twins": [{"run_id": "b", "step": 946}]})
    text = write_summary(
        name="r",
        status="finished",
        last_step=2000,
        events=[twinned, event("spike", "loss", 1500)],
        kinds={"loss": "loss"},
    )
    assert (
        "2 loss spikes, the largest at step 946; 1 of them recurs in runs with the same data order "
        "(the batch, not the optimiser: step 946)" in text
    )


def test_a_seed_group_closes_the_summary_in_one_clause() -> None:
    clause = "eval_loss ends 0.031 above its 3-seed group's mean, a real difference (seed SD 0.006)"
    events = [event("divergence", "loss", 8412, severity="critical")]
    told = write_summary(name="r", status="finished", last_step=9000, events=events, seed_clause=clause)
    assert told.endswith(f"loss diverged at step 8,412; {clause}.")
    assert (
        write_summary(name="r", status="finished", last_step=9000, events=[], seed_clause=clause)
        == f"r ran to step 9,000 and finished: a healthy run, no events; {clause}."
    )


def test_a_loss_drift_is_told_as_a_creep_with_what_moved_with_it() -> None:
    drift = event("divergence", "train/loss", 6500, details={"cause": "drift", "relative": 0.18, "state": "rising"})
    together = event(
        "drift_together",
        "train/loss",
        6400,
        details={"signals": ["train/loss", "grad_norm", "eval/loss"], "source_event": "train/loss:divergence@6500"},
    )
    text = write_summary(name="r", status="running", last_step=8000, events=[drift, together])
    assert (
        "train/loss crept up 18% from step 6,500 and is still rising, with grad_norm and eval/loss moving with it"
        in text
    )


def test_a_throughput_drift_slides_down() -> None:
    drift = event("divergence", "tokens_per_s", 3000, details={"cause": "drift", "relative": -0.23, "state": "stopped"})
    text = write_summary(
        name="r", status="finished", last_step=8000, events=[drift], kinds={"tokens_per_s": "throughput"}
    )
    assert "tokens_per_s slid down 23% from step 3,000, then held" in text


def test_an_incident_leads_with_its_cause_and_its_events_are_not_told_again() -> None:
    events = [
        event("divergence", "loss", 80, "critical", details={"cause": "nonfinite"}),
        event("divergence", "holter/grad_norm/layers.1", 80, "critical", details={"cause": "nonfinite"}),
        event("divergence", "holter/grad_norm/layers.2", 80, "critical", details={"cause": "nonfinite"}),
        event("first_nonfinite", "loss", 80, "critical"),
        event("run_crashed", None, 120, "critical"),
    ]
    nan = {
        "rule": "nonfinite",
        "cause": "the forward pass of `blocks.1.attn` made the first non-finite value at step 80",
        "severity": "critical",
        "start_step": 80,
        "event_ids": [f"{e['metric']}:{e['kind']}@80" for e in events[:4]],
    }
    text = write_summary(name="r", status="crashed", last_step=120, events=events, incidents=[nan])
    told = text.split(": ", 1)[1]
    assert told.startswith("the forward pass of `blocks.1.attn` made the first non-finite value at step 80; ")
    assert "crashed at step 120" in told  # not part of it: told on its own
    assert "went non-finite" not in told and "layers.2" not in told


def test_an_incident_of_one_event_is_told_as_the_event() -> None:
    events = [event("divergence", "loss", 80, "critical", details={"cause": "nonfinite"})]
    alone = {
        "rule": "single",
        "cause": "x",
        "severity": "critical",
        "start_step": 80,
        "event_ids": ["loss:divergence@80"],
    }
    assert "loss went non-finite at step 80" in write_summary(
        name="r", status="finished", last_step=100, events=events, incidents=[alone]
    )
