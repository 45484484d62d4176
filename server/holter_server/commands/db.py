"""`holter db upgrade`: apply the schema migrations by hand (the service also does it on start);
with `--distribute`, then lay the tables out over a Citus cluster (store/distribution.py)."""

from __future__ import annotations

import argparse
import sys

from holter_server.settings import Settings
from holter_server.store.database import upgrade
from holter_server.store.distribution import NotCitus, distribute


def run(args: argparse.Namespace) -> int:
    settings = Settings(database_url=args.database_url) if args.database_url else Settings()
    url = settings.resolved_database_url()
    where = url.split("@")[-1]
    if args.db_command == "upgrade":
        if getattr(args, "shard_count", None) is not None and not getattr(args, "distribute", False):
            print("--shard-count goes with --distribute", file=sys.stderr)
            return 2
        partitions = args.partition_points if args.partition_points is not None else settings.partition_points
        if getattr(args, "distribute", False):
            if partitions:
                # Citus spreads the tables by run over its nodes itself; partitions by run inside each
                # shard would add nothing
                print(
                    "--distribute and --partition-points (HOLTER_PARTITION_POINTS) do not go together", file=sys.stderr
                )
                return 2
            try:
                changed = distribute(url, shard_count=args.shard_count, say=print)
            except NotCitus as refusal:
                print(f"holter db upgrade --distribute: {refusal}", file=sys.stderr)
                return 2
            print(f"schema is up to date and distributed at {where}" + ("" if changed else " (nothing to change)"))
            return 0
        upgrade(url, partition_points=partitions)
        split = (
            f", points hash-partitioned by run into {partitions}" if partitions and url.startswith("postgresql") else ""
        )
        print(f"schema is up to date at {where}{split}")
    return 0
