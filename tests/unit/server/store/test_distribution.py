"""The Citus layout names every table once, in an order Citus accepts."""

from __future__ import annotations

import pytest
from holter_server.store.distribution import BY_RUN, COORDINATOR_ONLY, REFERENCE, RUNS, NotCitus, distribute, plan
from holter_server.store.models import Base


def test_every_table_of_the_models_has_exactly_one_layout() -> None:
    named = [RUNS[0], *BY_RUN, *REFERENCE, *COORDINATOR_ONLY]
    assert len(named) == len(set(named))
    assert set(Base.metadata.tables) == set(named) - {"alembic_version"}


def test_every_run_keyed_table_is_distributed_by_a_column_it_has() -> None:
    for placement in plan():
        if placement.layout == "distributed":
            assert placement.column in Base.metadata.tables[placement.table].columns


def test_tables_come_after_the_tables_they_refer_to() -> None:
    order = [placement.table for placement in plan()]
    for placement in plan():
        for key in Base.metadata.tables[placement.table].foreign_keys:
            referred = key.column.table.name
            if referred in order:
                assert order.index(referred) < order.index(placement.table), (placement.table, referred)


def test_reference_tables_refer_to_no_run_keyed_table() -> None:
    for name in REFERENCE:
        assert {key.column.table.name for key in Base.metadata.tables[name].foreign_keys} <= set(REFERENCE)


def test_an_sqlite_database_is_refused_before_anything_is_made(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "holter.db"
    with pytest.raises(NotCitus, match="not Postgres"):
        distribute(f"sqlite:///{path}")
    assert not path.exists()
