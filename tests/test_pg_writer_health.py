"""A PostgreSQL writer that loses its connection never misreports a write and never serves
as the writer from a memory the store has moved past (docs/scaling.md, a lost connection).

- A COMMIT whose reply is lost (a TCP proxy between the daemon and PostgreSQL drops it)
  is answered with the truth: done if it landed, `store-error` ("did not land") if it did
  not, `outcome-unknown` when it cannot be known — then the daemon stops serving.
- A writer whose backend is terminated reconnects, retakes the lock, checks the seq, and
  keeps serving with every acknowledged write.
- A writer that comes back to find another writer (the lock taken, the seq moved on)
  answers nothing more from memory: 503 `writer-lost`, then exits non-zero.
- Whoever takes a daemon's store over writes nothing until the daemon's lease (how long
  it answers from memory after a check) has run out; a daemon that stopped cleanly
  leaves no lease to wait for.
"""

from __future__ import annotations

import select
import signal
import socket
import threading
import uuid
from urllib.parse import urlsplit

import pytest

import koinii
from koinii import Refused, Unavailable
from tests.conftest import PG_ADMIN, Daemon, wait_until

# --- a proxy that can lose a COMMIT ---------------------------------------------------------


class CommitProxy:
    """A TCP proxy to PostgreSQL. Armed, it drops the next COMMIT's reply (`"reply"`: the
    server commits, the client never hears), or the COMMIT itself (`"commit"`: the server
    never gets it), closing the connection either way; `refuse` turns new connections away."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.armed: str | None = None
        self.refuse = False
        self.dropped = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.refuse:
                client.close()
                continue
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        commit_sent = False
        try:
            while True:
                ready, _, _ = select.select([client, server], [], [], 1.0)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is client:
                        if self.armed and b"COMMIT\x00" in data:
                            if self.armed == "commit":
                                return  # the server never hears it: it rolls back
                            commit_sent = True
                        server.sendall(data)
                    else:
                        if commit_sent:  # the server's answer to COMMIT: lost
                            return
                        client.sendall(data)
        except OSError:
            return
        finally:
            if commit_sent or self.armed == "commit":
                self.armed = None
                self.dropped.set()
            client.close()
            server.close()

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def schema(postgres):
    name = f"koinii_test_{uuid.uuid4().hex[:12]}"
    postgres.execute(f"CREATE SCHEMA {name}")
    yield name
    postgres.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def _dsn(schema: str, port: int | None = None, app: str = "koinii") -> str:
    admin = urlsplit(PG_ADMIN)
    host = f"{admin.hostname}:{port or admin.port or 5432}"
    user = f"{admin.username}@" if admin.username else ""
    return f"postgresql://{user}{host}{admin.path}?options=-csearch_path%3D{schema}&application_name={app}"


@pytest.fixture
def proxy():
    admin = urlsplit(PG_ADMIN)
    proxy = CommitProxy((admin.hostname, admin.port or 5432))
    yield proxy
    proxy.close()


def _stopped(daemon: Daemon, timeout: float = 15) -> int:
    try:
        return daemon.proc.wait(timeout)
    finally:
        daemon.kill()


# --- in-doubt commits -------------------------------------------------------------------------


def test_a_commit_whose_reply_is_lost_but_landed_is_answered_done(schema, proxy):
    daemon = Daemon(_dsn(schema, proxy.port), []).start()
    try:
        client = daemon.client()
        client.assert_("(before Loss)", "CxA")
        proxy.armed = "reply"
        handle = client.assert_("(during Loss)", "CxA")  # the truth: it landed
        assert proxy.dropped.is_set()
        assert client.sentex(handle).text == "(during Loss)"
        assert client.health()["ok"] is True  # reconnected as the writer
        after = client.assert_("(after Loss)", "CxA")
        seq = client.seq
    finally:
        daemon.stop()
    with koinii.open_kb(_dsn(schema)) as kb:
        assert kb.sentex(handle).text == "(during Loss)"
        assert kb.sentex(after).text == "(after Loss)" and kb.seq == seq


def test_a_commit_that_never_reached_the_server_is_refused_as_not_done(schema, proxy):
    daemon = Daemon(_dsn(schema, proxy.port), []).start()
    try:
        client = daemon.client()
        seq = client.seq
        proxy.armed = "commit"
        with pytest.raises(Refused) as caught:
            client.assert_("(during Loss)", "CxA")
        assert caught.value.kind == "store-error" and caught.value.data.get("checked") is True
        assert "did not land" in caught.value.message
        assert client.seq == seq and client.sentexes_matching("(during ?x)", "CxA") == []
        assert isinstance(client.assert_("(after Loss)", "CxA"), int)  # still the writer
    finally:
        daemon.stop()
    with koinii.open_kb(_dsn(schema)) as kb:
        assert kb.sentexes_matching("(during ?x)", "CxA") == []


def test_a_commit_whose_outcome_cannot_be_known_is_outcome_unknown_and_the_daemon_stops(
    schema, proxy
):
    daemon = Daemon(_dsn(schema, proxy.port), []).start()
    client = daemon.client()
    proxy.armed = "reply"
    proxy.refuse = True  # and no reconnect: the outcome is not knowable
    with pytest.raises(Refused) as caught:
        client.assert_("(during Loss)", "CxA")
    assert caught.value.kind == "outcome-unknown"  # never "none of it happened"
    assert _stopped(daemon) != 0
    with koinii.open_kb(_dsn(schema)) as kb:  # it did land: the server committed it
        assert [s.text for s in kb.sentexes_matching("(during ?x)", "CxA")] == ["(during Loss)"]


# --- a lost connection ---------------------------------------------------------------------------


def _terminate(postgres, app: str) -> int:
    rows = postgres.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        (app,),
    ).fetchall()
    return len(rows)


def test_a_writer_whose_backend_is_terminated_reconnects_with_every_write(schema, postgres):
    app = f"koinii_{uuid.uuid4().hex[:8]}"
    daemon = Daemon(_dsn(schema, app=app), []).start()
    try:
        client = daemon.client()
        handles = [client.assert_(f"(wrote Item{i})", "CxA") for i in range(5)]
        assert _terminate(postgres, app) == 1
        handles.append(client.assert_("(wrote After)", "CxA"))  # reconnects first
        assert _terminate(postgres, app) == 1
        assert wait_until(lambda: _sessions(postgres, app) == 1)  # the watch reconnects
        assert client.health()["ok"] is True
        handles.append(client.assert_("(wrote Later)", "CxA"))
        assert all(client.sentex(h) is not None for h in handles)
    finally:
        assert daemon.stop() == 0
    with koinii.open_kb(_dsn(schema)) as kb:
        assert all(kb.sentex(h) is not None for h in handles)


def test_a_writer_that_finds_another_writer_stops_serving_and_exits_non_zero(schema, postgres):
    app = f"koinii_{uuid.uuid4().hex[:8]}"
    writer = Daemon(_dsn(schema, app=app), []).start()
    standby = Daemon(_dsn(schema), ["--standby"])
    try:
        old = writer.client()
        old.assert_("(wrote Before)", "CxA")
        # the writer freezes (a pause, a partition); its session ends; the standby
        # takes over and writes
        writer.proc.send_signal(signal.SIGSTOP)
        assert _terminate(postgres, app) == 1
        standby.start(timeout=30)
        new = standby.client()
        moved = new.assert_("(wrote Elsewhere)", "CxA")
        writer.proc.send_signal(signal.SIGCONT)
        # the old writer answers nothing from memory: not health, not a read — it
        # refuses them (503 writer-lost) until it is gone, a moment later
        assert _answer(old.health) in ("writer-lost", "gone")
        assert _answer(lambda: old.sentex(moved)) in ("writer-lost", "gone")
        assert _stopped(writer) != 0
        assert new.sentex(moved).text == "(wrote Elsewhere)"
    finally:
        writer.proc.send_signal(signal.SIGCONT)
        writer.kill()
        standby.kill()


def test_a_writer_that_takes_over_waits_out_the_old_daemons_lease(schema, postgres):
    app = f"koinii_{uuid.uuid4().hex[:8]}"
    writer = Daemon(_dsn(schema, app=app), []).start()
    try:
        old = writer.client()
        old.assert_("(wrote Before)", "CxA")
        writer.proc.send_signal(signal.SIGSTOP)  # its last check was a moment ago
        assert _terminate(postgres, app) == 1
        # an embedded writer takes the store over at once, and writes: not before the old
        # daemon's lease has run out, so that daemon checks before it answers again
        with koinii.open_kb(_dsn(schema), standby=True) as kb:
            moved = kb.assert_("(wrote Elsewhere)", "CxA")
            writer.proc.send_signal(signal.SIGCONT)
            assert _answer(old.health) in ("writer-lost", "gone")
            assert _answer(lambda: old.sentex(moved)) in ("writer-lost", "gone")
        assert _stopped(writer) != 0
        assert _lease_marks(postgres, schema) == 0  # run out: the next writer waits for none
    finally:
        writer.proc.send_signal(signal.SIGCONT)
        writer.kill()


def test_a_daemon_that_stops_cleanly_leaves_no_lease_to_wait_for(schema, postgres):
    daemon = Daemon(_dsn(schema), []).start()
    try:
        assert _lease_marks(postgres, schema) == 2  # its lease, and whose it is
        daemon.client().assert_("(wrote Before)", "CxA")
    finally:
        assert daemon.stop() == 0
    assert _lease_marks(postgres, schema) == 0


def _lease_marks(postgres, schema: str) -> int:
    return postgres.execute(
        f"SELECT count(*) FROM {schema}.koinii_meta WHERE key IN ('lease_holder', 'lease_ms')"
    ).fetchone()[0]


def _answer(call) -> str:
    """What the old writer said: a refusal's kind, "gone", or (the failure) "answered"
    with the reply (its seq and how it was opened tell which daemon answered)."""
    try:
        reply = call()
    except Refused as refusal:
        return refusal.kind
    except Unavailable:
        return "gone"
    if isinstance(reply, dict) and reply.get("ok") is False:
        return reply["error"]["kind"]
    return f"answered {reply!r}"


def _sessions(postgres, app: str) -> int:
    return postgres.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
    ).fetchone()[0]
