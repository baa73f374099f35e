"""`koinii status`, `load`, `export` and `backup`: a store as a whole, from a shell.

Each is a library call plus printing, on the source every command shares (`core`).
`load` is the one that does a little more: it splits a file into writes of `--batch`
statements (each one `load_text(..., on_error="report")`), so a big file stays inside a
daemon's write budget and body limit, shows a progress bar, and reports every refused
statement by its line in the file. `export` and `backup` copy an SQLite store through one
read transaction, while its daemon runs on: the daemon makes the copy (`--url`,
`koinii.backups`), or this process reads the file (`--db`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import click

from koinii._version import __version__
from koinii.cli.core import echo_json, json_option, open_source, resolve_source, source_options
from koinii.errors import Refused

# (the engine and rich are imported where a command runs: `koinii --help` stays quick)

# --- status -----------------------------------------------------------------------------


@click.command("status")
@json_option
@source_options
def status_command(as_json, url, token, db) -> None:
    """Is the store up: health, seq, counts, backend, writer.

    Through a daemon: its health, version and the store's backend, seq and counts. A
    daemon that answers is its store's writer (a standby listens only once it has taken
    over); one that lost its store answers `writer-lost`, and this exits 1. With --db: the
    store opened in-process, this process its writer.
    """
    with open_source(db, url, token) as store:
        report = _status(store)
    if as_json:
        echo_json(report)
    else:
        click.echo(f"{report['source']}: {report['role']}")
        if report["ok"]:
            durability = " ".join(f"{k}={v}" for k, v in report["durability"].items())
            click.echo(f"  seq {report['seq']}, Koinii {report['version']}, {durability}")
            click.echo("  " + ", ".join(f"{n:,} {what}" for what, n in report["counts"].items()))
            if report.get("opened"):
                click.echo(f"  {_how_opened(report['opened'])}")
        else:
            click.echo(f"  {report['error']['kind']}: {report['error']['message']}")
    if not report["ok"]:
        sys.exit(1)


def _status(store: Any) -> dict[str, Any]:
    from koinii.kb import KB

    if isinstance(store, KB):
        lost = store.check_writer()
        health: dict[str, Any] = {"ok": lost is None, "version": __version__}
        health["durability"] = store.durability
        health["opened"] = store.opened
        if lost is not None:
            health["error"] = lost.to_dict()
        source, role = store.location, "in-process writer"
    else:
        health = store.health()
        source, role = store.url, health.get("role", "writer")
    report = {"source": source, "ok": bool(health.get("ok")), "role": role, **health}
    if not report["ok"]:
        report["role"] = "writer-lost"
        return report
    counts = store.stats()
    report["seq"] = counts.pop("seq")
    report["backend"] = report["durability"].get("backend")
    report["counts"] = counts
    return report


def _how_opened(opened: dict[str, Any]) -> str:
    if opened["from"] == "checkpoint":
        rows = opened["tail_sentexes"] + opened["tail_justifications"]
        how = f"opened from its checkpoint at seq {opened['seq']} + {rows:,} row(s) since"
    else:
        how = "built from its rows"
    return f"{how}, in {opened['seconds']:g} s"


# --- load -------------------------------------------------------------------------------


@click.command("load", short_help="Load the sentences of a file, reporting what was refused.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--context", "-c", required=True, help="The context to load into, e.g. CxOps.")
@click.option("--strength", type=click.Choice(["default", "monotonic"]), default="default")
@click.option(
    "--all-or-nothing",
    is_flag=True,
    help="One write: a bad statement refuses the whole file (exit 1), nothing loaded.",
)
@click.option(
    "--batch", default=500, show_default=True, type=click.IntRange(1), help="Statements per write."
)
@click.option(
    "--format",
    "text_format",
    type=click.Choice(["koinii", "kif"]),
    default="koinii",
    show_default=True,
    help="kif: SUO-KIF (=> and <=> as rules, quantifiers read or refused by name).",
)
@json_option
@source_options
def load_command(
    file, context, strength, all_or_nothing, batch, text_format, as_json, url, token, db
) -> None:
    """Load every sentence of FILE (sentences and ; comments) into a context.

    What reads and passes every check is loaded; each statement that does not is
    reported by its line and column with the refusal's kind, and the command exits 1.
    Loading is idempotent: a sentence already stored changes nothing.
    """
    from koinii.kb.store.dump import starts_a_dump

    with open(file, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(
            "parse",
            f"{file} is not UTF-8 text (byte {exc.start}): load takes sentences as text",
            {"file": file, "offset": exc.start},
        ) from None
    if starts_a_dump(text):
        raise Refused(
            "not-sentences",
            f"{file} is a Koinii export, not sentences: its sentences name sentexes by "
            "handle, which only a whole-store copy keeps; make a store of it with "
            f"`koinii migrate --from {file} --to NEW.db` (then serve that)",
            {"file": file},
        )
    with open_source(db, url, token, create=True) as store:
        if all_or_nothing:
            kif = {"format": "kif"} if text_format == "kif" else {}
            edited = store.load_text(text, context, strength=strength, **kif)
            report = {"file": file, "loaded": len(edited.handles), "seq": edited.seq}
            report["problems"] = []
        else:
            report = _load_in_batches(
                store, file, text, text_format == "kif", context, strength, batch, as_json
            )
    if as_json:
        echo_json(report)
    else:
        for problem in report["problems"]:
            click.echo(
                f"{file}:{problem['line']}:{problem['column']}: {problem['kind']}: "
                f"{problem['message']}"
            )
        refused = len(report["problems"])
        click.echo(
            f"loaded {report['loaded']:,} statement(s) into {context}"
            + (f"; refused {refused:,}" if refused else "")
            + f" (seq {report['seq']})"
        )
    if report["problems"]:
        sys.exit(1)


def _load_in_batches(
    store: Any,
    file: str,
    text: str,
    kif: bool,
    context: str,
    strength: str,
    size: int,
    quiet: bool,
) -> dict[str, Any]:
    """Read FILE's statements (KIF's mapped to sentences, `kif`), then load them `size`
    at a time; problems carry FILE's lines (a statement that does not read is reported
    as `read_sentences` found it).

    A batch past the daemon's write budget (`budget-exhausted`) was rolled back whole,
    so it is sent again in halves, and later batches stay at the smaller size; a single
    statement past the budget is reported as refused, and loading goes on.
    """
    from koinii.kb.kif import read_sentences
    from koinii.terms import show

    problems: list[dict[str, Any]] = []
    sentences = read_sentences(text, kif, problems)
    read = [(line, column, show(term)) for line, column, term in sentences]
    loaded, seq, start = 0, store.seq, 0
    with _progress(len(read), quiet) as advance:
        while start < len(read):
            chunk = read[start : start + size]
            try:
                edited = store.load_text(
                    "\n".join(s for _, _, s in chunk), context, strength=strength, on_error="report"
                )
            except Refused as refusal:
                if refusal.kind != "budget-exhausted":
                    raise
                if len(chunk) > 1:
                    size = max(1, len(chunk) // 2)
                    continue
                line, column, _ = chunk[0]
                problems.append(_problem(line, column, refusal.kind, refusal.message))
            else:
                problems += _placed_in_file(edited.problems or [], chunk)
                loaded += len(edited.handles)
                seq = max(seq, edited.seq or 0)
            start += len(chunk)
            advance(len(chunk))
    problems.sort(key=lambda p: (p["line"], p["column"]))
    return {"file": file, "loaded": loaded, "seq": seq, "problems": problems}


def _placed_in_file(
    found: list[dict[str, Any]], chunk: list[tuple[int, int, str]]
) -> list[dict[str, Any]]:
    """The problems of a chunk's text, at the lines and columns of FILE."""
    firsts, at = [], 1  # each statement's first line in the chunk's text
    for _, _, sentence in chunk:
        firsts.append(at)
        at += sentence.count("\n") + 1
    placed = []
    for problem in found:
        index = max(i for i, first in enumerate(firsts) if first <= problem["line"])
        line, column, _ = chunk[index]
        placed.append(_problem(line, column, problem["kind"], problem["message"]))
    return placed


def _problem(line: int, column: int, kind: str, message: str) -> dict[str, Any]:
    return {"line": line, "column": column, "kind": kind, "message": message}


@contextlib.contextmanager
def _progress(total: int, quiet: bool) -> Iterator[Any]:
    """`advance(n)` on a progress bar on stderr (none when stderr is not a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from koinii.cli.terminal import terminal

    console = terminal(stderr=True)
    bar = Progress(
        TextColumn("loading"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
        disable=quiet or not console.is_terminal,
    )
    task = bar.add_task("", total=total)
    with bar:
        yield lambda n: bar.update(task, advance=n)


# --- export and backup ------------------------------------------------------------------


def _through_daemon(url: str, token: str | None, target: str) -> dict[str, Any]:
    """A consistent copy of the store a daemon serves, made by the daemon and fetched to
    the new file `target` (`koinii.backups`; an operator's or an admin's token)."""
    from koinii.backups import fetch_backup
    from koinii.client.sync import connect

    with connect(url, token=token) as client:
        return fetch_backup(client, target)


@click.command("export", short_help="Dump a whole store to a portable JSON-lines file.")
@click.argument("target", type=click.Path(dir_okay=False))
@json_option
@source_options
def export_command(target, as_json, url, token, db) -> None:
    """Write the whole store to TARGET (a new *.jsonl file): every sentex with its
    provenance, the justifications, the change log and the domains' records (docs/cli.md,
    the export format). `koinii migrate --from TARGET --to NEW` makes a store of it again.
    Through a daemon (--url, an operator's token): the daemon's consistent copy of its
    SQLite store, while it runs. With --db: an SQLite store is read while its daemon runs;
    a PostgreSQL one with its daemon stopped.
    """
    import tempfile

    from rich.text import Text

    from koinii.cli.terminal import terminal
    from koinii.kb.store.dump import is_dump
    from koinii.kb.store.migrate import export, migrate
    from koinii.operations import load_domains

    load_domains()  # the domains register the record tables an export copies

    db, url = resolve_source(db, url)
    source = db or url
    with terminal(stderr=True).status(Text(f"exporting {source}")):
        if db is not None:
            counts = export(db, target)
        elif not is_dump(target):
            counts = export(url, target)  # refused: an export is *.jsonl (before any copy)
        else:
            if os.path.exists(target):
                raise Refused(
                    "target-not-empty",
                    f"{target} exists; export into a new file (or remove it first)",
                    {"target": target},
                )
            with tempfile.TemporaryDirectory(prefix="koinii-export-") as scratch:
                copy = os.path.join(scratch, "store.db")
                _through_daemon(url, token, copy)
                counts = migrate(copy, target, name=url)
    if as_json:
        return echo_json({"target": target, "bytes": os.path.getsize(target), "counts": counts})
    for what, rows in counts.items():
        click.echo(f"{what:<24} {rows:>10,}")
    click.echo(f"exported {source} to {target} ({os.path.getsize(target):,} bytes)")


@click.command("backup", short_help="A consistent copy of an SQLite store, while its daemon runs.")
@click.argument("target", type=click.Path(dir_okay=False))
@json_option
@source_options
def backup_command(target, as_json, url, token, db) -> None:
    """Copy the SQLite store to TARGET (a new file): a consistent copy as of one commit,
    while the daemon goes on writing; `koinii serve --db TARGET` opens it. Through a
    daemon (--url, an operator's or an admin's token) the daemon makes the copy and this
    fetches it; with --db, SQLite's online backup reads the file. A PostgreSQL store is
    refused with the pg_dump command to run.
    """
    from koinii.kb.store.migrate import backup

    db, url = resolve_source(db, url)
    copied = backup(db, target) if db is not None else _through_daemon(url, token, target)
    if as_json:
        return echo_json(copied)
    click.echo(f"backed up to {copied['target']} ({copied['bytes']:,} bytes, seq {copied['seq']})")


COMMANDS = (status_command, load_command, export_command, backup_command)
