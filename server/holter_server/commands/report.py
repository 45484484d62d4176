"""`holter report RUN`: write a run's self-contained HTML post-mortem (opens offline)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import httpx

from holter_server.commands.service import auth_headers, service_url


def run(args: argparse.Namespace) -> int:
    url = service_url(args.url)
    try:
        response = httpx.get(f"{url}/api/v1/runs/{args.run_id}/report.html", headers=auth_headers(), timeout=120)
    except httpx.HTTPError as exc:
        print(f"holter report: cannot reach the service at {url}: {exc}", file=sys.stderr)
        return 2
    if response.status_code != 200:
        detail = (
            response.json().get("detail")
            if response.headers.get("content-type", "").startswith("application/json")
            else response.text
        )
        print(f"holter report: {response.status_code}: {detail}", file=sys.stderr)
        return 2
    out = Path(args.output or f"holter-{args.run_id}.html")
    out.write_text(response.text, encoding="utf-8")
    print(f"wrote {out} ({len(response.content) / 1e6:.1f} MB); open it in any browser, no server needed")
    return 0
