"""`koinii sessions`: list, search, show and import recorded agent sessions (docs/sessions.md).

Each command is one library call plus printing, on the source every command shares
(`koinii.cli.core.source_options`): a daemon (`--url URL --token T`, default
http://127.0.0.1:7411) or a store opened in-process (`--db PATH`; not while a daemon
holds it). Ids print shortened to 8 characters: any unambiguous prefix
names a session.

`koinii sessions agent list|get|read` is the agent-facing surface: JSON, exactly what
the library's reads return, and offered only while introspection is on
(`KOINII_INTROSPECTION=1`); while it is off they refuse with `introspection-off`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from koinii.cli import UNREACHABLE_HINT, refusing
from koinii.cli.core import open_source, source_options
from koinii.cli.lazy import LazyChoice
from koinii.cli.terminal import echo
from koinii.errors import Refused, Unavailable, exit_code_of

if TYPE_CHECKING:
    from koinii.sessions import Introspection

# (the sessions domain, the engine and rich are imported where a command runs, so
# `koinii --help` does not load them)

BANDS = ("title", "request", "reply", "thinking", "tool")


@click.group("sessions")
def command() -> None:
    """Recorded agent sessions: list, search, show, import."""


_medium_options = source_options  # the one set every command shares


@contextlib.contextmanager
def _store(db: str | None, url: str | None, token: str | None, *, create: bool = False):
    """A SessionStore on the command's source (`koinii.cli.core.open_source`). A daemon
    is asked one cheap read first: the introspection reads never raise (they log and
    answer empty), so an unreachable daemon or a bad token would print "no sessions"
    and exit 0 instead of 3 or 1."""
    from koinii.kb import KB
    from koinii.sessions import SessionStore

    with open_source(db, url, token, create=create) as source:
        if not isinstance(source, KB):
            source.stats()
        yield SessionStore(source)


def _run(call: Callable[[], Any]) -> Any:
    """`refusing`, and an unreachable daemon is one line too (exit 3, as everywhere)."""
    try:
        return refusing(call)
    except Unavailable as exc:
        echo(f"koinii: unavailable: {exc} ({UNREACHABLE_HINT})", err=True)
        sys.exit(exit_code_of("unavailable"))


def _when(iso: str | None) -> str:
    return iso[:16].replace("T", " ") if iso else ""


def _short(session_id: str) -> str:
    return session_id[:8]


def _echo_json(value: Any) -> None:
    echo(json.dumps(value, indent=2, ensure_ascii=False))


# --- reading ----------------------------------------------------------------------------


@command.command("list")
@click.option("--limit", default=20, show_default=True, help="Newest sessions to show (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@_medium_options
def list_sessions(limit, as_json, db, url, token) -> None:
    """The sessions, newest first."""
    from rich.table import Table

    from koinii.cli.terminal import one_line, terminal
    from koinii.sessions import Introspection

    with _store(db, url, token) as store:
        rows = Introspection(store).list_sessions(limit=limit or None)
    if as_json:
        return _echo_json(rows)
    if not rows:
        echo("no sessions")
        return
    table = Table("ID", "MODIFIED", "CHANNEL", "TURNS", "TITLE", box=None, pad_edge=False)
    for row in rows:
        table.add_row(
            _short(row["id"]),
            _when(row["modified_at"]),
            one_line(row["channel"]),
            str(row["turn_count"]),
            one_line(row["title"] or ""),
        )
    terminal().print(table)


@command.command("search", short_help="THE ranked search over every session.")
@click.argument("query")
@click.option("--limit", default=20, show_default=True, help="Rows to show (0: all).")
@click.option(
    "--ranking",
    type=LazyChoice("koinii.sessions.search", "RANKINGS"),
    default=None,
    help="banded: the bands, then the sessions holding some of the words, then what is "
    "found by meaning alone (koinii[semantic]); relevance: as banded, the best match "
    "first in each band; lexical: the seed's bands only; hybrid: fused with meaning, in "
    "the fused order [default: banded].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@_medium_options
def search_sessions(query, limit, ranking, as_json, db, url, token) -> None:
    """THE ranked search: title, then request, reply, thinking, tool matches, then the
    sessions holding some of the words, then (with koinii[semantic]) what is found by
    meaning alone; newest first in each (`--ranking hybrid`: fused with the sessions
    closest in meaning, in the fused order)."""
    from rich.table import Table

    from koinii.cli.terminal import one_line, terminal
    from koinii.sessions import Introspection

    with _store(db, url, token) as store:
        reader = Introspection(store)
        rows = reader.list_sessions(query, limit=limit or None, ranking=ranking)
    if as_json:
        return _echo_json(rows)
    if not rows:
        echo(f"no session matches {query!r}")
        return
    table = Table("ID", "MATCH", "MODIFIED", "TURNS", "TITLE / SNIPPET", box=None, pad_edge=False)
    for row in rows:
        found = [band for band in BANDS if row[f"is_in_{band}"]]
        found += ["meaning"] if row["is_by_meaning"] else []
        snippet = row["request_snippet"] or row["reply_snippet"] or row["tool_snippet"] or ""
        snippet = " ".join(snippet.split())
        text = one_line(row["title"] or "")
        if snippet:
            text = f"{text}\n  {snippet}" if text else snippet
        table.add_row(
            _short(row["id"]),
            ",".join(found),
            _when(row["modified_at"]),
            str(row["turn_count"]),
            text,
        )
    terminal().print(table)


@command.command("show", short_help="One session: its turns, usage and failures.")
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print read_session as JSON.")
@_medium_options
def show_session(target, as_json, db, url, token) -> None:
    """One session: its turns, usage and failures (TARGET: an id or an id prefix)."""
    from rich.table import Table
    from rich.text import Text

    from koinii.cli.terminal import terminal
    from koinii.sessions import Introspection

    with _store(db, url, token) as store:
        found = Introspection(store).read_session(target)
    if found["session"] is None:
        echo(f"koinii: no session matches {target!r} (unknown, or an ambiguous prefix)")
        sys.exit(1)
    if as_json:
        return _echo_json(found)
    session, usage = found["session"], found["usage"] or {}
    console = terminal()
    console.print(Text(session["title"] or "(untitled)", style="bold"))
    model = "/".join(x for x in (session.get("provider"), session.get("model")) if x)
    console.print(
        f"{session['id']}  {session['channel']}  {model}  "
        f"{_when(session['created_at'])} → {_when(session['modified_at'])}"
    )
    if session.get("project_id"):
        console.print(f"project: {session['project_id']}")
    if session.get("parent_session_id"):
        console.print(f"child of: {_short(session['parent_session_id'])}")
    for child in found["children"]:
        agent = f" (agent {child['agent_id']})" if child.get("agent_id") else ""
        console.print(f"child: {_short(child['id'])}{agent}  {child['title'] or ''}")
    for state in found["session_forks"][:-1]:  # the earlier states (the last is current)
        after = "" if state["fork_position"] is None else f" after turn {state['fork_position']}"
        console.print(
            f"fork: version {state['version']}{after}, {len(state['turns'])} turn(s) of its own"
        )
    turns = Table("#", "OUTCOME", "ITER", "REQUEST", "ANSWER", box=None, pad_edge=False)
    for turn in session["turns"]:
        turns.add_row(
            str(turn["position"]),
            turn["outcome"] or "running",
            str(turn["iteration_count"]),
            _cut(turn["user_request"]),
            _cut(turn["answer"] or ""),
        )
    console.print(turns)
    tokens = usage.get("tokens") or {}
    if tokens:
        console.print(
            "tokens: "
            + "  ".join(f"{k}={v:,}" for k, v in tokens.items())
            + (f"  cost=${usage['cost_usd']:.4f}" if usage.get("cost_usd") is not None else "")
        )
    tools = usage.get("tools") or {}
    if tools:
        console.print(
            "tools: "
            + "  ".join(
                f"{name}={c['calls']}" + (f"({c['errors']} failed)" if c["errors"] else "")
                for name, c in tools.items()
            )
        )
    diagnosis = found["diagnosis"] or {}
    if diagnosis.get("failure_count"):
        kinds = ", ".join(f"{k}={v}" for k, v in diagnosis["by_classification"].items())
        loop = "  REPETITION LOOP" if diagnosis["repetition_loop"] else ""
        console.print(f"failures: {diagnosis['failure_count']} ({kinds}){loop}")


def _cut(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


# --- importing --------------------------------------------------------------------------


@command.command("import", short_help="Import Claude Code and Codex CLI transcripts.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--quiet", is_flag=True, help="No progress bar and no table, only the totals.")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON (no bar).")
@_medium_options
def import_sessions(paths, quiet, as_json, db, url, token) -> None:
    """Import Claude Code and Codex CLI transcripts (.jsonl files, or folders of them).

    Idempotent: an unchanged transcript imports nothing the second time. Malformed lines
    are counted and reported; the rest of the file is imported.
    """
    from rich.table import Table

    from koinii.cli.terminal import terminal
    from koinii.sessions.importing import import_paths

    quiet = quiet or as_json
    with _store(db, url, token, create=True) as store, _progress(quiet) as (start, advance):
        reports = _run(lambda: import_paths(store, paths, on_start=start, on_file=advance))
    if as_json:
        _echo_json(reports)
        if any(report["status"] == "failed" for report in reports):
            sys.exit(1)
        return
    if not quiet and reports:
        table = Table(
            "FILE", "STATUS", "TURNS", "MALFORMED", "ID", "TITLE", box=None, pad_edge=False
        )
        for report, name in _with_children(reports):
            table.add_row(
                name,
                report["status"],
                "" if report.get("turns") is None else str(report["turns"]),
                _malformed(report),
                _short(report["session_id"]) if report.get("session_id") else "",
                report.get("title") or report.get("message") or "",
            )
        terminal().print(table)
    counts: dict[str, int] = {}
    for report in reports:
        counts[report["status"]] = counts.get(report["status"], 0) + 1
    lines = sum(report.get("malformed", 0) for report in reports)
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    echo(f"{len(reports)} file(s): {summary or 'none'}; {lines} malformed line(s) skipped")
    if counts.get("failed"):
        sys.exit(1)


def _with_children(reports: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], str]]:
    """Each report with the name it is shown by; a file's sub-agents under it."""
    for report in reports:
        yield report, os.path.basename(report["path"])
        for child in report.get("children", ()):
            yield child, f"  └ agent {child.get('agent_id')}"


def _malformed(report: dict[str, Any]) -> str:
    if not report.get("malformed"):
        return ""
    lines = ",".join(str(n) for n in report.get("malformed_lines", []))
    more = "…" if report["malformed"] > len(report.get("malformed_lines", [])) else ""
    return f"{report['malformed']} (line {lines}{more})"


@contextlib.contextmanager
def _progress(quiet: bool) -> Iterator[tuple[Callable[[int], None], Callable[[dict], None]]]:
    """(on_start, on_file) callbacks that drive a progress bar across files."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from koinii.cli.terminal import terminal

    if quiet:
        yield (lambda total: None), (lambda report: None)
        return
    bar = Progress(
        TextColumn("importing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}", markup=False),  # a file's name, as it is
        console=terminal(stderr=True),
        transient=True,
    )
    task = bar.add_task("", total=None)
    with bar:
        yield (
            lambda total: bar.update(task, total=total),
            lambda report: bar.update(
                task, advance=1, description=os.path.basename(report["path"])
            ),
        )


# --- the agent-facing surface (gated) ------------------------------------------------------


@command.group("agent", short_help="The reads an agent uses (JSON; while introspection is on).")
def agent() -> None:
    """The reads an agent uses (JSON); offered only while KOINII_INTROSPECTION is on."""


@contextlib.contextmanager
def _gated(db, url, token, session) -> Iterator[Introspection]:
    """A reader for the agent, or a refusal while introspection is off."""
    from koinii.sessions import Introspection

    with _store(db, url, token) as store:
        reader = Introspection(store, current_session_id=session)
        if not reader.agent_tools():
            refusing(_introspection_off)
        yield reader


def _introspection_off() -> None:
    raise Refused(
        "introspection-off",
        "session introspection is off for agents; set KOINII_INTROSPECTION=1 to offer it",
        {"toggle": "KOINII_INTROSPECTION"},
    )


def _agent_options(run: Callable[..., Any]) -> Callable[..., Any]:
    run = click.option("--session", help="The agent's own session id (the default target).")(run)
    return _medium_options(run)


@agent.command("list")
@click.argument("search", required=False)
@_agent_options
def agent_list(search, session, db, url, token) -> None:
    """list_sessions(search): the index, or THE ranked search."""
    with _gated(db, url, token, session) as reader:
        _echo_json(reader.agent_tools()["list_sessions"](search))


@agent.command("get")
@click.argument("target", required=False)
@_agent_options
def agent_get(target, session, db, url, token) -> None:
    """get_session(target): one descriptor, or null."""
    with _gated(db, url, token, session) as reader:
        _echo_json(reader.agent_tools()["get_session"](target))


@agent.command("read")
@click.argument("target", required=False)
@_agent_options
def agent_read(target, session, db, url, token) -> None:
    """read_session(target): everything about one session."""
    with _gated(db, url, token, session) as reader:
        _echo_json(reader.agent_tools()["read_session"](target))
