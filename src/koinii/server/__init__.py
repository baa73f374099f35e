"""The daemon: one process that owns one store and is its single writer.

`serve()` opens the store (refusing a second writer), loads the token table, refuses to
bind a non-loopback address without one, binds its port (a port it cannot have is
refused `cannot-listen`, exit 1, with the store closed again), says on stderr where it
listens and over what (`startup_line`; with port 0, the port the system chose), writes
that port to a port file if asked (`write_port_file`: once it answers, whole or not at
all), and runs the ASGI app (`app.build_app`) under uvicorn until SIGTERM/SIGINT: then it
stops accepting, answers every parked wait at once (a normal reply), lets in-flight
requests finish, and closes the store — releasing the writer lock — before the process
exits. SIGHUP reads the token table again, on the event loop, between requests
(`TokenTable.reload`). Its connections are uvicorn's httptools protocol under the
connection guards (guards.guarded_protocol), offering each reply a plain call that writes
its next chunk (chunks.with_write_now: the feed's pass).

Everything it tells an operator goes to stderr as lines beginning `koinii serve:`; the
access log (uvicorn's, one line per request) only with `access_log`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterable

from koinii.errors import Refused
from koinii.identity.names import check_names_in_store
from koinii.kb import KB, open_kb
from koinii.server.app import Limits, Pages, build_app
from koinii.server.chunks import with_write_now
from koinii.server.guards import Hosts, connection_cap, guarded_protocol
from koinii.server.limits import WRITER_LEASE_S
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


def say(line: str) -> None:
    """One line for the operator, on stderr (the daemon's stdout stays empty)."""
    print(f"koinii serve: {line}", file=sys.stderr, flush=True)


def startup_line(url: str, kb: KB, tokens: TokenTable | None, standby: bool) -> str:
    """Where the daemon listens, on what store, as what, and who may call it."""
    role = "writer (took over as a standby)" if standby else "writer"
    if tokens is None:
        who = "open: no token table, every loopback caller is an operator"
    else:
        who = f"tokens {tokens.path} ({tokens.count} principal(s); SIGHUP reloads it)"
    backend = kb.durability.get("backend", "memory")
    opened = kb.opened
    if opened["from"] == "checkpoint":
        tail = opened["tail_sentexes"] + opened["tail_justifications"]
        how = f"opened from its checkpoint at seq {opened['seq']} + {tail} row(s) written since"
    else:
        how = "built from its rows"
    return (
        f"listening on {url} (pid {os.getpid()}) · store {kb.location} ({backend}, {how} in "
        f"{opened['seconds']:g} s) · {role} · {who}"
    )


def listen(host: str, port: int) -> socket.socket:
    """The daemon's listening socket, bound here rather than by uvicorn, so that a port it
    cannot have is a refusal with its own exit code (uvicorn exits 3, which the CLI's
    exit codes give to "daemon unreachable")."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise Refused(
            "cannot-listen",
            f"cannot listen on {host}:{port}: {exc.strerror or exc} (another daemon on "
            "that port? stop it, or give another --port)",
            {"host": host, "port": port, "errno": exc.errno},
        ) from None
    sock.set_inheritable(True)
    return sock


def write_port_file(path: str, port: int) -> None:
    """Write the port the daemon listens on to `path`, for a supervisor that started it on
    port 0 (the test harness, `koinii demo`). Written beside it and renamed into place, so
    a reader polling for the file never sees half a number."""
    partial = f"{path}.{os.getpid()}.partial"
    try:
        with open(partial, "w") as f:
            f.write(f"{port}\n")
        os.replace(partial, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(partial)
        raise Refused(
            "cannot-write-port-file",
            f"cannot write the port to {path}: {exc.strerror or exc} (does its folder exist?)",
            {"path": path, "errno": exc.errno},
        ) from None


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
    access_log: bool = False,
    port_file: str | None = None,
    pages: Pages | None = None,
) -> int:
    """Run the daemon in the foreground; returns the process exit code. It answers to
    the loopback names, `host`, and `allow_hosts` (guards.Hosts); `access_log` logs
    every request to stderr. Port 0 takes a free port the system chooses, stated on the
    start-up line and, with `port_file`, written there once the daemon answers: a
    supervisor learns it without guessing a free port another process could take first.
    `pages` makes the routes served beside the API (`koinii serve` mounts the web view's)."""
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
            # not the location: a PostgreSQL URL may carry a password (the store masks it)
            say("standby: waiting for the writer of the store to stop, then taking over")
        kb = open_kb(db, standby=standby, synchronous=synchronous)
        if standby:
            say(f"standby: took over, now the writer of {kb.location}")
        try:
            if table is not None:  # no agent's name may own a context the store gives another
                table.vet_with(lambda agents: check_names_in_store(kb, agents, tokens))
            # and waits out the lease of a daemon that may still answer (a freeze, a cut)
            kb.hold_lease(WRITER_LEASE_S)
            sock = listen(host, port)
        except Refused:
            kb.close()
            raise
    except Refused as refusal:
        say(f"{refusal.kind}: {refusal.message}")
        return 1
    limits = limits or Limits()
    app = build_app(kb, table, limits, Hosts(host, allow_hosts), pages)
    daemon = app.state.daemon
    # The daemon holds its whole KB in memory, a heap that mostly grows. With the
    # collector's default thresholds every few thousand writes brought a full collection
    # that rescans all of it: a tenth of a write's CPU under load (benchmarks/wire.py).
    # Young objects are still collected often; the old generation, seldom. And what the
    # open built is frozen: never scanned again (a full collection over a million facts
    # stalled every client for over a second), nor copied page by page into the forked
    # readers and checkpoint writers by a scan. Its sentexes are still freed when they go
    # (a deleted node is unlinked from what it held, so none is left in a cycle).
    gc.set_threshold(2_000, 10, 100)
    gc.freeze()

    shown_host = f"[{host}]" if ":" in host else host
    bound_port = sock.getsockname()[1]
    url = f"http://{shown_host}:{bound_port}"

    def reload_tokens() -> None:  # SIGHUP, run on the loop between requests
        if table is None:
            say("SIGHUP: there is no token table to reload (the daemon is open)")
            return
        try:
            table.reload()
        except Refused as refusal:
            say(f"SIGHUP: kept the token table as it was: {refusal.kind}: {refusal.message}")
            return
        say(f"SIGHUP: reloaded {table.path} ({table.count} principal(s))")

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:  # answer parked waits: a prompt stop
            daemon.begin_stopping()
            super().handle_exit(sig, frame)

        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started:
                asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload_tokens)
                say(startup_line(url, kb, table, standby))
                if port_file is not None:
                    try:
                        write_port_file(port_file, bound_port)
                    except Refused as refusal:  # its supervisor would wait for it in vain
                        say(f"{refusal.kind}: {refusal.message}")
                        stop_failing()

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        loop="auto",  # uvloop, where it is installed (pyproject.toml), else asyncio
        http=with_write_now(
            guarded_protocol(connection_cap(limits.max_connections), limits.header_s)
        ),
        lifespan="on",
        # what is in flight when the stop begins finishes well within this (parked
        # waits answer at once, and nothing else runs longer than its budget)
        timeout_graceful_shutdown=3,
        access_log=access_log,
    )
    if access_log:  # uvicorn logs each request at INFO, whatever --log-level silences,
        access = logging.getLogger("uvicorn.access")  # and to stdout: stderr, as the rest
        access.setLevel(logging.INFO)
        for handler in access.handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(sys.stderr)
    server = Server(config)
    exit_code = [0]

    def stop_failing() -> None:  # the store is no longer ours, or the port file could not
        exit_code[0] = 1  # be written: stop, and say so in the exit code
        server.should_exit = True

    daemon.on_lost = stop_failing
    # uvicorn keeps every request's task in this set from the moment the request is read:
    # the daemon's group commit asks it whether a write has company (app.Daemon.join_group)
    daemon.in_flight = server.server_state.tasks.__len__
    # uvicorn restores the handlers it found and re-raises the signal after a graceful
    # shutdown; handlers that ignore it let a clean stop exit 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    server.run(sockets=[sock])
    return exit_code[0]
