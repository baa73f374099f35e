"""`koinii adjudicate`: the adjudication service of one channel (koinii.client.adjudicator)."""

from __future__ import annotations

import contextlib
import signal
import threading
import time

import click

from koinii.cli.core import open_source, source_options
from koinii.cli.terminal import echo


@click.command(
    "adjudicate", short_help="Settle a channel's disputes by majority vote, as a service."
)
@click.option("--channel", "-c", required=True, help="The channel whose disputes to settle.")
@click.option("--quorum", type=int, default=None, help="Count once this many members have voted.")
@click.option(
    "--deadline", type=float, default=None, help="Count once a dispute is this many seconds old."
)
@click.option(
    "--cursor",
    "cursor_path",
    default=None,
    help="A file for the durable cursor, so a restart resumes where it stopped.",
)
@click.option("--once", is_flag=True, help="Settle what is due now, then exit.")
@source_options
def command(channel, quorum, deadline, cursor_path, once, url, token, db) -> None:
    """Settle CHANNEL's disputes by majority vote as they become due: by default once
    every member has voted (or --quorum N voters, or --deadline S seconds). Rulings are
    made by AgentMajority; a tie rules nothing. Needs an operator token over the wire."""
    from koinii.channel.catchup import FileCursorStore
    from koinii.client.adjudicator import Adjudicator, Policy

    def say(line: str) -> None:
        echo(f"{time.strftime('%H:%M:%S')} {line}", err=False)

    cursor = FileCursorStore(cursor_path) if cursor_path else None
    with open_source(db, url, token) as store:
        service = Adjudicator(
            store, channel, Policy(quorum=quorum, deadline_s=deadline), cursor=cursor, say=say
        )
        if once:
            service.settle()
            return
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            service.run(stop, wait_ms=1000)
