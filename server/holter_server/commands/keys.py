"""`holter keys ...`: create, list and revoke API keys directly in the database (how the first
key is made, before any key exists to call the API with)."""

from __future__ import annotations

import argparse

from holter_server.services.auth import create_key
from holter_server.settings import Settings
from holter_server.store import keys as keys_store
from holter_server.store.database import make_engine, make_session_factory, session_scope, upgrade


def run(args: argparse.Namespace) -> int:
    settings = Settings(database_url=args.database_url) if args.database_url else Settings()
    url = settings.resolved_database_url()
    upgrade(url)
    engine = make_engine(url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            if args.keys_command == "create":
                row, full = create_key(session=session, name=args.name, scope=args.scope, project=args.project)
                print(f"key {row.id} ({row.scope}, {row.project or 'every project'}): {full}")
                print("this is the only time it is shown; it is stored as a hash")
            elif args.keys_command == "list":
                for row in keys_store.list_keys(session=session):
                    state = (
                        f"revoked {row.revoked_at:%Y-%m-%d}"
                        if row.revoked_at
                        else f"last used {row.last_used_at:%Y-%m-%d %H:%M}"
                        if row.last_used_at
                        else "never used"
                    )
                    print(
                        f"{row.id:>4}  hk_{row.prefix}_…  {row.scope:<6}  {row.project or '*':<20}  {row.name}  "
                        f"({state})"
                    )
            elif args.keys_command == "revoke":
                row = keys_store.get_key(session=session, key_id=args.key_id)
                if row is None:
                    print(f"no key {args.key_id}")
                    return 2
                keys_store.revoke(session=session, key=row)
                print(f"key {row.id} revoked")
    finally:
        engine.dispose()
    return 0
