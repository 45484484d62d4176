"""Severities named in code (`Level`) are the table's names, and travel as plain strings."""

from __future__ import annotations

import json

from holter_server.vocabulary.severities import BY_NAME, SEVERITIES, Level, rank


def test_every_level_is_a_row_of_the_table_in_rank_order() -> None:
    assert [s.name for s in SEVERITIES] == list(Level)
    assert rank(Level.INFO) < rank(Level.WARNING) < rank(Level.CRITICAL)


def test_a_level_is_its_name_as_text() -> None:
    assert Level.CRITICAL == "critical" and BY_NAME["critical"] is BY_NAME[Level.CRITICAL]
    assert json.dumps({"severity": Level.WARNING}) == '{"severity": "warning"}'
    assert f"{Level.INFO}" == "info"
