"""The post-mortem summary reads like a colleague's write-up."""

from __future__ import annotations

from holter_server.postmortem.summary import write_summary


def event(kind: str, metric: str | None, step: int, severity: str = "warning", **extra: object) -> dict:
    return {"kind": kind, "metric": metric, "start_step": step, "end_step": step, "severity": severity, "score": 1.0,
            "summary": extra.pop("summary", f"{metric} {kind}"), "status": "open", "details": extra.pop("details", {}), **extra}


def test_a_divergence_after_gradient_spikes_and_a_slowdown_are_told_in_order_of_gravity() -> None:
    events = [
        event("spike", "grad_norm", 8000), event("spike", "grad_norm", 8200), event("spike", "grad_norm", 8400),
        event("systems_slowdown", "tokens_per_s", 6000, summary="tokens_per_s fell 40% at step 6,000 (52,000 → 31,200) while loss carried on unchanged: a systems problem"),
        event("divergence", "loss", 8412, severity="critical", details={"cause": "nonfinite"}),
    ]
    text = write_summary(name="gpt2-baseline", status="crashed", last_step=8500, events=events)
    assert text.startswith("gpt2-baseline ran to step 8,500 and crashed: loss went non-finite at step 8,412 after 3 gradient-norm spikes")
    assert "tokens_per_s fell 40% at step 6,000 (52,000 → 31,200) with the loss unchanged" in text


def test_a_healthy_run_says_so() -> None:
    assert write_summary(name="r", status="finished", last_step=1000, events=[]) == "r ran to step 1,000 and finished: a healthy run, nothing to report."


def test_dismissed_events_are_left_out() -> None:
    dismissed = {**event("divergence", "loss", 10, severity="critical"), "status": "dismissed"}
    assert "healthy" in write_summary(name="r", status="finished", last_step=20, events=[dismissed])


def test_a_recurring_mismatch_gives_its_period() -> None:
    text = write_summary(name="grpo", status="finished", last_step=3000, events=[event("mismatch_off_zero", "logprob_mismatch", 1856, severity="critical", period=64.0)])
    assert "left ≈0 at step 1,856, every 64 steps" in text
