"""Moving a whole store between backends (`koinii migrate`): SQLite ⇄ PostgreSQL.

Invariant: the target ends up holding the same records as the source — sentexes with
their handles, justifications, the change log with its seqs, the handle high-water mark,
and every registered domain's record tables — so an engine opened on it rebuilds the same
handles, believed set and seq. The target must be empty; the source is only read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from koinii.errors import Refused
from koinii.kb.store import RECORD_SCHEMAS, open_store

Progress = Callable[[str, int], None]  # (what, how many rows just moved)


def migrate(source: str, target: str, progress: Progress | None = None) -> dict[str, int]:
    """Copy the store at `source` into the empty store at `target`; returns row counts."""
    from koinii.operations import load_domains

    load_domains()  # the domains register their record tables on import
    report = progress or (lambda what, n: None)
    src = open_store(source, create=False)  # a typo must not "move" an empty store
    try:
        dst = open_store(target)
        try:
            if not dst.is_empty():
                raise Refused(
                    "target-not-empty",
                    f"{dst.location} already holds a store; migrate into an empty one",
                    {"target": dst.location},
                )
            loaded = src.load()
            loaded.sentexes = list(loaded.sentexes)
            loaded.justifications = list(loaded.justifications)
            log = src.export_log()
            meta = {"next_handle": loaded.next_handle, "seq": loaded.seq, "log_floor": loaded.floor}
            dst.import_core(loaded, log, meta)
            counts = {
                "sentexes": len(loaded.sentexes),
                "justifications": len(loaded.justifications),
                "changes": len(log),
            }
            for what, n in counts.items():
                report(what, n)
            present = {
                row[0]
                for row in src.read(
                    lambda db: db.execute("SELECT domain FROM koinii_schema").fetchall()
                )
            }
            for domain, (migrations, tables) in RECORD_SCHEMAS.items():
                if domain not in present:
                    continue
                dst.ensure_schema(domain, migrations)
                for table in tables:
                    columns, rows = src.read(lambda db, t=table: _rows(db, t))
                    if rows:
                        dst.import_rows(table, columns, rows)
                    counts[table] = len(rows)
                    report(table, len(rows))
            return counts
        finally:
            dst.close()
    finally:
        src.close()


def _rows(db: Any, table: str) -> tuple[list[str], list[tuple]]:
    cursor = db.execute(f"SELECT * FROM {table}")
    columns = [d[0] for d in cursor.description]
    return columns, [tuple(row) for row in cursor.fetchall()]
