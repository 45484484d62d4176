"""The vocabulary: what Holter's kinds, severities and statuses are, for every client (the
dashboard draws its panels, colours and lists from it)."""

from __future__ import annotations

from functools import cache
from typing import Any

from fastapi import APIRouter

from holter_server import vocabulary

router = APIRouter(tags=["vocabulary"])


@cache
def _served() -> dict[str, Any]:
    return vocabulary.as_dict()


@router.get(
    "/vocabulary",
    response_model=dict[str, Any],
    summary="Signal kinds (with panels and detector defaults), event kinds, severities, statuses and the framework "
    "name maps",
)
def read_vocabulary() -> dict[str, Any]:
    return _served()
