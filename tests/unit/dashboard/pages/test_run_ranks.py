"""The run page's Ranks section, from a job's ranks as `GET /runs/{id}/ranks` answers: the ranks by
host with the ones a standing event names highlighted, the stopped rank's stack with its innermost
frame first to the eye, the metrics the heatmap offers, and the events' links to their ranks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from holter_dashboard.pages.run.events import event_card
from holter_dashboard.pages.run.ranks import (
    DEFAULT_METRIC,
    MAX_BUCKETS,
    buckets_for,
    default_metric,
    metric_choices,
    rank_events_signature,
    rank_stacks,
    rank_table,
    ranks_text,
    seconds_text,
    section_label,
)

TRAIN = [
    {"file": "/work/train.py", "line": 120, "function": "main", "code": "train(model, loader)"},
    {"file": "/work/train.py", "line": 88, "function": "train", "code": "loss.backward()"},
]
STUCK = [
    TRAIN[0],
    {"file": "/work/data.py", "line": 41, "function": "next_batch", "code": "batch = queue.get()"},
    {"file": "/usr/lib/python3.11/queue.py", "line": 171, "function": "get", "code": "self.not_empty.wait()"},
]


def rank(r: int, **more: Any) -> dict[str, Any]:
    """A rank as `GET /runs/{id}/ranks` lists it: two ranks a host, waiting in the gradients' all-reduce."""
    return {
        "rank": r,
        "local_rank": r % 2,
        "host": f"node-{r // 2}",
        "status": "running",
        "alive": True,
        "step": 300,
        "step_at": None,
        "beat_at": None,
        "collective": "all_reduce (DDP gradients)",
        "collective_since": None,
        "stack": TRAIN,
        "timing": {"steps": 200, "step_s": 0.057, "wait_s": 0.045, "compute_s": 0.012},
        **more,
    }


RANKS = {
    "run_id": "job",
    "world_size": 4,
    "hosts": {"node-1": [3, 2], "node-0": [0, 1]},
    "data": [
        rank(0),
        rank(1),
        rank(2, timing={"steps": 200, "step_s": 0.057, "wait_s": 0.007, "compute_s": 0.05}),
        rank(3, collective=None, stack=STUCK),
    ],
}
STRAGGLER = {"id": 1, "kind": "straggler", "status": "open", "severity": "warning", "details": {"ranks": [2]}}
HUNG = {
    "id": 2,
    "kind": "rank_hung",
    "status": "open",
    "severity": "critical",
    "summary": "ranks 0, 1 and 2 wait in all_reduce (DDP gradients) since step 300",
    "details": {
        "ranks": [3],
        "stacks": [{"rank": 3, "host": "node-1", "status": "running", "step": 300, "quiet_s": 35.0, "stack": STUCK}],
    },
}


def walk(component: Any) -> Iterator[Any]:
    """A component and everything inside it."""
    yield component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, (list, tuple)) else [children]:
        if child is not None and not isinstance(child, (str, int, float)):
            yield from walk(child)


def text_of(component: Any) -> str:
    """The text a component shows, its children's included."""
    if isinstance(component, (str, int, float)):
        return str(component)
    children = getattr(component, "children", None)
    if isinstance(children, (list, tuple)):
        return "".join(text_of(c) for c in children if c is not None)
    return "" if children is None else text_of(children)


def with_class(component: Any, name: str) -> list[Any]:
    return [c for c in walk(component) if name in (getattr(c, "className", None) or "").split()]


def test_the_table_lists_each_host_then_its_ranks_the_named_and_the_picked_ones_marked(vocab) -> None:
    table = rank_table(RANKS, [STRAGGLER, HUNG], vocab, selected=3)
    lines = [
        c for c in walk(table) if (getattr(c, "className", None) or "").split()[:1] in (["rank-host"], ["rank-row"])
    ]
    assert [text_of(line).split(" ·")[0] if "rank-host" in line.className else line.className for line in lines] == [
        "node-0",
        "rank-row",
        "rank-row",
        "node-1",
        "rank-row rank-flagged",
        "rank-row rank-flagged rank-selected",
    ]
    rows = with_class(table, "rank-row")
    assert [getattr(r, "data-rank") for r in rows] == ["0", "1", "2", "3"]
    straggler = text_of(rows[2])
    assert "50.0 ms" in straggler and "7.0 ms" in straggler and vocab.event_kind_label("straggler") in straggler
    assert "all_reduce (DDP gradients)" in text_of(rows[0]) and "—" in text_of(rows[3])
    assert vocab.color("warning") in rows[2].style["boxShadow"]


def test_a_table_of_no_rank_says_so(vocab) -> None:
    assert "No rank has joined" in text_of(rank_table({"data": [], "hosts": {}}, [], vocab, selected=None))


def test_the_hung_rank_s_stack_ends_on_its_innermost_frame_emphasised(vocab) -> None:
    stacks = rank_stacks(RANKS, [STRAGGLER, HUNG], vocab, selected=None)
    (card,) = with_class(stacks, "rank-stack")
    assert getattr(card, "data-rank") == "3"
    assert "rank 3 (node-1) · step 300 · not in a collective" in text_of(card)
    (inner,) = with_class(card, "frame-innermost")
    assert text_of(with_class(inner, "frame-function")[0]) == "get"
    assert text_of(with_class(inner, "frame-where")[0]) == "queue.py:171"
    assert text_of(with_class(inner, "frame-code")[0]) == "self.not_empty.wait()"
    # the outer frames come first, outermost first, as a traceback reads
    frames = [text_of(f) for f in with_class(card, "frame")]
    assert len(frames) == 3 and all(f.startswith(name) for f, name in zip(frames, ["main", "next_batch", "getqueue"]))
    # the ranks that wait in the collective, grouped by where they are
    (group,) = with_class(stacks, "rank-quiet-group")
    assert getattr(group, "data-ranks") == "0,1,2"
    assert text_of(group).startswith("ranks 0–2 · in all_reduce (DDP gradients) · at train (train.py:88)")


def test_a_stopped_rank_that_sent_no_stack_of_late_shows_the_one_its_event_read(vocab) -> None:
    silent = {**RANKS, "data": [*RANKS["data"][:3], rank(3, collective=None, stack=None)]}
    (card,) = with_class(rank_stacks(silent, [HUNG], vocab, selected=3), "rank-stack")
    assert text_of(with_class(card, "frame-function")[0]) == "get"
    assert "rank-selected" in card.className


def test_no_stopped_rank_no_stacks(vocab) -> None:
    moving = {**RANKS, "data": [rank(r, stack=None) for r in range(4)]}
    assert rank_stacks(moving, [STRAGGLER], vocab, selected=None) is None


def test_the_heatmap_offers_the_rank_timings_then_the_run_s_metrics_and_opens_on_compute(vocab) -> None:
    metrics = [
        {"name": "loss", "kind": "loss"},
        {"name": "holter/dist/wait_s", "kind": "rank"},
        {"name": "holter/dist/compute_s", "kind": "rank"},
        {"name": "holter/system/cpu.percent", "kind": "system"},
    ]
    assert metric_choices(metrics, vocab) == [
        {"group": "rank timings", "items": ["holter/dist/compute_s", "holter/dist/wait_s"]},
        {"group": "the run's metrics", "items": ["loss"]},
    ]
    assert default_metric(metrics, vocab) == DEFAULT_METRIC
    assert default_metric(metrics[:2], vocab) == "holter/dist/wait_s"
    assert default_metric(metrics[:1], vocab) == "loss"


def test_a_metric_logged_every_few_steps_is_read_in_as_many_columns_as_it_has_points() -> None:
    metrics = [{"name": "holter/dist/compute_s", "count": 53}, {"name": "loss", "count": 90_000}]
    assert buckets_for("holter/dist/compute_s", metrics) == 53
    assert buckets_for("loss", metrics) == MAX_BUCKETS
    assert buckets_for("only/other/ranks", metrics) == MAX_BUCKETS


def test_the_section_reads_again_only_when_its_events_change(vocab) -> None:
    before = rank_events_signature([STRAGGLER, HUNG], vocab)
    reworded = [{**STRAGGLER, "summary": "~0.04 device-hours", "updated_at": "later", "end_step": 900}, HUNG]
    assert rank_events_signature(reworded, vocab) == before
    assert rank_events_signature([STRAGGLER, HUNG, {"id": 9, "kind": "spike", "status": "open"}], vocab) == before
    assert rank_events_signature([{**STRAGGLER, "status": "acknowledged"}, HUNG], vocab) != before
    assert rank_events_signature([STRAGGLER, {**HUNG, "details": {"ranks": [2, 3]}}], vocab) != before


def test_the_closed_section_says_how_many_ranks_and_what_stands(vocab) -> None:
    job = {"world_size": 4, "launcher": "torchrun", "joined": 4, "running": 3, "finished": 0, "crashed": 1}
    label = text_of(section_label(job, [STRAGGLER, HUNG], vocab))
    assert label.startswith("Ranks4 ranks · 3 running · 1 crashed · torchrun")
    assert vocab.event_kind_label("rank_hung") in label and vocab.event_kind_label("straggler") in label
    assert "joined" in text_of(section_label({**job, "joined": 3}, [], vocab))


def test_an_event_about_ranks_links_to_each_of_them(vocab) -> None:
    card = event_card({**HUNG, "details": {**HUNG["details"], "ranks": [3, 1]}, "metric": None}, vocab)
    links = with_class(card, "event-rank-link")
    assert [text_of(link) for link in links] == ["rank 1", "rank 3"]
    assert getattr(links[0], "data-pick-rank") == "1" and getattr(links[0], "data-pick-open") == "1"
    assert getattr(links[0], "data-pick-metric") == ""
    outlier = {"id": 5, "kind": "rank_outlier", "status": "open", "severity": "warning", "metric": "loss"}
    (link,) = with_class(event_card({**outlier, "details": {"ranks": [2]}}, vocab), "event-rank-link")
    assert getattr(link, "data-pick-metric") == "loss"  # opens the heatmap on the loss the rank left its peers' band on
    spike = {"id": 6, "kind": "spike", "status": "open", "severity": "warning", "metric": "loss", "details": {}}
    assert with_class(event_card(spike, vocab), "event-rank-link") == []
    many = {**STRAGGLER, "details": {"ranks": list(range(20))}}
    assert "and 12 more" in text_of(event_card(many, vocab))


def test_ranks_and_durations_as_a_person_reads_them() -> None:
    assert ranks_text([2]) == "rank 2"
    assert ranks_text([1, 0]) == "ranks 0 and 1"
    assert ranks_text([0, 1, 2, 3]) == "ranks 0–3"
    assert ranks_text([0, 2, 5]) == "ranks 0, 2 and 5"
    assert ranks_text(list(range(0, 40, 2))) == "20 ranks (0, 2, 4, 6, 8, 10, ... 38)"
    assert seconds_text(0.012) == "12.0 ms" and seconds_text(0.0004) == "400 µs" and seconds_text(1.25) == "1.25 s"
    assert seconds_text(None) == "—"
