"""Holter's dashboard: Dash + Plotly pages served by `holter serve` on the API's own port.

`mount(app)` adds the dashboard at `/` of the service's FastAPI app; the API stays under
`/api/v1` and its docs at `/docs`. The dashboard reads only through the HTTP API (see `api.py`).
"""

from __future__ import annotations

from holter_dashboard.app import mount

__all__ = ["mount"]
