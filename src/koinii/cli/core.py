"""`koinii assert`, `query`, `tail` and `mcp`: the knowledge base from a shell.

Each command talks to a daemon (`--url`, default $KOINII_URL or http://127.0.0.1:7411,
with `--token` / $KOINII_TOKEN) or opens a store file in-process (`--db`).
"""

from __future__ import annotations

import time
from typing import Any

import click
from rich.console import Console
from rich.table import Table

import koinii
from koinii.terms import show
from koinii.wire import decode_bindings

console = Console(highlight=False, soft_wrap=True)


def source_options(fn):
    fn = click.option("--db", default=None, help="Open this store in-process instead of a daemon.")(
        fn
    )
    fn = click.option("--token", envvar="KOINII_TOKEN", default=None, help="Bearer token.")(fn)
    fn = click.option(
        "--url",
        envvar="KOINII_URL",
        default="http://127.0.0.1:7411",
        show_default=True,
        help="The daemon.",
    )(fn)
    return fn


def open_source(db: str | None, url: str, token: str | None, *, create: bool = False) -> Any:
    """A KB (with --db) or a Client of the daemon. Only a command that writes passes
    `create`: for one that reads, a mistyped --db is refused (`no-such-store`) rather
    than answered from a new, empty store."""
    return koinii.open_kb(db, create=create) if db else koinii.connect(url, token=token)


@click.command("assert")
@click.argument("sentence")
@click.option("--context", "-c", required=True, help="The context to write, e.g. CxAtlas.")
@click.option("--strength", type=click.Choice(["default", "monotonic"]), default="default")
@click.option("--creator", default=None, help="Who says it (an agent may only name itself).")
@source_options
def assert_command(sentence, context, strength, creator, url, token, db) -> None:
    """Store SENTENCE in a context; prints its handle."""
    store = open_source(db, url, token, create=True)
    click.echo(store.assert_(sentence, context, strength=strength, creator=creator))


@click.command("query")
@click.argument("goal")
@click.option("--context", "-c", required=True, help="Read through this context's ancestors.")
@click.option("--limit", type=int, default=None)
@source_options
def query_command(goal, context, limit, url, token, db) -> None:
    """Solutions of GOAL, e.g. "(usesDatabase ?cluster ?db)", as a table."""
    solutions = open_source(db, url, token).query(goal, context, limit=limit)
    if not solutions:
        console.print("[dim]no solutions[/dim]")
        return
    table = Table(*solutions[0].keys())
    for solution in solutions:
        table.add_row(*(show(value) for value in solution.values()))
    console.print(table)


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
    import json

    from koinii.narrator import Narrator
    from koinii.tail import entries

    def outage(exc: BaseException) -> None:
        click.echo(f"koinii: the daemon is unreachable ({exc}); waiting for it", err=True)

    store = open_source(db, url, token)
    narrator = Narrator(store)
    for entry in entries(
        store, since=since, goal=goal, ctx=context, follow=follow and not db, on_outage=outage
    ):
        stamp = time.strftime("%H:%M:%S", time.localtime(entry["at"] / 1000))
        for told in narrator.entry(entry, structure=structure or raw):
            if as_json:
                click.echo(json.dumps({**told.to_dict(), "at": entry["at"]}))
                continue
            prefix = f"[dim]{stamp} seq {entry['seq']:>6}[/dim]"
            if raw:
                sign = "[green]+[/green]" if told.added else "[red]-[/red]"
                why = f" [dim]({told.reason})[/dim]" if told.reason else ""
                who = f" [bold]{told.speaker}[/bold]" if told.speaker else ""
                console.print(
                    f"{prefix} {sign} {told.sentence}  [cyan]{told.context}[/cyan]{who}{why}"
                )
            else:
                handle = f"  [dim]#{told.handle}[/dim]" if told.handle else ""
                console.print(f"{prefix} {told.text}{handle}")


@click.command("mcp")
@click.option("--agent", "agent_id", required=True, help="The agent id, e.g. AgentAtlas.")
@click.option("--channel", required=True, help="The channel context to join, e.g. CxDeploy.")
@click.option("--url", envvar="KOINII_URL", default=None, help="The daemon (else --db).")
@click.option("--token", envvar="KOINII_TOKEN", default=None, help="The agent's token.")
@click.option("--db", default=None, help="Open this store in-process instead of a daemon.")
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
    "unless --session names one).",
)
@click.option(
    "--project",
    default=None,
    help="The project its wraps are filed under [default: KOINII_PROJECT, else the git "
    "repository of the working directory, e.g. shop:services:checkout].",
)
def mcp_command(agent_id, channel, url, token, db, introspection, session, record, project) -> None:
    """Serve an MCP server over stdio: an LLM agent joins CHANNEL as AGENT."""
    from koinii.mcp_server import run

    if url is None and db is None:
        raise click.UsageError("give --url (a daemon) or --db (a store file)")
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


@click.command("demo")
@click.option(
    "--pace",
    type=float,
    default=0.6,
    show_default=True,
    help="Seconds each agent pauses before a move (0: as fast as it goes).",
)
def demo_command(pace: float) -> None:
    """Watch a team of agents work: a daemon, a coordinator, three agents and the
    adjudicator in separate processes ask, answer, dispute, vote, settle and wrap up,
    live. About 15 seconds at the default pace."""
    from koinii.demo import run_demo

    summary = run_demo(pace)
    if any(summary["exit_codes"]) or summary["ruling"] is None:
        raise click.ClickException("the demo did not finish as it should (see above)")


COMMANDS = (assert_command, query_command, tail_command, mcp_command, demo_command)
__all__ = ["COMMANDS", "decode_bindings", "open_source", "source_options"]
