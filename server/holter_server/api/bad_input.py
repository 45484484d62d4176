"""Bad input gets a 4xx that names the problem, never a 500.

* `refuse_unstorable_text`, a dependency of every API route: text holding NUL or a lone
  surrogate (in the path, the query or a JSON body) is a 422 naming where it is. Postgres
  refuses NUL in text and no store can encode a lone surrogate, so letting it through would
  fail inside the database, after the route had started its work.
* `validation_failed`, the handler of request validation errors: FastAPI's own answer echoes
  the offending input, which fails to encode when that input is NaN, a lone surrogate or a
  msgpack object; this one names the location and the problem without echoing the value.
"""

from __future__ import annotations

import json
import math
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from holter_server.wire import UNSTORABLE, shown


async def refuse_unstorable_text(request: Request) -> None:
    """422 when a path or query parameter, or a string (or key) of a JSON body, holds NUL or a lone surrogate."""
    for name, value in request.path_params.items():
        _check(value, f"path.{name}")
    for name, value in request.query_params.multi_items():
        _check(name, "query")
        _check(value, f"query.{name}")
    route = request.scope.get("route")
    if getattr(route, "body_field", None) is None:
        return  # no body, or one the route reads itself (the points batch checks its own)
    body = await request.body()  # already read by FastAPI: this is its copy
    # JSON spells NUL and surrogates only as \u escapes (raw control characters are invalid)
    if b"\\u" not in body:
        return
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return  # FastAPI answers a body it could not decode itself
    _check_json(decoded)


def _check_json(document: Any) -> None:
    stack: list[tuple[Any, str]] = [(document, "body")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            _check(value, where)
        elif isinstance(value, dict):
            for key, item in value.items():
                _check(key, f"{where} (a key)")
                stack.append((item, f"{where}.{shown(key)}"))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{index}]") for index, item in enumerate(value))


def unstorable(text: str, where: str) -> str | None:
    """What is wrong with `text` (at `where`, e.g. `path.run_id`) when no store can hold it, else None."""
    found = UNSTORABLE.search(text)
    if found is None:
        return None
    what = "a NUL character" if found.group() == "\x00" else f"a lone surrogate ({shown(found.group())})"
    return f"{where}: the text holds {what}, which cannot be stored"


def _check(text: str, where: str) -> None:
    if (problem := unstorable(text, where)) is not None:
        raise HTTPException(status_code=422, detail=problem)


# A refusal lists this many errors and counts the rest (a body of a million bad elements must not
# be answered with a million messages).
MAX_LISTED_ERRORS = 20


async def validation_failed(request: Request, exc: RequestValidationError) -> JSONResponse:
    """The 422 for a request that failed validation: each error's type, location and message, the
    first `MAX_LISTED_ERRORS` of them, then one entry counting the rest."""
    found = exc.errors()
    errors = [
        {key: _plain(value) for key, value in error.items() if key not in ("input", "url")}
        for error in found[:MAX_LISTED_ERRORS]
    ]
    if len(found) > MAX_LISTED_ERRORS:
        more = len(found) - MAX_LISTED_ERRORS
        errors.append({"type": "more_errors", "loc": [], "msg": f"and {more:,} more errors, not listed"})
    return JSONResponse(status_code=422, content={"detail": errors})


def _plain(value: Any) -> Any:
    """`value` as JSON can always carry it: text escaped, non-finite floats named, objects as text."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {shown(str(key)): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return shown(str(value))
