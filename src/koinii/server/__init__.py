"""The daemon: one process that owns one store and is its single writer.

`serve()` opens the store (refusing a second writer), loads the token table, refuses to
bind a non-loopback address without one, and runs the ASGI app (`app.build_app`) under
uvicorn until SIGTERM/SIGINT: then it stops accepting, answers every parked wait at once
(a normal reply), lets in-flight requests finish, and closes the store — releasing the
writer lock — before the process exits. Its connections are uvicorn's httptools
protocol under the connection guards (guards.guarded_protocol).
"""

from __future__ import annotations

import gc
import ipaddress
import logging
import os
import signal
import sys
from collections.abc import Iterable

from koinii.errors import Refused
from koinii.kb import open_kb
from koinii.server.app import Limits, build_app
from koinii.server.guards import Hosts, connection_cap, guarded_protocol
from koinii.server.tokens import TokenTable

__all__ = ["Limits", "build_app", "serve", "is_loopback"]

log = logging.getLogger("koinii.server")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    db: str = "koinii.db",
    host: str = "127.0.0.1",
    port: int = 7411,
    tokens: str | None = None,
    limits: Limits | None = None,
    log_level: str = "warning",
    standby: bool = False,
    allow_hosts: Iterable[str] = (),
    synchronous: str = "normal",
) -> int:
    """Run the daemon in the foreground; returns the process exit code. It answers to
    the loopback names, `host`, and `allow_hosts` (guards.Hosts)."""
    import uvicorn

    if tokens is None and not is_loopback(host):
        print(
            f"koinii serve: refusing to bind {host} without a token table: anyone who can "
            "reach it could write. Add tokens (koinii token add …) and pass --tokens FILE.",
            file=sys.stderr,
        )
        return 2
    try:
        if tokens is not None and not os.path.isfile(tokens):
            # a daemon on a table that is not there would refuse every caller, silently
            raise Refused(
                "no-token-table",
                f"there is no token table at {tokens}: check the path, or create one with "
                f"koinii token add AgentAtlas --role agent --tokens {tokens}",
                {"path": tokens},
            )
        table = TokenTable(tokens) if tokens is not None else None
        if standby:
            log.warning("standby: waiting to become the writer of %s", db)
        kb = open_kb(db, standby=standby, synchronous=synchronous)
    except Refused as refusal:
        print(f"koinii serve: {refusal.kind}: {refusal.message}", file=sys.stderr)
        return 1
    limits = limits or Limits()
    app = build_app(kb, table, limits, Hosts(host, allow_hosts))
    daemon = app.state.daemon
    # The daemon holds its whole KB in memory, a heap that mostly grows. With the
    # collector's default thresholds every few thousand writes brought a full collection
    # that rescans all of it: a tenth of a write's CPU under load (benchmarks/wire.py).
    # Young objects are still collected often; the old generation, seldom.
    gc.set_threshold(2_000, 10, 100)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:  # answer parked waits: a prompt stop
            daemon.begin_stopping()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        loop="uvloop",
        http=guarded_protocol(connection_cap(limits.max_connections), limits.header_s),
        lifespan="on",
        # what is in flight when the stop begins finishes well within this (parked
        # waits answer at once, and nothing else runs longer than its budget)
        timeout_graceful_shutdown=3,
        access_log=False,
    )
    server = Server(config)
    exit_code = [0]

    def stop_on_lost() -> None:  # the store is no longer ours: stop, and say so on exit
        exit_code[0] = 1
        server.should_exit = True

    daemon.on_lost = stop_on_lost
    # uvicorn keeps every request's task in this set from the moment the request is read:
    # the daemon's group commit asks it whether a write has company (app.Daemon.join_group)
    daemon.in_flight = server.server_state.tasks.__len__
    # uvicorn restores the handlers it found and re-raises the signal after a graceful
    # shutdown; handlers that ignore it let a clean stop exit 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    server.run()
    return exit_code[0]
