"""SIGTERM with consumers attached: every parked wait answers at once with a normal reply,
in-flight writes finish, the writer lock is released, and the daemon exits within 2 s
with no traceback in its log; a restart right after opens the store (docs/daemon.md,
stopping). Real daemon processes, real consumers (`koinii tail`, long polls, a stream)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

from koinii import Refused, Unavailable
from tests.conftest import Daemon, wait_until


def _in_thread(call) -> dict:
    """Run `call` on a thread; the dict gets its "result" or its "error", and "at"."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except (Refused, Unavailable) as exc:
            outcome["error"] = exc
        outcome["at"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    outcome["thread"] = thread
    return outcome


def test_sigterm_with_consumers_attached_answers_them_and_exits_within_2s(start_daemon):
    daemon = start_daemon()
    client = daemon.client()
    client.assert_("(started Work)", "CxA")
    seq = client.seq
    sub = client.watch(goal="(done ?x)", ctx="CxA")
    tail = subprocess.Popen(
        [sys.executable, "-m", "koinii", "tail", "--url", daemon.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        streamed = client.watch(goal="(done ?x)", ctx="CxA")
        waits = [
            _in_thread(lambda: daemon.client().changes(since=seq, wait_ms=20_000)),
            _in_thread(lambda: daemon.client().poll(sub["token"], 0, wait_ms=20_000)),
            _in_thread(lambda: daemon.client().invoke("wraps.wait", timeout_s=20)),
            _in_thread(lambda: list(daemon.client().stream(streamed["token"], 0))),
        ]
        # every consumer is parked: the daemon holds their requests
        assert wait_until(lambda: len(client.watchers()) == 2 and _parked(daemon) >= 5)
        acknowledged: list[int] = []
        writers = [
            threading.Thread(target=_write, args=(daemon, n, acknowledged)) for n in range(2)
        ]
        for writer in writers:
            writer.start()
        time.sleep(0.3)  # writes are in flight when the signal lands
        sent = time.monotonic()
        daemon.proc.send_signal(signal.SIGTERM)
        code = daemon.proc.wait(10)
        took = time.monotonic() - sent
        for thread in [*(w["thread"] for w in waits), *writers]:
            thread.join(5)
        log = daemon.proc.stderr.read().decode()
    finally:
        tail.terminate()
        tail.wait(10)

    assert code == 0
    assert took < 2.0, took
    assert "Traceback" not in log and "CancelledError" not in log, log
    changes, poll, wraps, stream = (w.get("result") for w in waits)
    assert changes is not None and changes["too_old"] is False  # a normal reply
    assert poll is not None and poll["events"] == [] and poll["cursor"] == 0 and not poll["lagged"]
    assert wraps == []
    assert stream == [{"events": [], "cursor": 0, "lagged": 0}]  # its first line, then its end
    assert all(w["at"] - sent < 2.0 for w in waits)

    # the lock is free at once: a restart right after opens the same store, holding
    # every write that was acknowledged
    again = Daemon(daemon.db, []).start()
    try:
        survivor = again.client()
        assert len(acknowledged) > 10
        assert all(survivor.sentex(h) is not None for h in acknowledged)
    finally:
        again.stop()


def _write(daemon, n: int, acknowledged: list[int]) -> None:
    c = daemon.client()
    for i in range(100_000):
        try:
            acknowledged.append(c.assert_(f"(wrote Writer{n} Item{i})", "CxA"))
        except (Refused, Unavailable):
            return


def _parked(daemon) -> int:
    """How many requests the daemon holds parked (its /health reports it)."""
    return daemon.client().health().get("parked", 0)
