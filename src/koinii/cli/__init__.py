"""The `koinii` command: a thin shell over the library (one call per command, plus printing).

Each subsystem's commands live in their own module here (`koinii.cli.<name>`, exposing a
click `command`) and are listed in `COMMAND_MODULES`.
"""

from __future__ import annotations

import importlib
import sys

import click

from koinii._version import __version__
from koinii.cli.terminal import echo
from koinii.errors import Refused, Unavailable, exit_code_of

UNREACHABLE_HINT = "start it with `koinii serve`, or give --db FILE to open a store in-process"


class _Koinii(click.Group):
    """The command group: a refusal or a failure ends the command with one readable line.

    Exit codes: 0 done; 1 refused (the line names the refusal's kind; the code is the
    kind's in the catalogue, `koinii.errors.KINDS`); 2 bad usage, or a daemon refusing to
    bind a non-loopback address without tokens; 3 the daemon cannot be reached (the
    catalogue's `unavailable`); 4 an unexpected error (the traceback with --debug).

    `--debug` is taken anywhere on the line (`koinii query … --debug`), before a `--`.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        end = args.index("--") if "--" in args else len(args)
        if "--debug" in args[:end]:
            args = ["--debug", *(a for a in args[:end] if a != "--debug"), *args[end:]]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except Refused as refusal:
            echo(f"koinii: {refusal.kind}: {refusal.message}", err=True)
            sys.exit(exit_code_of(refusal.kind))
        except Unavailable as unavailable:
            echo(f"koinii: unavailable: {unavailable} ({UNREACHABLE_HINT})", err=True)
            sys.exit(exit_code_of("unavailable"))
        except (click.exceptions.Exit, click.ClickException, KeyboardInterrupt, SystemExit):
            raise
        except Exception as error:
            if ctx.params.get("debug"):
                raise
            echo(f"koinii: error: {error} (run with --debug for the traceback)", err=True)
            sys.exit(4)


@click.group(cls=_Koinii)
@click.version_option(__version__, prog_name="koinii")
@click.option("--debug", is_flag=True, help="Show tracebacks of unexpected errors.")
def main(debug: bool) -> None:
    """Koinii: a shared knowledge base for teams of AI agents.

    Exit codes: 0 done, 1 refused, 2 bad usage, 3 daemon unreachable, 4 unexpected error.
    """


@main.command()
@click.option("--db", default="koinii.db", show_default=True, help="SQLite file (or DSN).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port",
    default=7411,
    show_default=True,
    type=int,
    help="Port to listen on; 0 takes a free one (the start-up line says which).",
)
@click.option(
    "--port-file",
    default=None,
    metavar="PATH",
    help="Once it answers, write the port it listens on to PATH (for --port 0).",
)
@click.option("--tokens", default=None, help="Token table file (required off loopback).")
@click.option("--ring-size", default=256, show_default=True, help="Events kept per subscription.")
@click.option(
    "--reap-after",
    default=300.0,
    show_default=True,
    help="Seconds before an unpolled subscription is dropped.",
)
@click.option("--max-subscriptions", default=1024, show_default=True)
@click.option(
    "--max-subscriptions-per-principal",
    default=64,
    show_default=True,
    help="Of those, how many one token may hold.",
)
@click.option(
    "--max-body", default=16 * 1024 * 1024, show_default=True, help="Largest request body, bytes."
)
@click.option(
    "--query-budget",
    default=0.5,
    show_default=True,
    help="Seconds a read (query, …) may run: a slice of the event loop, the rest on a "
    "snapshot off it. A request's budget_ms may lower it, or an operator's raise it.",
)
@click.option(
    "--write-budget",
    default=0.03,
    show_default=True,
    help="Seconds a write (rules included) may hold the event loop, which every other "
    "client waits on. A request's budget_ms may lower it, or an operator's raise it.",
)
@click.option(
    "--header-timeout",
    default=10.0,
    show_default=True,
    help="Seconds a client has to send a request's headers.",
)
@click.option(
    "--body-timeout",
    default=60.0,
    show_default=True,
    help="Seconds a client has to send a request's body, after its headers.",
)
@click.option(
    "--max-connections",
    default=None,
    type=int,
    help="Connections kept at once (default: the descriptor limit less 64).",
)
@click.option(
    "--log-retention", default=None, type=int, help="Change-log entries to keep (default: all)."
)
@click.option(
    "--standby",
    is_flag=True,
    help="PostgreSQL: wait for the current writer to stop, then take over.",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer to this Host name (repeatable); loopback and --host always.",
)
@click.option(
    "--synchronous",
    type=click.Choice(["normal", "full"]),
    default="normal",
    show_default=True,
    help="full: every acknowledged write survives power loss (an fsync per commit); "
    "normal: survives the daemon's death (docs/daemon.md, durability).",
)
@click.option("--log-level", default="warning", show_default=True)
@click.option(
    "--access-log",
    is_flag=True,
    help="Log every request (method, path, status, client) to stderr.",
)
def serve(
    db,
    host,
    port,
    port_file,
    tokens,
    ring_size,
    reap_after,
    max_subscriptions,
    max_subscriptions_per_principal,
    max_body,
    query_budget,
    write_budget,
    header_timeout,
    body_timeout,
    max_connections,
    log_retention,
    standby,
    allow_hosts,
    synchronous,
    log_level,
    access_log,
) -> None:
    """Run the daemon: the single writer of one store, over HTTP.

    It says on stderr where it listens, its store, writer or standby, and its token
    table. SIGHUP reads the token table again; SIGTERM or SIGINT stops it cleanly.
    Exit codes: 0 stopped, 1 refused (the store, the token table, a port it cannot
    have: cannot-listen, or a port file it cannot write: cannot-write-port-file), 2 a
    non-loopback address without a token table."""
    from koinii.server import Limits
    from koinii.server import serve as run
    from koinii.web import routes as web_view

    limits = Limits(
        body_bytes=max_body,
        query_budget_s=query_budget,
        write_budget_s=write_budget,
        max_subscriptions=max_subscriptions,
        subscriptions_per_principal=max_subscriptions_per_principal,
        ring=ring_size,
        idle_s=reap_after,
        log_retention=log_retention,
        header_s=header_timeout,
        body_s=body_timeout,
        max_connections=max_connections,
    )
    sys.exit(
        run(
            db=db,
            host=host,
            port=port,
            tokens=tokens,
            limits=limits,
            log_level=log_level,
            standby=standby,
            allow_hosts=allow_hosts,
            synchronous=synchronous,
            access_log=access_log,
            port_file=port_file,
            pages=web_view,
        )
    )


@main.command(short_help="Move a whole store between SQLite, PostgreSQL and an export.")
@click.option("--from", "source", required=True, help="The store to copy (path or DSN).")
@click.option(
    "--to", "target", required=True, help="An empty store to fill (path or DSN), or a new *.jsonl."
)
@click.option("--json", "as_json", is_flag=True, help="Print the row counts as JSON.")
def migrate(source: str, target: str, as_json: bool) -> None:
    """Move a whole store between SQLite and PostgreSQL, handles and seqs kept; a
    *.jsonl path is an export (`koinii export`): migrate from one to make a store of it."""
    from rich.text import Text

    from koinii.cli.terminal import terminal
    from koinii.kb.store.migrate import migrate as move
    from koinii.operations import load_domains

    load_domains()  # the domains register the record tables a move copies
    with terminal(stderr=True).status(Text(f"moving {source} to {target}")):
        counts = refusing(lambda: move(source, target))
    if as_json:
        from koinii.cli.core import echo_json

        return echo_json(counts)
    for what, rows in counts.items():
        echo(f"{what:<24} {rows:>10,}")


@main.group()
def token() -> None:
    """Manage the daemon's token table."""


@token.command("add", short_help="Mint a token for a principal (printed once).")
@click.argument("principal")
@click.option(
    "--role",
    type=click.Choice(["agent", "arbiter", "admin", "operator", "reader"]),
    default="agent",
    show_default=True,
)
@click.option("--tokens", "path", required=True, help="Token table file.")
def token_add(principal: str, role: str, path: str) -> None:
    """Mint a token for PRINCIPAL; it is printed once and only its hash is stored.

    Refused: a reserved or system name (koinii/reserved-name), a second id for one
    context (koinii/context-taken). Warned of on stderr: an id that looks like one in
    the table (case, 0/O, 1/l/I, rn/m)."""
    from koinii.server.tokens import add_token, lookalikes_of

    alike = refusing(lambda: lookalikes_of(path, principal))
    echo(refusing(lambda: add_token(path, principal, role)))
    for other in alike:
        echo(
            f"koinii: warning: {principal} looks like {other}, already in the table (case, "
            "0/O, 1/l/I, rn/m): a reader of a thread may take one for the other. If that "
            f"was not meant: koinii token revoke {principal} --tokens {path}",
            err=True,
        )


@token.command("list")
@click.option("--tokens", "path", required=True, help="Token table file.")
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON.")
def token_list(path: str, as_json: bool) -> None:
    """List the principals in the table (never the tokens)."""
    from koinii.cli.core import echo_json
    from koinii.server.tokens import list_tokens

    entries = refusing(lambda: list_tokens(path))
    if as_json:
        return echo_json(entries)
    for entry in entries:
        echo(f"{entry['id']:<24} {entry['role']:<9} {entry['fingerprint']}")


@token.command("revoke")
@click.argument("principal")
@click.option("--tokens", "path", required=True, help="Token table file.")
def token_revoke(principal: str, path: str) -> None:
    """Remove every token of PRINCIPAL."""
    from koinii.server.tokens import revoke

    removed = refusing(lambda: revoke(path, principal))
    echo(f"revoked {removed} token(s) of {principal}")


def refusing(call):
    """Run `call`; a refusal becomes one readable line on stderr and its kind's exit code."""
    try:
        return call()
    except Refused as refusal:
        echo(f"koinii: {refusal.kind}: {refusal.message}", err=True)
        sys.exit(exit_code_of(refusal.kind))


for _command in importlib.import_module("koinii.cli.core").COMMANDS:
    main.add_command(_command)

# Subsystem command groups: koinii.cli.<name>.command is added to `koinii`.
COMMAND_MODULES: tuple[str, ...] = ("adjudicate", "wraps", "sessions")

for _name in COMMAND_MODULES:
    main.add_command(importlib.import_module(f"koinii.cli.{_name}").command)

# Commands about a store as a whole, about belief, finding by words, and the moves from a
# shell: each module's COMMANDS are added.
for _name in ("store", "reads", "search", "hooks", "moves"):
    for _command in importlib.import_module(f"koinii.cli.{_name}").COMMANDS:
        main.add_command(_command)
