"""The Holter service. It needs Python 3.11 or newer; the client (`import holter`) runs on 3.9+."""

import sys

MIN_PYTHON = (3, 11)

if sys.version_info < MIN_PYTHON:  # pragma: no cover - exercised by the 3.9 run in .ci/python39
    raise ImportError(
        f"the Holter service needs Python {'.'.join(map(str, MIN_PYTHON))} or newer; this is "
        f"{sys.version.split()[0]}. The client (`import holter`) works here: point it at a service "
        "running elsewhere (HOLTER_URL)."
    )

__version__ = "0.1.0"
