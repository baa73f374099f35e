"""Copying a whole store: `migrate` (SQLite ⇄ PostgreSQL, and to or from a portable dump
file, `*.jsonl`: koinii.kb.store.dump), `export` (a dump, also of a store a daemon holds)
and `backup` (SQLite's online backup).

Invariant: the target ends up holding the same records as the source — sentexes with
their handles, justifications, the change log with its seqs, the handle high-water mark,
and every registered domain's record tables — so an engine opened on it rebuilds the same
handles, believed set and seq. A target store must be empty, a target file must not
exist yet; the source is only read, and `export` / `backup` read an SQLite store through
one read transaction, so the copy is the store as of one commit while its daemon writes on.
"""

from __future__ import annotations

import os
import pathlib
import sqlite3
import tempfile
from collections.abc import Callable
from typing import Any

from koinii.errors import Refused
from koinii.kb.store import RECORD_SCHEMAS, no_such_store, open_store
from koinii.kb.store.dump import Parts, is_dump, read_dump, write_dump

Progress = Callable[[str, int], None]  # (what, how many rows just moved)


def migrate(
    source: str, target: str, progress: Progress | None = None, *, name: str | None = None
) -> dict[str, int]:
    """Copy the store (or dump) at `source` into the empty store (or new dump) at `target`;
    returns row counts. `name`: the source as a dump's header records it."""
    report = progress or (lambda what, n: None)
    parts = read_dump(source) if is_dump(source) else _read_store(source)
    _check_registered(parts)
    if is_dump(target):
        counts = _write_new_dump(parts, target, name or source)
    else:
        counts = _write_store(parts, target)
    for what, n in counts.items():
        report(what, n)
    return counts


def export(source: str, target: str, progress: Progress | None = None) -> dict[str, int]:
    """Dump the store at `source` into the new file `target` (`*.jsonl`); returns row counts.

    An SQLite store is read from an online `backup` (its daemon may keep running); a
    PostgreSQL store is opened as `migrate` opens it, so not while a daemon holds it.
    """
    if not is_dump(target):
        raise Refused(
            "bad-option",
            f"an export is a JSON-lines file: name it *.jsonl, not {target!r}",
            {"option": "target"},
        )
    if _is_postgres(source) or is_dump(source):
        return migrate(source, target, progress)
    with tempfile.TemporaryDirectory(prefix="koinii-export-") as scratch:
        copy = os.path.join(scratch, "store.db")
        backup(source, copy)
        return migrate(copy, target, progress, name=source)


def backup(source: str, target: str) -> dict[str, Any]:
    """Copy the SQLite store at `source` to the new file `target`, consistently, while its
    daemon may keep writing: SQLite's backup API, in one step (one read transaction, which
    in WAL mode never blocks the writer), then `PRAGMA quick_check` on the copy.

    Returns `{target, bytes, seq}`. A PostgreSQL store is refused `backup-by-pg-dump`, its
    message the `pg_dump` command that backs it up.
    """
    if _is_postgres(source):
        raise Refused("backup-by-pg-dump", _pg_dump_guidance(source), {"location": source})
    if is_dump(source) or not os.path.isfile(source):
        raise no_such_store(source)
    if os.path.exists(target):
        raise Refused(
            "target-not-empty",
            f"{target} exists; back up into a new file (or remove it first)",
            {"target": target},
        )
    src = sqlite3.connect(pathlib.Path(source).resolve().as_uri() + "?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)  # pages=-1: the whole store as of one read transaction
            (verdict,) = dst.execute("PRAGMA quick_check").fetchone()
            (seq,) = dst.execute(_LAST_SEQ).fetchone()
        finally:
            dst.close()
    except sqlite3.Error as exc:
        if os.path.exists(target):
            os.unlink(target)
        raise Refused(
            "store-error", f"cannot back up {source}: {exc}", {"location": source}
        ) from exc
    finally:
        src.close()
    if verdict != "ok":
        os.unlink(target)
        raise Refused(
            "store-error", f"the copy of {source} failed its check: {verdict}", {"location": source}
        )
    return {"target": target, "bytes": os.path.getsize(target), "seq": seq}


# The seq the store was at: its log's last entry, or what compaction recorded in its meta.
_LAST_SEQ = (
    "SELECT MAX(s) FROM (SELECT COALESCE(MAX(seq), 0) AS s FROM change_log "
    "UNION ALL SELECT value FROM koinii_meta WHERE key = 'seq')"
)


def _is_postgres(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def _pg_dump_guidance(location: str) -> str:
    from urllib.parse import parse_qs, urlsplit, urlunsplit

    parts = urlsplit(location)
    options = " ".join(parse_qs(parts.query).get("options", []))
    schema = next(
        (o.split("=", 1)[1] for o in options.split() if o.startswith("-csearch_path=")), "public"
    )
    plain = urlunsplit(parts._replace(query=""))
    return (
        "a PostgreSQL store is backed up by PostgreSQL itself, consistently while the "
        f"daemon runs: pg_dump --schema={schema} -Fc -f koinii.pgdump '{plain}' (restore "
        "into an empty database with pg_restore -d URL koinii.pgdump); for a portable "
        "dump, `koinii export` with the daemon stopped (docs/scaling.md)"
    )


def _read_store(source: str) -> Parts:
    src = open_store(source, create=False)  # a typo must not "move" an empty store
    try:
        loaded = src.load()
        loaded.sentexes = list(loaded.sentexes)
        loaded.justifications = list(loaded.justifications)
        meta = {"next_handle": loaded.next_handle, "seq": loaded.seq, "log_floor": loaded.floor}
        parts = Parts(loaded, src.export_log(), meta)
        present = dict(
            src.read(lambda db: db.execute("SELECT domain, version FROM koinii_schema").fetchall())
        )
        parts.domains.update(present)
        for domain, (_, tables) in RECORD_SCHEMAS.items():
            if domain in present:
                for table in tables:
                    parts.tables[table] = src.read(lambda db, t=table: _rows(db, t))
        return parts
    finally:
        src.close()


def _check_registered(parts: Parts) -> None:
    """Every domain whose records the source holds has registered its tables in this
    process (a domain registers them when imported: `operations.load_domains()`, which
    the `koinii` command runs): else its records would be left behind without a word."""
    unknown = sorted(set(parts.domains) - set(RECORD_SCHEMAS))
    if unknown:
        raise Refused(
            "unregistered-records",
            f"the source holds records of {', '.join(unknown)}, whose tables this process "
            "has not registered: call koinii.operations.load_domains() first (the koinii "
            "command does), then migrate again",
            {"domains": unknown},
        )


def _write_store(parts: Parts, target: str) -> dict[str, int]:
    dst = open_store(target)
    try:
        if not dst.is_empty():
            raise Refused(
                "target-not-empty",
                f"{dst.location} already holds a store; migrate into an empty one",
                {"target": dst.location},
            )
        dst.import_core(parts.loaded, parts.log, parts.meta)
        counts = {
            "sentexes": len(parts.loaded.sentexes),  # type: ignore[arg-type]
            "justifications": len(parts.loaded.justifications),  # type: ignore[arg-type]
            "changes": len(parts.log),
        }
        for domain, (migrations, tables) in RECORD_SCHEMAS.items():
            if domain not in parts.domains:
                continue
            dst.ensure_schema(domain, migrations)
            for table in tables:
                columns, rows = parts.tables.get(table, ([], []))
                if rows:
                    dst.import_rows(table, columns, rows)
                counts[table] = len(rows)
        return counts
    finally:
        dst.close()


def _write_new_dump(parts: Parts, target: str, source: str) -> dict[str, int]:
    if os.path.exists(target):  # never over an earlier dump
        raise Refused(
            "target-not-empty",
            f"{target} exists; export into a new file (or remove it first)",
            {"target": target},
        )
    with open(target, "x", encoding="utf-8") as out:
        try:
            return write_dump(parts, out, source)
        except BaseException:
            out.close()
            os.unlink(target)  # a dump cut short is no dump
            raise


def _rows(db: Any, table: str) -> tuple[list[str], list[tuple]]:
    cursor = db.execute(f"SELECT * FROM {table}")
    columns = [d[0] for d in cursor.description]
    return columns, [tuple(row) for row in cursor.fetchall()]
