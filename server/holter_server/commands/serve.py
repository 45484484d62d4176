"""`holter serve`: run the service on one port."""

from __future__ import annotations

import argparse

import uvicorn

from holter_server.app import create_app
from holter_server.services.auth import AuthMode
from holter_server.settings import Settings


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the environment, overridden by whatever the command line gave."""
    overrides = {key: getattr(args, key, None) for key in ("host", "port", "database_url")}
    return Settings(**{key: value for key, value in overrides.items() if value is not None})


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    url = settings.resolved_database_url()
    store = "SQLite at " + url.removeprefix("sqlite:///") if url.startswith("sqlite") else "Postgres"
    print(f"Holter {store}; listening on http://{settings.host}:{settings.port} (API docs at /docs)", flush=True)
    print(AuthMode(settings).describe(), flush=True)
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=args.log_level, access_log=False)
    return 0
