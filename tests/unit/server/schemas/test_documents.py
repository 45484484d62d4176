"""How deep a stored JSON document nests (schemas/documents.py), counted without recursion."""

from __future__ import annotations

from typing import Any

from holter_server.schemas.documents import MAX_DEPTH, depth, shown


def nested(levels: int, leaf: Any = 1) -> Any:
    document = leaf
    for level in range(levels):
        document = {"a": document} if level % 2 else [document]
    return document


def test_depth_counts_dicts_and_lists_and_stops_early() -> None:
    assert depth(1) == 0 and depth({}) == 1 and depth({"a": [1, {"b": 2}]}) == 3
    assert depth(nested(100_000)) == MAX_DEPTH + 1  # no recursion, and no walk past what it needs


def test_a_document_too_deep_is_shown_as_a_note_and_one_within_as_itself() -> None:
    assert shown(nested(MAX_DEPTH), "config") == nested(MAX_DEPTH)
    assert shown(nested(MAX_DEPTH + 1), "config") == {
        "holter": f"this config is nested more than {MAX_DEPTH} levels deep and is not shown"
    }
