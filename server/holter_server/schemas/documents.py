"""The JSON documents a client stores with a run (its config, summary, pre-flight details): how
deep they may nest, checked before they are stored, and how a document stored deeper before the
check existed is shown so that it never breaks a read.

A document nested a few hundred levels deep is about 1.5 KB, within every size limit, yet past
what the JSON encoder of the answers will write (pydantic-core stops at 255 levels): stored, it
turned every list of runs naming it into a 500 (issue 47). Real configs nest a handful of levels;
64 leaves room for any a framework writes.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 64


def depth(document: Any, *, stop_after: int = MAX_DEPTH) -> int:
    """How many levels of dicts and lists `document` nests (a scalar: 0), counted without
    recursion, and no further than `stop_after` + 1 (enough to know it is too deep)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(document, 0)]
    while stack:
        node, level = stack.pop()
        if not isinstance(node, dict | list):
            continue
        level += 1
        deepest = max(deepest, level)
        if deepest > stop_after:
            return deepest
        stack.extend((child, level) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def within_depth(what: str) -> Any:
    """A pydantic validator refusing a document nested deeper than `MAX_DEPTH` (a 422 naming `what`)."""

    def check(document: Any) -> Any:
        if depth(document) > MAX_DEPTH:
            raise ValueError(f"{what} is nested more than {MAX_DEPTH} levels deep; at most {MAX_DEPTH} are stored")
        return document

    return check


def shown(document: Any, what: str) -> Any:
    """`document` as an answer shows it: itself, or when stored nested too deep (before the limit),
    a note saying so in its place."""
    if depth(document) <= MAX_DEPTH:
        return document
    return {"holter": f"this {what} is nested more than {MAX_DEPTH} levels deep and is not shown"}
