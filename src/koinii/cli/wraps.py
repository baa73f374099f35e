"""`koinii wraps`: read the wrap queue and permeate a coordinator's wraps (docs/wraps.md).

Each command is one library call plus printing. It runs on a store file (`--db PATH`,
opened in-process, so not while a daemon holds it) or through a daemon (`--url URL
--token T`, where the daemon applies its access rules to the token's principal).
"""

from __future__ import annotations

import contextlib
import datetime
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click

import koinii
from koinii.cli import refusing
from koinii.errors import Unavailable
from koinii.wraps import Coordinators, WrapQueue, permeate


@click.group("wraps")
def command() -> None:
    """The wrap queue: what lings filed, and what their coordinators absorbed."""


def _medium_options(run: Callable[..., Any]) -> Callable[..., Any]:
    run = click.option("--token", envvar="KOINII_TOKEN", help="Bearer token (with --url).")(run)
    run = click.option("--url", envvar="KOINII_URL", help="A daemon, e.g. http://127.0.0.1:7411")(
        run
    )
    return click.option("--db", help="A store, opened in-process: an SQLite file or a DSN.")(run)


@contextlib.contextmanager
def _source(db: str | None, url: str | None, token: str | None) -> Iterator[Any]:
    """The KB of `--db` or a client of `--url`, closed afterwards."""
    if (db is None) == (url is None):
        raise click.UsageError("give either --db PATH or --url URL")
    if db is not None:
        source = _run(lambda: koinii.open_kb(db, create=False))  # a typo is not a new store
    else:
        source = koinii.connect(url, token=token)
    try:
        yield source
    finally:
        source.close()


def _run(call: Callable[[], Any]) -> Any:
    """`refusing`, and an unreachable daemon is one line too."""
    try:
        return refusing(call)
    except Unavailable as exc:
        click.echo(f"koinii: unavailable: {exc}", err=True)
        sys.exit(1)


# --- commands ---------------------------------------------------------------------------


@command.command("list")
@click.option("--session", help="Only wraps that permeate into this coordinator session.")
@click.option("--project", help="Only this project ('global': every project).")
@click.option("--children", is_flag=True, help="With --project: its children too (p:child).")
@click.option("--all", "everything", is_flag=True, help="Processed wraps too.")
@_medium_options
def list_wraps(session, project, children, everything, db, url, token) -> None:
    """List the unprocessed wraps (all of them, of a session, or of a project)."""
    if session is not None and project is not None:
        raise click.UsageError("give --session or --project, not both")
    if children and project is None:
        raise click.UsageError("--children needs --project")
    with _source(db, url, token) as source:
        wraps = _run(
            lambda: WrapQueue(source).wraps(
                parent_session_id=session,
                project_id=project,
                include_children=children,
                include_processed=everything,
            )
        )
    _echo_wraps(wraps, with_processed=everything)


@command.command("permeate")
@click.option("--session", help="The coordinator session to permeate (preferred).")
@click.option("--project", help="Else the project to permeate ('global': every project).")
@click.option("--children/--no-children", default=True, show_default=True)
@_medium_options
def permeate_wraps(session, project, children, db, url, token) -> None:
    """Absorb a coordinator's unprocessed wraps: print them and their entries, mark them."""
    if session is None and project is None:
        raise click.UsageError("give --session (preferred) or --project")
    with _source(db, url, token) as source:
        absorbed = _run(
            lambda: permeate(
                _Seat(source), session_id=session, project_id=project, include_children=children
            )
        )
    _echo_wraps(absorbed["wraps"], with_processed=False)
    if absorbed["entries"]:
        click.echo()
        _echo_table(
            ("HANDLE", "CONTEXT", "ENTRY"),
            [(str(s.handle), s.context, s.text) for s in absorbed["entries"]],
        )
    agents = ", ".join(absorbed["agent_ids"]) or "nobody"
    click.echo(f"\npermeated {absorbed['processed']} wrap(s) from {agents}")
    if absorbed["skipped"]:
        click.echo(f"left {len(absorbed['skipped'])} wrap(s) of another coordinator in the queue")


@command.command("coordinators")
@click.option("--status", type=click.Choice(["active", "stale", "terminated"]))
@click.option("--project", help="Only this project.")
@_medium_options
def list_coordinators(status, project, db, url, token) -> None:
    """List the registered coordinators."""
    with _source(db, url, token) as source:
        found = _run(lambda: Coordinators(source).list(status=status, project_id=project))
    if not found:
        click.echo("no coordinators")
        return
    _echo_table(
        ("COORDINATOR", "PROJECT", "SESSION", "STATUS", "PID", "LAST HEARTBEAT"),
        [
            (
                c["coordinator_id"],
                c["project_id"],
                c["session_id"],
                c["status"],
                "" if c["pid"] is None else str(c["pid"]),
                _when(c["heartbeat_at"]),
            )
            for c in found
        ],
    )


# --- printing ---------------------------------------------------------------------------


class _Seat:
    """What `permeate` needs of a joined agent: its store (the daemon knows who calls)."""

    def __init__(self, store: Any) -> None:
        self.store = store


def _echo_wraps(wraps: Sequence[dict[str, Any]], *, with_processed: bool) -> None:
    if not wraps:
        click.echo("no wraps")
        return
    header = ["WRAP", "AGENT", "SESSION", "PARENT SESSION", "PROJECT", "DEPTH", "STATS", "CREATED"]
    rows = []
    for w in wraps:
        row = [
            w["wrap_id"],
            w["agent_id"] or "",
            w["session_id"] or "",
            w["parent_session_id"] or "",
            w["project_id"] or "",
            "" if w["depth"] is None else str(w["depth"]),
            " ".join(f"{k}={v}" for k, v in w["stats"].items()),
            _when(w["created_at"]),
        ]
        if with_processed:
            row.append("yes" if w["processed"] else "no")
        rows.append(row)
    if with_processed:
        header.append("PROCESSED")
    _echo_table(header, rows)


def _echo_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    for line in (header, *rows):
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())


def _when(epoch_ms: int) -> str:
    return datetime.datetime.fromtimestamp(epoch_ms / 1000).strftime("%Y-%m-%d %H:%M:%S")
