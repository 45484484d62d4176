"""Events and notes drawn on a chart."""

from __future__ import annotations

from holter_charts.marks import event_shapes, label_width, stagger
from holter_charts.series import Series, View


def test_dismissed_events_are_not_drawn_and_handled_ones_are_grey(vocab) -> None:
    base = {"metric": "loss", "kind": "spike", "severity": "critical", "start_step": 5, "end_step": 5}
    shapes, labels = event_shapes(
        [dict(base, id=1, status="dismissed"), dict(base, id=2, status="acknowledged")], [], View(), vocab
    )
    assert len(labels) == 1 and labels[0]["text"] == "spike (acknowledged)" and labels[0]["font"]["color"] == "#868e96"
    assert shapes[0]["type"] == "line"


def test_withdrawn_events_are_hidden_like_dismissed_ones(vocab) -> None:
    # the served vocabulary's hidden statuses, not a name the charts know
    base = {"metric": "loss", "kind": "spike", "severity": "critical", "start_step": 5, "end_step": 5}
    shapes, labels = event_shapes([dict(base, id=1, status="withdrawn")], [], View(), vocab)
    assert shapes == [] and labels == []
    assert vocab.is_hidden("withdrawn") and vocab.is_hidden("dismissed") and not vocab.is_hidden("muted")
    assert vocab.is_open("open") and not vocab.is_open("acknowledged") and not vocab.is_open(None)


def test_labels_on_a_wall_time_axis_are_staggered_by_their_distance_in_time() -> None:
    series = [Series(list(range(1000)), [1.0] * 1000, [1000.0 + 10 * step for step in range(1000)])]
    view = View(x_axis="time")
    near = [{"x": 1_000_000.0 + 10_000 * step} for step in (100, 101)]
    far = [{"x": 1_000_000.0 + 10_000 * step} for step in (100, 600)]
    assert [label["yshift"] for label in stagger(near, series, view)] == [0, 17]
    assert [label["yshift"] for label in stagger(far, series, view)] == [0, 0]


def test_overlapping_events_of_a_family_draw_one_span_and_one_counted_label(vocab) -> None:
    series = [Series(list(range(200)), [1.0] * 200)]
    events = [
        {
            "id": i,
            "metric": f"mismatch/{i}",
            "kind": "sawtooth",
            "severity": "warning",
            "status": "open",
            "start_step": 11 + i,
            "end_step": 150 + i,
            "summary": f"metric {i} saws",
        }
        for i in range(5)
    ]
    events.append(
        {
            "id": 9,
            "metric": "mismatch/0",
            "kind": "spike",
            "severity": "warning",
            "status": "open",
            "start_step": 180,
            "end_step": 190,
            "summary": "a spike",
        }
    )
    shapes, labels = event_shapes(events, series, View(), vocab)
    assert [(r["x0"], r["x1"]) for r in shapes if r["type"] == "rect"] == [(11, 154), (180, 190)]
    texts = sorted(label["text"] for label in labels)
    assert texts == ["sawtooth ×5", "spike"]
    counted = next(label for label in labels if label["text"] == "sawtooth ×5")
    assert counted["hovertext"].count("saws") == 4 and "1 more" in counted["hovertext"]


def test_labels_never_overlap_a_neighbour_whatever_their_colours(vocab) -> None:
    # two divergences a few steps apart, one critical and one a warning (so not merged into one
    # label): drawn side by side they read "divergenc|divergence"
    series = [Series(list(range(1000)), [1.0] * 1000)]
    events = [
        {"id": i, "metric": "loss", "kind": "divergence", "severity": sev, "status": "open", "start_step": step}
        for i, (sev, step) in enumerate([("critical", 500), ("warning", 530), ("info", 560), ("warning", 590)])
    ]
    _, labels = event_shapes(events, series, View(), vocab)
    placed = stagger(labels, series, View())
    for i, a in enumerate(placed):
        for b in placed[i + 1 :]:
            if a["yshift"] == b["yshift"]:
                assert abs(a["x"] - b["x"]) >= (label_width(a, 999) + label_width(b, 999)) / 2
    # the fourth has no free row: it is folded into a label it would cover, never drawn over it
    assert len(placed) == 3 and any(label["text"].endswith("+1") for label in placed)
    assert sum(label["hovertext"].count("<br>") for label in placed) == 1
