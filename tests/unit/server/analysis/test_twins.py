"""Twin runs share a data order, whatever else differs; their spikes at the same step (±1) are linked."""

from __future__ import annotations

from holter_server.analysis.twins import (
    SpikeAt,
    data_order,
    data_order_key,
    describe_twins,
    twin_note,
    twin_runs,
    twins_of,
)


def test_optimiser_keys_and_init_seeds_do_not_change_the_data_order() -> None:
    a = {
        "model": "m",
        "data_seed": 7,
        "seed": 1,
        "optim": {"lr": 3e-4, "betas": [0.9, 0.95]},
        "warmup_steps": 100,
        "max_grad_norm": 1,
    }
    b = {
        "model": "m",
        "data_seed": 7,
        "seed": 2,
        "optim": {"lr": 6e-4, "betas": [0.9, 0.99]},
        "warmup_steps": 500,
        "max_grad_norm": 0.5,
    }
    assert data_order_key(a) == data_order_key(b)


def test_a_data_seed_or_a_data_key_changes_the_data_order() -> None:
    base = {"model": "m", "data_seed": 7, "batch_size": 32}
    assert data_order_key(base) != data_order_key({**base, "data_seed": 8})
    assert data_order_key(base) != data_order_key({**base, "batch_size": 64})


def test_a_seed_the_project_declares_a_data_seed_must_match() -> None:
    a, b = {"seed": 1, "dataset": "tiny"}, {"seed": 2, "dataset": "tiny"}
    assert data_order_key(a) == data_order_key(b) is not None
    assert data_order_key(a, data_seed_keys=("seed",)) != data_order_key(b, data_seed_keys=("seed",))


def test_the_same_data_order_at_another_width_is_a_twin() -> None:
    base = {"data": {"path": "shakespeare", "data_seed": 3}, "batch_size": 16, "block_size": 128}
    narrow = {**base, "model": {"width": 128, "layers": 4}, "lr": 1e-3, "seed": 0}
    wide = {**base, "model": {"width": 256, "layers": 4}, "lr": 3e-4, "seed": 5}
    assert data_order_key(narrow) == data_order_key(wide)
    assert data_order(narrow) == {"data.path": "shakespeare", "data.data_seed": 3, "batch_size": 16, "block_size": 128}
    shorter = {**wide, "block_size": 64}
    assert data_order_key(shorter) != data_order_key(narrow)  # other batches, other order


def test_keys_that_do_not_change_the_order_do_not_split_twins() -> None:
    a = {"dataset": "owt", "data": {"num_workers": 2}, "batch_size": 8}
    b = {"dataset": "owt", "data": {"num_workers": 8}, "batch_size": 8, "compile": True}
    assert data_order_key(a) == data_order_key(b)


def test_twin_runs_list_what_else_differs_and_say_it() -> None:
    config = {"dataset": "tiny", "data_seed": 1, "batch_size": 32, "width": 64, "seed": 0}
    others = [
        ("b", "wide", {**config, "width": 256}),
        ("c", None, {**config, "seed": 1}),
        ("d", None, {**config, "data_seed": 2}),
        ("e", None, dict(config)),
    ]
    twins = twin_runs(config, others)
    assert [t.run_id for t in twins] == ["b", "c", "e"]
    assert [c.describe() for c in twins[0].differs] == ["width 64 → 256"]
    assert describe_twins(data_order(config), twins) == (
        "3 runs share this run's data order (batch_size, data_seed, dataset): 1 repeats its config exactly; "
        "1 differs only in seeds; 1 in width"
    )
    assert describe_twins(None, []).startswith("this run's config names no data")


def test_twins_are_spikes_of_other_runs_on_the_metric_within_one_step() -> None:
    spike = SpikeAt("a", "loss", 946)
    others = [
        SpikeAt("a", "loss", 946),
        SpikeAt("b", "loss", 945),
        SpikeAt("b", "loss", 946),
        SpikeAt("c", "loss", 948),
        SpikeAt("d", "grad_norm", 946),
    ]
    assert twins_of(spike, others) == [SpikeAt("b", "loss", 946)]
    assert twin_note(spike, [SpikeAt("b", "loss", 946), SpikeAt("c", "loss", 946), SpikeAt("e", "loss", 946)]) == (
        "this spike recurs at step 946 in 3 runs with the same data order: the batch, not the optimiser"
    )


def test_a_run_without_a_data_config_has_no_known_data_order() -> None:
    assert data_order_key({}) is None and data_order_key({"lr": 3e-4, "seed": 1}) is None
    assert data_order_key({"batch_size": 32, "model": "m"}) is None  # a batch size names no data
