"""Twin runs share a data order; their spikes at the same step (±1) are linked."""

from __future__ import annotations

from holter_server.analysis.twins import SpikeAt, data_order_key, twin_note, twins_of


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
    a, b = {"seed": 1, "x": 1}, {"seed": 2, "x": 1}
    assert data_order_key(a) == data_order_key(b)
    assert data_order_key(a, data_seed_keys=("seed",)) != data_order_key(b, data_seed_keys=("seed",))


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
