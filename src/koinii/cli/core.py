"""The source options every command shares, and `koinii assert`, `retract`, `withdraw`,
`query`, `tail`, `mcp` and `demo`.

Invariant: there is ONE way a command finds its store. `source_options` gives every
command `--url` / `--db` / `--token` (or $KOINII_URL / $KOINII_DB / $KOINII_TOKEN), and
`open_source` turns them into a KB or a Client by one rule (docs/cli.md, "Where a command
connects"): a flag beats the environment, `--db` opens the store in-process, `--url` talks
to a daemon, and with neither a command talks to the daemon at `DEFAULT_URL` — where
`koinii serve` listens by default. Giving both is a usage error, never a silent choice.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click
from click.core import ParameterSource

from koinii.cli.terminal import echo

# The engine, the client and rich are imported where a command runs, not here: every
# command's module imports this one, and `koinii --help` should not pay for them.

DEFAULT_URL = "http://127.0.0.1:7411"


def source_options(fn):
    """Add `--url`, `--token` and `--db` (keyword arguments url, token, db) to a command."""
    fn = click.option(
        "--db",
        envvar="KOINII_DB",
        default=None,
        metavar="PATH|DSN",
        help="Open this store in-process (an SQLite file or a postgresql:// URL) instead "
        "of talking to a daemon [env: KOINII_DB].",
    )(fn)
    fn = click.option(
        "--token",
        envvar="KOINII_TOKEN",
        default=None,
        help="Bearer token for the daemon [env: KOINII_TOKEN].",
    )(fn)
    fn = click.option(
        "--url",
        envvar="KOINII_URL",
        default=None,
        help=f"The daemon [env: KOINII_URL; default: {DEFAULT_URL}].",
    )(fn)
    return fn


def resolve_source(db: str | None, url: str | None) -> tuple[str | None, str | None]:
    """(db, None) or (None, url): where the command goes, by the rule in the docstring."""
    if db and url:
        ctx = click.get_current_context(silent=True)

        def typed(name: str) -> bool:
            return ctx is not None and ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE

        if typed("db") == typed("url"):
            given = "--db and --url" if typed("db") else "KOINII_DB and KOINII_URL"
            raise click.UsageError(
                f"{given} name two stores: give one (--db opens a store in-process, "
                "--url talks to a daemon)"
            )
        return (db, None) if typed("db") else (None, url)
    return (db, None) if db else (None, url or DEFAULT_URL)


def open_source(db: str | None, url: str | None, token: str | None, *, create: bool = False) -> Any:
    """A KB (with --db) or a Client of the daemon; use it in a `with`. Only a command
    that writes passes `create`: for one that reads, a mistyped --db is refused
    (`no-such-store`) rather than answered from a new, empty store."""
    db, url = resolve_source(db, url)
    if db:  # (each imports only what its source needs: a command's start-up is most of it)
        from koinii.kb import open_kb

        return open_kb(db, create=create)
    from koinii.client.sync import connect

    return connect(url, token=token)


def json_option(fn):
    """`--json`: print the command's data as JSON (keyword argument as_json)."""
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(fn)


def runs(operation: str) -> Any:
    """Mark a command as the shell's face of `operation` (a domain operation or an engine
    verb): its arguments are the operation's required fields in their order and its options
    fields of the same names, checked against the registry (tests/test_parity.py)."""

    def mark(command: click.Command) -> click.Command:
        setattr(command, "operation", operation)  # noqa: B010 (Command declares no such field)
        return command

    return mark


def echo_json(value: Any) -> None:
    """One JSON document on stdout; terms print as their text."""
    echo(json.dumps(value, indent=2, ensure_ascii=False, default=_jsonable))


def _jsonable(value: Any) -> Any:
    from koinii.terms import show

    return sorted(value) if isinstance(value, (set, frozenset)) else show(value)


# --- writes ---------------------------------------------------------------------------


@runs("assert")
@click.command("assert")
@click.argument("sentence")
@click.option("--context", "-c", required=True, help="The context to write, e.g. CxAtlas.")
@click.option("--strength", type=click.Choice(["default", "monotonic"]), default="default")
@click.option("--creator", default=None, help="Who says it (an agent may only name itself).")
@json_option
@source_options
def assert_command(sentence, context, strength, creator, as_json, url, token, db) -> None:
    """Store SENTENCE in a context; prints its handle.

    A rule the engine splits in parts prints one handle per part.
    """
    with open_source(db, url, token, create=True) as store:
        handle = store.assert_(sentence, context, strength=strength, creator=creator)
    if as_json:
        return echo_json({"handle": handle})
    echo(" ".join(map(str, handle)) if isinstance(handle, list) else handle)


@runs("retract")
@click.command("retract")
@click.argument("handle", type=int)
@json_option
@source_options
def retract_command(handle, as_json, url, token, db) -> None:
    """Remove a sentex and what rested only on it.

    HANDLE is the sentex's number, as `assert` printed it. What a rule derived from it
    goes too; the change log keeps the history. An agent's own move is better taken
    back with `withdraw`, which also takes the replies to it.
    """
    from koinii.wire import encode_retracted

    with open_source(db, url, token) as store:
        retracted = encode_retracted(store.retract(handle))
    if as_json:
        return echo_json(retracted)
    echo(
        f"retracted #{handle}: {retracted['removed_sentexes']} sentex(es) removed, "
        f"seq {retracted['seq']}"
    )


@click.command("withdraw")
@click.argument("handle", type=int)
@click.option(
    "--agent",
    "agent_id",
    default=None,
    help="The agent whose move it is [default: the owner of the context that holds it].",
)
@json_option
@source_options
def withdraw_command(handle, agent_id, as_json, url, token, db) -> None:
    """Take back an agent's move, with the replies to it.

    HANDLE is the move (a question, an answer, a claim, a dispute, a vote…); it is taken
    back as the agent whose own context holds it (--agent names it, as a check): an
    agent may only withdraw its own moves (docs/channel.md). No channel is joined.
    """
    from koinii.channel import agent as medium
    from koinii.kb import KB
    from koinii.wire import encode_edited

    with open_source(db, url, token) as store:
        local = isinstance(store, KB)
        way = medium.local(store) if local else medium.wire(store)
        edited = encode_edited(medium.withdraw(way, handle, agent_id))
    if as_json:
        return echo_json(edited)
    echo(
        f"withdrew #{handle}: {edited['removed_sentexes']} sentex(es) removed, seq {edited['seq']}"
    )


# --- reads ----------------------------------------------------------------------------


@runs("query")
@click.command("query", short_help="Solutions of a goal, as a table (or --json).")
@click.argument("goal")
@click.option("--context", "-c", required=True, help="Read through this context's ancestors.")
@click.option("--limit", type=int, default=None, help="Stop at this many solutions.")
@json_option
@source_options
def query_command(goal, context, limit, as_json, url, token, db) -> None:
    """Solutions of GOAL read at a context, as a table: one column per variable.

    GOAL is a literal, for example "(usesDatabase ?cluster ?db)".
    """
    from rich.table import Table
    from rich.text import Text

    from koinii.cli.terminal import terminal
    from koinii.terms import show
    from koinii.wire import encode_bindings

    with open_source(db, url, token) as store:
        solutions = store.query(goal, context, limit=limit)
    if as_json:
        return echo_json([encode_bindings(solution) for solution in solutions])
    if not solutions:
        terminal().print(Text("no solutions", style="dim"))
        return
    table = Table(*solutions[0].keys())
    for solution in solutions:
        table.add_row(*(show(value) for value in solution.values()))
    terminal().print(table)


@click.command("tail")
@click.option(
    "--goal", default=None, help="Only changes matching this literal, e.g. (answers ?a ?c ?q)."
)
@click.option("--context", "-c", default=None, help="Only changes in view of this context.")
@click.option("--since", type=int, default=None, help="Start after this global seq (default: now).")
@click.option(
    "--follow/--no-follow", default=True, show_default=True, help="Keep waiting for news."
)
@click.option("--raw", is_flag=True, help="Print each change's sentence and context as stored.")
@click.option(
    "--structure", is_flag=True, help="Also show vocabulary, context edges and agents' marks."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per change.")
@source_options
def tail_command(goal, context, since, follow, raw, structure, as_json, url, token, db) -> None:
    """Follow the conversation live: who did what, as it happens. Resumable with --since;
    following, it waits out a daemon restart and goes on from the last seq it printed."""
    from rich.text import Text

    from koinii.channel.narrator import Narrator
    from koinii.cli.tail import entries
    from koinii.cli.terminal import terminal
    from koinii.kb import KB

    def outage(exc: BaseException) -> None:
        echo(f"koinii: the daemon is unreachable ({exc}); waiting for it", err=True)

    with open_source(db, url, token) as store:
        narrator = Narrator(store)
        console = terminal()
        follow = follow and not isinstance(store, KB)  # a store in-process has no news
        for entry in entries(
            store, since=since, goal=goal, ctx=context, follow=follow, on_outage=outage
        ):
            stamp = time.strftime("%H:%M:%S", time.localtime(entry["at"] / 1000))
            for told in narrator.entry(entry, structure=structure or raw):
                if as_json:
                    echo(json.dumps({**told.to_dict(), "at": entry["at"]}))
                    continue
                prefix = (f"{stamp} seq {entry['seq']:>6}", "dim")
                if raw:
                    console.print(
                        Text.assemble(
                            prefix,
                            " ",
                            ("+", "green") if told.added else ("-", "red"),
                            f" {told.sentence}  ",
                            (told.context, "cyan"),
                            *([" ", (told.speaker, "bold")] if told.speaker else []),
                            *([" ", (f"({told.reason})", "dim")] if told.reason else []),
                        )
                    )
                else:
                    handle = ("", "") if not told.handle else (f"  #{told.handle}", "dim")
                    console.print(Text.assemble(prefix, " ", told.text, handle))


@click.command("mcp", short_help="An MCP server (stdio) for one LLM agent.")
@click.option(
    "--agent",
    "agent_id",
    envvar="KOINII_AGENT",
    required=True,
    help="The agent id, e.g. AgentAtlas [env: KOINII_AGENT].",
)
@click.option(
    "--channel",
    envvar="KOINII_CHANNEL",
    required=True,
    help="The channel context to join, e.g. CxDeploy [env: KOINII_CHANNEL].",
)
@click.option("--introspection", is_flag=True, help="Offer the session tools (off by default).")
@click.option(
    "--session",
    envvar="KOINII_SESSION",
    default=None,
    help="The agent's own session: what the session tools read by default.",
)
@click.option(
    "--record",
    is_flag=True,
    help="Record every tool call into the agent's session as a turn (a new session "
    "unless --session names one; the one --session names is started if there is none).",
)
@click.option(
    "--project",
    default=None,
    help="The project its wraps are filed under [default: KOINII_PROJECT, else the git "
    "repository of the working directory, e.g. shop:services:checkout].",
)
@source_options
def mcp_command(agent_id, channel, url, token, db, introspection, session, record, project) -> None:
    """Serve an MCP server over stdio: an LLM agent joins CHANNEL as AGENT."""
    from koinii.mcp import run

    db, url = resolve_source(db, url)
    run(
        agent_id,
        channel,
        url=url,
        token=token,
        db=db,
        introspection=introspection,
        session=session,
        record=record,
        project=project,
    )


@click.command("demo", short_help="Watch a team of agents work, live.")
@click.option(
    "--pace",
    type=float,
    default=0.6,
    show_default=True,
    help="Seconds each agent pauses before a move (0: as fast as it goes).",
)
@click.option(
    "--keep",
    is_flag=True,
    help="Leave the daemon and its store running afterwards, and print the web view's "
    "address, a reader token and how to stop it.",
)
@click.option("--port", type=int, default=0, help="The daemon's port [default: a free one].")
def demo_command(pace: float, keep: bool, port: int) -> None:
    """Watch a team of agents work: a daemon, a coordinator, three agents and the
    adjudicator in separate processes ask, answer, dispute, vote, settle and wrap up,
    live. About 15 seconds at the default pace. With --keep, explore what they did
    afterwards (the web view, `koinii questions`, `koinii thread`)."""
    from koinii.cli.demo import run_demo

    summary = run_demo(pace, keep=keep, port=port)
    if any(summary["exit_codes"]) or summary["ruling"] is None:
        raise click.ClickException("the demo did not finish as it should (see above)")


COMMANDS = (
    assert_command,
    retract_command,
    withdraw_command,
    query_command,
    tail_command,
    mcp_command,
    demo_command,
)
__all__ = ["COMMANDS", "DEFAULT_URL", "echo_json", "json_option", "open_source", "source_options"]
