"""A distributed job's ranks side by side: one metric as a rank × step heatmap (the straggler a
stripe, the ranks the standing events name outlined), from the API's rank matrix."""

from __future__ import annotations

import itertools

from holter_charts.ranks import SELECTED_COLOR, event_ranks, matrix_cells, rank_heatmap, rank_label, ranks_named

HOSTS = {0: "node-0", 1: "node-0", 2: "node-1", 3: "node-1"}
IDS = itertools.count(1)


def matrix(metric: str = "holter/dist/compute_s", width: int = 4) -> dict:
    """A rank matrix as `GET /runs/{id}/ranks/matrix` answers: rank 2 computes four times longer."""
    starts = list(range(0, 40, width))
    return {
        "run_id": "job",
        "metric": metric,
        "stat": "mean",
        "ranks": [0, 1, 2, 3],
        "bucket_width": width,
        "bucket_starts": starts,
        "values": [[0.05 if rank == 2 else 0.012 for _ in starts] for rank in range(4)],
    }


def event(kind: str, ranks: list[int], *, status: str = "open", severity: str = "warning", **more: object) -> dict:
    """An event as `GET /runs/{id}/events` lists it, naming `ranks`."""
    details = {"ranks": ranks}
    return {"id": next(IDS), "kind": kind, "status": status, "severity": severity, "details": details, **more}


def test_each_rank_is_a_row_named_with_its_host_rank_0_on_top(vocab) -> None:
    figure = rank_heatmap(matrix(), hosts=HOSTS, vocab=vocab)
    trace = figure["data"][0]
    assert trace["type"] == "heatmap" and trace["y"] == [0, 1, 2, 3]
    assert figure["layout"]["yaxis"]["ticktext"] == [
        "rank 0 (node-0)",
        "rank 1 (node-0)",
        "rank 2 (node-1)",
        "rank 3 (node-1)",
    ]
    assert figure["layout"]["yaxis"]["tickvals"] == [0, 1, 2, 3]
    assert figure["layout"]["yaxis"]["autorange"] == "reversed"
    # the straggler is a stripe: its row, all along, above every other rank's
    rows = trace["z"]
    assert min(rows[2]) > 3 * max(max(rows[r]) for r in (0, 1, 3))
    assert "holter/dist/compute_s by rank" in figure["layout"]["title"]["text"]
    assert "mean of 4 steps a cell" in figure["layout"]["title"]["text"]


def test_a_column_sits_in_the_middle_of_its_steps_and_a_non_finite_value_is_an_empty_cell() -> None:
    read = matrix(width=4)
    read["values"][1][2] = "NaN"
    read["values"][3][0] = None
    x, ranks, rows = matrix_cells(read)
    assert x[:3] == [1.5, 5.5, 9.5] and ranks == [0, 1, 2, 3]
    assert rows[1][2] is None and rows[3][0] is None and rows[0][0] == 0.012
    one = matrix(width=1)
    assert matrix_cells(one)[0][:3] == [0, 1, 2]  # a bucket of one step sits on its step


def test_a_rank_a_standing_event_names_is_outlined_in_its_colour_and_labelled(vocab) -> None:
    straggler = event("straggler", [2])
    figure = rank_heatmap(matrix(), hosts=HOSTS, vocab=vocab, events=[straggler])
    shapes = figure["layout"]["shapes"]
    assert len(shapes) == 1
    assert (shapes[0]["y0"], shapes[0]["y1"]) == (1.5, 2.5)
    assert shapes[0]["line"]["color"] == vocab.color("warning")
    labels = [a for a in figure["layout"]["annotations"] if a.get("y") == 2]
    assert [a["text"] for a in labels] == [vocab.event_kind_label("straggler")]


def test_a_handled_event_an_event_of_no_rank_and_another_kind_outline_nothing(vocab) -> None:
    events = [
        event("straggler", [2], status="acknowledged"),
        event("spike", [1], metric="loss"),  # not about ranks, whatever its details say
        event("rank_hung", []),
    ]
    figure = rank_heatmap(matrix(), hosts=HOSTS, vocab=vocab, events=events)
    assert figure["layout"]["shapes"] == []


def test_the_picked_rank_is_outlined_dotted(vocab) -> None:
    figure = rank_heatmap(matrix(), hosts=HOSTS, vocab=vocab, selected=3)
    (shape,) = figure["layout"]["shapes"]
    assert shape["line"]["color"] == SELECTED_COLOR and shape["line"]["dash"] == "dot"
    assert (shape["y0"], shape["y1"]) == (2.5, 3.5)
    assert rank_heatmap(matrix(), hosts=HOSTS, vocab=vocab, selected=9)["layout"]["shapes"] == []  # no such row


def test_a_matrix_with_no_points_says_so(vocab) -> None:
    empty = {
        "metric": "loss",
        "stat": "mean",
        "ranks": [0, 1],
        "bucket_width": 1,
        "bucket_starts": [],
        "values": [[], []],
    }
    figure = rank_heatmap(empty, hosts={}, vocab=vocab)
    assert any("no points" in a["text"] for a in figure["layout"]["annotations"])


def test_a_thousand_ranks_leave_their_labels_to_plotly(vocab) -> None:
    ranks = list(range(1000))
    big = {"metric": "loss", "stat": "mean", "ranks": ranks, "bucket_width": 1, "bucket_starts": [0],
           "values": [[1.0] for _ in ranks]}  # fmt: skip
    layout = rank_heatmap(big, hosts={r: f"node-{r // 8}" for r in ranks}, vocab=vocab)["layout"]
    assert "ticktext" not in layout["yaxis"] and layout["height"] <= 720


def test_the_ranks_named_by_standing_events_worst_first(vocab) -> None:
    straggler = event("straggler", [2])
    hung = event("rank_hung", [2, 3], severity="critical")
    named = ranks_named([straggler, hung, event("rank_lost", [1], status="dismissed")], vocab)
    assert sorted(named) == [2, 3]
    assert [e["kind"] for e in named[2]] == ["rank_hung", "straggler"]
    assert event_ranks({"details": {"ranks": [3, 1, 3, "x", True]}}) == [1, 3]
    assert event_ranks({"details": None}) == []


def test_a_rank_s_label() -> None:
    assert rank_label(2, "node-1") == "rank 2 (node-1)"
    assert rank_label(2, None) == rank_label(2, "") == "rank 2"


def test_the_vocabulary_says_which_kinds_and_events_are_about_ranks(vocab) -> None:
    assert vocab.is_rank_kind("rank") and not vocab.is_rank_kind("system") and not vocab.is_rank_kind("loss")
    assert not vocab.is_rank_kind("no-such-kind")
    assert all(vocab.is_rank_event(k) for k in ("straggler", "rank_hung", "rank_lost", "rank_outlier"))
    assert not vocab.is_rank_event("spike") and not vocab.is_rank_event(None)
