"""`holter db upgrade`: apply the schema migrations by hand (the service also does it on start)."""

from __future__ import annotations

import argparse

from holter_server.settings import Settings
from holter_server.store.database import upgrade


def run(args: argparse.Namespace) -> int:
    settings = Settings(database_url=args.database_url) if args.database_url else Settings()
    url = settings.resolved_database_url()
    if args.db_command == "upgrade":
        upgrade(url)
        print(f"schema is up to date at {url.split('@')[-1]}")
    return 0
