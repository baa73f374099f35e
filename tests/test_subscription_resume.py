"""Subscriptions that survive the daemon: a wire subscription and `koinii tail` go on across
restarts — SIGTERM and kill -9 — from the last seq they delivered, with no event lost and
none delivered twice; `on_error` hears of each outage, `on_lagged` of a log compacted past
the subscriber (channel.md, subscriptions that survive). Real daemon processes on one port.
The wire subscription is `channel.wire`'s poll thread and `AsyncClient.subscribe`'s async
iterator (behind a blocking face, tests/blocking.py): the same guarantees, the same tests.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

import koinii
from koinii import Refused, Unavailable
from koinii.channel import agent as channel
from tests.blocking import Loop, Subscribed
from tests.conftest import Daemon, line_within, wait_until

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix


@pytest.fixture
def service(new_location):
    daemon = Daemon(new_location(), []).start()
    yield daemon
    daemon.kill()


def _writer(daemon: Daemon, acknowledged: list[int], stop: threading.Event) -> threading.Thread:
    """Writes (item N) until stopped, through every outage; keeps what was acknowledged."""

    def run() -> None:
        client = daemon.client(timeout=5)
        i = 0
        while not stop.is_set():
            try:
                acknowledged.append(client.assert_(f"(item Item{i})", "CxA"))
                i += 1
            except (Unavailable, Refused):
                time.sleep(0.02)  # down, or stopping: a write not acknowledged
            time.sleep(0.005)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture(params=["wire", "async"])
def subscribe_items(request):
    """subscribe_items(daemon, delivered, errors, lagged) -> a running subscription to
    (item ?x) in CxA that appends each event to `delivered`."""
    loop = Loop() if request.param == "async" else None

    def subscribe(daemon: Daemon, delivered: list, errors: list, lagged: list):
        if loop is None:
            wire = channel.wire(daemon.client(timeout=5))
            return wire.subscribe(
                "(item ?x)", "CxA", delivered.append, 2_000, lagged.append, errors.append
            )
        client = koinii.aconnect(daemon.url, timeout=5)
        events = client.subscribe(
            "(item ?x)", "CxA", wait_ms=2_000, on_lagged=lagged.append, on_error=errors.append
        )
        loop.run(events.open())
        return Subscribed(events, delivered.append, loop)

    yield subscribe
    if loop is not None:
        loop.close()


def _handles(events) -> list[int]:
    return [c["handle"] for e in events for c in e.added]


@pytest.mark.backends("sqlite", "postgres")
@pytest.mark.parametrize("restarts", [10])
def test_a_wire_subscription_resumes_across_restarts_losing_and_repeating_nothing(
    service, backend, restarts, subscribe_items
):
    if backend == "postgres":
        restarts = 2  # the same path; ten restarts on SQLite keep the suite short
    delivered: list = []
    errors: list = []
    lagged: list = []
    sub = subscribe_items(service, delivered, errors, lagged)
    acknowledged: list[int] = []
    stop = threading.Event()
    writer = _writer(service, acknowledged, stop)
    try:
        for n in range(restarts + 1):
            flowing = len(delivered) + 3  # the subscriber is back and events flow
            assert wait_until(lambda f=flowing: len(delivered) >= f, timeout=15)
            if n < restarts:
                service.restart_by(signal.SIGTERM if n % 2 == 0 else signal.SIGKILL)
    finally:
        stop.set()
        writer.join(10)
    last = service.client().seq
    assert wait_until(lambda: sub.last_seq >= last, timeout=15), (sub.last_seq, last)
    sub.stop()

    seen = _handles(delivered)
    assert len(seen) == len(set(seen)), "an event was delivered twice"
    assert set(acknowledged) <= set(seen), "an acknowledged write never reached the subscriber"
    seqs = [e.seq for e in delivered]
    assert seqs == sorted(seqs)
    survivor = service.client()  # and nothing that is not in the store
    assert all(survivor.sentex(h) is not None for h in seen)
    assert len(errors) == restarts, errors  # told of each outage, once
    assert lagged == []
    assert sub.outages == restarts


def test_a_subscription_the_log_cannot_replay_to_is_told_it_lagged(service, subscribe_items):
    delivered: list = []
    errors: list = []
    lagged: list = []
    sub = subscribe_items(service, delivered, errors, lagged)
    service.client().assert_("(item First)", "CxA")
    assert wait_until(lambda: len(delivered) == 1)
    service.proc.send_signal(signal.SIGKILL)
    service.proc.wait(10)
    with koinii.open_kb(service.db) as kb:  # while it is down, the log moves on and is cut
        for i in range(5):
            kb.assert_(f"(item Missed{i})", "CxA")
        kb.compact_log(1)
    service.start(same_port=True)
    assert wait_until(lambda: lagged, timeout=10)
    later = service.client().assert_("(item Later)", "CxA")
    assert wait_until(lambda: later in _handles(delivered), timeout=10)
    assert not any("Missed" in c["sentence"] for e in delivered for c in e.added)
    sub.stop()


def test_koinii_tail_follows_across_restarts(service):
    tail = subprocess.Popen(
        [sys.executable, "-m", "koinii", "tail", "--url", service.url, "--goal", "(item ?x)"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        client = service.client()
        # tail has started, read where the log is, and parked its long poll (were the
        # daemon down before then, it would refuse to start, as a reader with no seq)
        assert wait_until(lambda: client.health()["parked"], timeout=20)
        client.assert_("(item Before)", "CxA")
        service.restart_by(signal.SIGTERM)
        service.client().assert_("(item BetweenRestarts)", "CxA")
        service.restart_by(signal.SIGKILL)
        service.client().assert_("(item After)", "CxA")
        lines: list[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("After" in line for line in lines):
            lines.append(line_within(tail.stdout, timeout=deadline - time.monotonic()))
        assert tail.poll() is None  # still following
    finally:
        tail.terminate()
        tail.wait(10)
    items = [word for line in lines for word in line.split() if word.startswith("Item") or word
             in ("Before)", "BetweenRestarts)", "After)")]  # fmt: skip
    assert items == ["Before)", "BetweenRestarts)", "After)"], lines
    assert "waiting for it" in tail.stderr.read()
