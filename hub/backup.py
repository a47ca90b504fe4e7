"""`wingsmith hub backup PATH`: an online, consistent copy of the hub's SQLite database.

Runs beside a serving hub (same host, same --db): the copy is taken with SQLite's backup API
(hub/store/backup.py), not a file copy. docs/operations.md says how to restore it.
Exit status: 0 done, 1 the backup failed (the message says why; nothing is left at PATH),
2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from hub.store.backup import BackupError, backup_database


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="wingsmith hub backup",
        description="Copy the hub's SQLite database while the hub serves (SQLite's online"
        " backup API). The copy gets its own store epoch, so agents take one full snapshot"
        " from a hub restored from it. See docs/operations.md.",
    )
    parser.add_argument("path", metavar="PATH", help="file to write the backup to")
    parser.add_argument(
        "--db", default="wingsmith.db", help="the hub's database file (default: %(default)s)"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace PATH if it exists (refused otherwise)"
    )
    parser.add_argument(
        "-o", "--output", choices=["text", "json"], default="text", help="report format"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    try:
        result = backup_database(args.db, args.path, overwrite=args.overwrite)
    except BackupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(
            json.dumps(
                {
                    "path": result.path,
                    "size_bytes": result.size_bytes,
                    "schema_version": result.schema_version,
                    "source_epoch": result.source_epoch,
                    "store_epoch": result.store_epoch,
                    "counts": result.counts,
                    "seconds": round(result.seconds, 3),
                },
                indent=2,
            )
        )
    else:
        counts = ", ".join(f"{n} {table}" for table, n in result.counts.items())
        print(
            f"backup written to {result.path}: {result.size_bytes:,} bytes, schema"
            f" {result.schema_version}, {counts}, in {result.seconds:.2f}s"
            f" (new store epoch {result.store_epoch})"
        )
    return 0
