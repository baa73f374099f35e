"""`koinii wraps`: read the wrap queue and permeate a coordinator's wraps (docs/wraps.md).

Each command is one library call plus printing, on the source every command shares
(`koinii.cli.core.source_options`): a daemon (`--url`, default http://127.0.0.1:7411, where
the daemon applies its access rules to the token's principal) or a store file opened
in-process (`--db PATH`, so not while a daemon holds it).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import click

from koinii.cli.core import echo_json, json_option, open_source, source_options
from koinii.cli.terminal import echo


@click.group("wraps", short_help="The wrap queue: coordinators and their workers' wraps.")
def command() -> None:
    """The wrap queue: what worker agents filed when they ended a session (their wraps),
    and what their coordinators absorbed (docs/wraps.md)."""


# --- commands ---------------------------------------------------------------------------


@command.command("list")
@click.option("--session", help="Only wraps that permeate into this coordinator session.")
@click.option("--project", help="Only this project ('global': every project).")
@click.option("--children", is_flag=True, help="With --project: its children too (p:child).")
@click.option("--all", "everything", is_flag=True, help="Processed wraps too.")
@json_option
@source_options
def list_wraps(session, project, children, everything, as_json, db, url, token) -> None:
    """List the unprocessed wraps.

    All of them, those of a coordinator session (--session), or of a project (--project).
    """
    from koinii.wraps import WrapQueue

    if session is not None and project is not None:
        raise click.UsageError("give --session or --project, not both")
    if children and project is None:
        raise click.UsageError("--children needs --project")
    with open_source(db, url, token) as source:
        wraps = WrapQueue(source).wraps(
            parent_session_id=session,
            project_id=project,
            include_children=children,
            include_processed=everything,
        )
    if as_json:
        return echo_json(wraps)
    _echo_wraps(wraps, with_processed=everything)


@command.command("permeate")
@click.option("--session", help="The coordinator session to permeate (preferred).")
@click.option("--project", help="Else the project to permeate ('global': every project).")
@click.option("--children/--no-children", default=True, show_default=True)
@json_option
@source_options
def permeate_wraps(session, project, children, as_json, db, url, token) -> None:
    """Absorb a coordinator's unprocessed wraps.

    Prints them and their entries, and marks them processed.
    """
    from koinii.wire import encode_sentex
    from koinii.wraps import permeate

    if session is None and project is None:
        raise click.UsageError("give --session (preferred) or --project")
    with open_source(db, url, token) as source:
        absorbed = permeate(
            _Seat(source), session_id=session, project_id=project, include_children=children
        )
    if as_json:
        return echo_json({**absorbed, "entries": [encode_sentex(s) for s in absorbed["entries"]]})
    _echo_wraps(absorbed["wraps"], with_processed=False)
    if absorbed["entries"]:
        echo()
        _echo_table(
            ("HANDLE", "CONTEXT", "ENTRY"),
            [(str(s.handle), s.context, s.text) for s in absorbed["entries"]],
        )
    agents = ", ".join(absorbed["agent_ids"]) or "nobody"
    echo(f"\npermeated {absorbed['processed']} wrap(s) from {agents}")
    if absorbed["skipped"]:
        echo(f"left {len(absorbed['skipped'])} wrap(s) of another coordinator in the queue")


@command.command("coordinators")
@click.option("--status", type=click.Choice(["active", "stale", "terminated"]))
@click.option("--project", help="Only this project.")
@json_option
@source_options
def list_coordinators(status, project, as_json, db, url, token) -> None:
    """List the registered coordinators."""
    from koinii.wraps import Coordinators

    with open_source(db, url, token) as source:
        found = Coordinators(source).list(status=status, project_id=project)
    if as_json:
        return echo_json(found)
    if not found:
        echo("no coordinators")
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
        echo("no wraps")
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
        echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())


def _when(epoch_ms: int) -> str:
    return datetime.datetime.fromtimestamp(epoch_ms / 1000).strftime("%Y-%m-%d %H:%M:%S")
