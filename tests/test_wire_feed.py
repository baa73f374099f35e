"""The wire feed: rings, cursors, lag, long polls, streams, reaping, caps, the durable tail
(wire.md §3), over the blocking client and the asyncio one alike (the `connect` fixture)."""

import asyncio
import json
import threading
import time

import pytest

import koinii
from koinii import Refused
from koinii.server import build_app
from koinii.wire import API
from tests.conftest import wait_until

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix


@pytest.fixture
def client(daemon, connect):
    return connect(daemon)


@pytest.mark.backends("sqlite", "postgres")
def test_300_writes_against_a_256_ring_lag_44_then_0(client):
    sub = client.watch()
    assert sub["cursor"] == 0 and sub["max_events"] == 256
    client.edit(add=[])  # a write that changes nothing emits nothing
    for i in range(300):
        client.assert_(f"(item Thing{i})", "CxA")
    reply = client.poll(sub["token"], 0)
    assert reply["lagged"] == 44
    assert len(reply["events"]) == 256 and reply["cursor"] == 300
    assert reply["events"][0].added[0]["sentence"] == "(item Thing44)"
    again = client.poll(sub["token"], reply["cursor"])
    assert again == {"events": [], "cursor": 300, "lagged": 0}


def test_a_subscription_resumed_past_its_ring_starts_with_its_newest_and_counts_the_rest(
    client,
):
    since = client.seq
    handles = [client.assert_(f"(item Thing{i})", "CxA") for i in range(12)]
    client.assert_("(other Thing)", "CxA")  # not the goal's
    sub = client.watch("(item ?x)", "CxA", max_events=5, since=since)
    reply = client.poll(sub["token"], 0)
    assert [e.added[0]["handle"] for e in reply["events"]] == handles[-5:]
    assert reply["cursor"] == 12 and reply["lagged"] == 7
    later = client.assert_("(item Later)", "CxA")
    [event] = client.poll(sub["token"], 12)["events"]
    assert event.added[0]["handle"] == later


def test_every_event_carries_the_global_seq(client):
    sub = client.watch()
    h = client.assert_("(item Thing)", "CxA")
    [event] = client.poll(sub["token"], 0)["events"]
    assert event.seq == client.seq
    assert event.added == [{"handle": h, "sentence": "(item Thing)", "context": "CxA"}]


def test_a_long_poll_returns_within_a_second_of_a_write(daemon, client):
    sub = client.watch(goal="(item ?x)", ctx="CxA")
    writer = daemon.client()

    def write_later():
        time.sleep(0.3)
        writer.assert_("(item Thing)", "CxA")

    writing = threading.Thread(target=write_later)
    writing.start()
    started = time.monotonic()
    reply = client.poll(sub["token"], 0, wait_ms=20_000)
    elapsed = time.monotonic() - started
    writing.join()  # the poll is answered first; the writer's ack follows
    assert [e.added[0]["bindings"] for e in reply["events"]] == [
        {"?x": __import__("koinii").Sym("Thing")}
    ]
    assert elapsed < 1.3


def test_a_long_poll_times_out_empty(client):
    sub = client.watch()
    reply = client.poll(sub["token"], 0, wait_ms=200)
    assert reply == {"events": [], "cursor": 0, "lagged": 0}


def test_a_long_poll_stretches_the_client_timeout_for_itself_only(daemon, connect):
    client = connect(daemon, timeout=1)
    sub = client.watch()
    reply = client.poll(sub["token"], 0, wait_ms=1_500)  # longer than the client's timeout
    assert reply["events"] == []
    if not isinstance(client, koinii.Client):
        return  # httpx takes a timeout per request: there is no socket to inspect
    socket = client._transport._local.conn.sock
    assert socket.gettimeout() == 2.5
    client.stats()  # the next call on the same connection is back to the client's timeout
    assert socket.gettimeout() == 1
    client.close()


def test_unwatch_wakes_a_parked_poll_with_unknown_subscription(daemon, client):
    sub = client.watch()
    outcome = {}

    def park():
        try:
            daemon.client().poll(sub["token"], 0, wait_ms=20_000)
        except Refused as refusal:
            outcome["kind"] = refusal.kind
        outcome["at"] = time.monotonic()

    parked = threading.Thread(target=park)
    parked.start()
    time.sleep(0.3)
    unwatched_at = time.monotonic()
    assert client.unwatch(sub["token"]) is True
    parked.join(5)
    assert outcome["kind"] == "unknown-subscription"
    assert outcome["at"] - unwatched_at < 1.0
    assert client.unwatch(sub["token"]) is False


# --- streams: one line per write, on a connection held open ---------------------------


def test_a_stream_writes_each_event_as_it_lands(daemon, client):
    sub = client.watch(goal="(item ?x)", ctx="CxA")
    stream = client.stream(sub["token"], 0)
    try:
        assert next(stream) == {"events": [], "cursor": 0, "lagged": 0}  # open: at once
        writer = daemon.client()
        for i in range(3):
            written = time.monotonic()
            writer.assert_(f"(item Thing{i})", "CxA")
            writer.assert_(f"(other Thing{i})", "CxA")  # matches nothing: no line
            line = next(stream)
            assert time.monotonic() - written < 1.0
            assert line["cursor"] == i + 1 and line["lagged"] == 0
            [event] = line["events"]
            assert event.added[0]["bindings"] == {"?x": koinii.Sym(f"Thing{i}")}
    finally:
        stream.close()


def test_a_stream_read_slowly_is_written_every_event_once_in_order(daemon):
    """A watcher that stops reading until its connection's buffers are full (the
    daemon's included: its writes then wait) is written what came meanwhile when it
    reads again: every event once, in order, none skipped (a line once reported the
    events written after it was built as sent, and they were never written) and none
    held back (they once waited for the next write, or the 15 s keepalive)."""
    import http.client
    import socket

    count, note = 240, "x" * 30_000  # 7 MB: past the socket buffers of both ends
    with daemon.client() as writer:
        sub = writer.watch(max_events=1024)
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before it connects
        raw.connect(("127.0.0.1", daemon.port))
        conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
        conn.sock = raw
        body = json.dumps({"token": sub["token"], "cursor": 0})
        conn.request("POST", f"{API}/stream", body, {"content-type": "application/json"})
        reply = conn.getresponse()
        try:
            assert json.loads(reply.readline())["cursor"] == 0
            for i in range(count):  # read nothing meanwhile
                writer.assert_(f'(note Thing{i} "{note}")', "CxA")
            numbers, lines, reading = [], 0, time.monotonic()
            while len(numbers) < count:
                line = json.loads(reply.readline())
                assert line["lagged"] == 0
                numbers += [event["n"] for event in line["events"]]
                assert line["cursor"] == len(numbers)
                lines += 1
            took = time.monotonic() - reading
        finally:
            conn.close()
    assert numbers == list(range(count))
    assert lines < count  # the reader fell behind: lines came to carry several events
    assert took < 5.0  # (the keepalive is 15 s)


def test_a_stream_starts_after_its_cursor_and_says_what_fell_off_the_ring(client):
    sub = client.watch(max_events=4)
    for i in range(6):
        client.assert_(f"(item Thing{i})", "CxA")
    stream = client.stream(sub["token"], 1)
    try:
        first = next(stream)
    finally:
        stream.close()
    assert first["cursor"] == 6 and first["lagged"] == 1  # events 0 and 1 went; 1 was read
    assert [e.added[0]["sentence"] for e in first["events"]] == [
        f"(item Thing{i})" for i in range(2, 6)
    ]


def test_unwatch_ends_a_stream_and_a_closed_stream_lets_its_wait_go(daemon, client):
    sub = client.watch()
    stream = client.stream(sub["token"], 0)
    next(stream)
    assert wait_until(lambda: daemon.client().health()["parked"] == 1)
    threading.Timer(0.3, lambda: daemon.client().unwatch(sub["token"])).start()
    assert list(stream) == []  # ended, not failed
    other = client.watch()
    stream = client.stream(other["token"], 0)
    next(stream)
    assert wait_until(lambda: daemon.client().health()["parked"] == 1)
    stream.close()  # the client goes: the daemon lets the stream's wait go at once
    assert wait_until(lambda: daemon.client().health()["parked"] == 0)


def test_a_stream_of_no_subscription_or_past_its_events_is_refused(client):
    with pytest.raises(Refused) as refusal:
        next(client.stream("no-such-token", 0))
    assert refusal.value.kind == "unknown-subscription"
    sub = client.watch()
    for cursor in (-1, 1):
        with pytest.raises(Refused) as refusal:
            next(client.stream(sub["token"], cursor))
        assert refusal.value.kind == "bad-cursor"


def test_a_streamed_subscription_is_not_reaped(start_daemon, connect):
    daemon = start_daemon("--reap-after", "0.5")
    client = connect(daemon)
    sub = client.watch()
    stream = client.stream(sub["token"], 0)
    try:
        next(stream)
        time.sleep(1.5)  # three reaping periods, with no poll
        daemon.client().assert_("(item Thing)", "CxA")
        assert next(stream)["cursor"] == 1
    finally:
        stream.close()


def test_a_quiet_stream_says_it_is_there(kb, monkeypatch):
    """Every STREAM_KEEPALIVE_S with no events, a line of none (in-process, with the
    keepalive shortened: a real one is 15 s)."""
    from koinii.server import subscriptions

    monkeypatch.setattr(subscriptions, "STREAM_KEEPALIVE_S", 0.05)
    app = build_app(kb)
    daemon = app.state.daemon

    async def scenario() -> list[bytes]:
        token = daemon.subs.watch(None, None, None)["token"]
        lines = daemon.subs.lines(daemon.subs.stream(token, 0))
        return [await anext(lines) for _ in range(3)]

    assert asyncio.run(scenario()) == [b'{"events":[],"cursor":0,"lagged":0}\n'] * 3


def test_a_resumed_subscription_encodes_only_what_its_ring_keeps(kb, monkeypatch):
    """A resume replays up to ten thousand writes on the daemon's loop: the events that
    would fall off the ring at once are counted, not rendered (in-process)."""
    from koinii.server import subscriptions

    encoded: list = []
    encode = subscriptions.encode_event
    monkeypatch.setattr(subscriptions, "encode_event", lambda e: encoded.append(e) or encode(e))
    daemon = build_app(kb).state.daemon
    since = kb.seq
    for i in range(40):
        kb.assert_(f"(item Thing{i})", "CxA")
    sub = daemon.subs.watch(None, None, 5, since=since)
    assert len(encoded) == 5
    reply = json.loads(asyncio.run(daemon.subs.poll(sub["token"], 0, 0)))
    assert [e["added"][0]["sentence"] for e in reply["events"]] == [
        f"(item Thing{i})" for i in range(35, 40)
    ]
    assert reply["cursor"] == 40 and reply["lagged"] == 35


def test_a_parked_stream_is_written_in_the_writes_own_pass(kb):
    """A stream whose connection takes a line at once (chunks.WRITE_NOW) is written its
    line as the write commits, no task woken (in-process: the pass is synchronous); a
    line the connection cannot take goes by the stream's task, starting where the
    written ones ended."""
    daemon = build_app(kb).state.daemon
    written: list[bytes] = []
    taking = [True]

    def write_now(line: bytes) -> bool:
        if taking[0]:
            written.append(line)
        return taking[0]

    async def scenario() -> None:
        token = daemon.subs.watch(None, None, None)["token"]
        lines = daemon.subs.lines(daemon.subs.stream(token, 0), write_now)
        assert json.loads(await anext(lines))["cursor"] == 0  # the first: by the task
        following = asyncio.ensure_future(anext(lines))
        await asyncio.sleep(0)  # it parks
        for i in range(2):
            kb.assert_(f"(item Thing{i})", "CxA")
            assert json.loads(written[-1])["cursor"] == i + 1  # no await since the write
        assert not following.done()
        taking[0] = False  # the connection's buffer is full
        kb.assert_("(item Thing2)", "CxA")
        line = json.loads(await asyncio.wait_for(following, 5))
        assert [e["n"] for e in line["events"]] == [2] and line["cursor"] == 3
        await lines.aclose()

    asyncio.run(scenario())
    assert [[e["n"] for e in json.loads(w)["events"]] for w in written] == [[0], [1]]


@pytest.mark.parametrize(
    "cursor", [-1, "3", 1.5, True, 1], ids=["negative", "text", "float", "bool", "ahead"]
)
def test_bad_cursors_are_refused(client, cursor):
    sub = client.watch()
    with pytest.raises(Refused) as refusal:
        client.poll(sub["token"], cursor)
    assert refusal.value.kind == "bad-cursor"


def test_huge_and_negative_waits_are_refused(client):
    sub = client.watch()
    for wait in (30_001, 10**12, -5):
        with pytest.raises(Refused) as refusal:
            client.poll(sub["token"], 0, wait_ms=wait)
        assert refusal.value.kind == "bad-option"


def test_watchers_list_the_live_subscriptions(client):
    sub = client.watch(goal="(item ?x)", ctx="CxA")
    client.assert_("(item Thing)", "CxA")
    [entry] = client.watchers()
    assert entry == {
        "token": sub["token"],
        "principal": None,
        "delivered": 1,
        "pending": 1,
        "goal": "(item ?x)",
        "context": "CxA",
    }


def test_idle_subscriptions_are_reaped(start_daemon, connect):
    daemon = start_daemon("--reap-after", "0.5")
    client = connect(daemon)
    sub = client.watch()
    time.sleep(1.5)
    with pytest.raises(Refused) as refusal:
        client.poll(sub["token"], 0)
    assert refusal.value.kind == "unknown-subscription"


def test_the_subscription_cap_is_enforced(start_daemon, connect):
    daemon = start_daemon("--max-subscriptions", "3")
    client = connect(daemon)
    tokens = [client.watch()["token"] for _ in range(3)]
    with pytest.raises(Refused) as refusal:
        client.watch()
    assert refusal.value.kind == "too-many-subscriptions"
    client.unwatch(tokens[0])
    client.watch()


def test_the_ring_size_is_configurable(start_daemon, connect):
    client = connect(start_daemon("--ring-size", "4"))
    sub = client.watch()
    assert sub["max_events"] == 4
    for i in range(10):
        client.assert_(f"(item Thing{i})", "CxA")
    reply = client.poll(sub["token"], 0)
    assert reply["lagged"] == 6 and len(reply["events"]) == 4


def test_concurrent_unwatch_and_poll_do_not_break_the_daemon(daemon, client):
    errors = []

    def churn():
        c = daemon.client()
        for _ in range(30):
            token = c.watch()["token"]
            poller = threading.Thread(target=lambda t=token: _poll_quietly(daemon, t, errors))
            poller.start()
            c.unwatch(token)
            poller.join(5)

    threads = [threading.Thread(target=churn) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert client.stats()["seq"] >= 0 and client.watchers() == []


def _poll_quietly(daemon, token, errors):
    try:
        daemon.client().poll(token, 0, wait_ms=2000)
    except Refused as refusal:
        if refusal.kind != "unknown-subscription":
            errors.append(refusal.kind)


@pytest.mark.backends("sqlite", "postgres")
def test_the_durable_tail_resumes_across_a_daemon_restart(daemon, connect):
    client = connect(daemon)
    client.assert_("(item One)", "CxA")
    seen = client.seq
    client.assert_("(item Two)", "CxA")
    daemon.restart()
    client = connect(daemon)
    client.assert_("(item Three)", "CxA")
    tail = client.changes(since=seen)
    assert [e["added"][0]["sentence"] for e in tail["entries"]] == ["(item Two)", "(item Three)"]
    assert tail["too_old"] is False and tail["seq"] == client.seq


def test_the_durable_tail_long_polls(daemon, client):
    since = client.seq
    writing = threading.Timer(0.3, lambda: daemon.client().assert_("(item Late)", "CxA"))
    writing.start()
    started = time.monotonic()
    tail = client.changes(since=since, wait_ms=10_000)
    assert time.monotonic() - started < 1.3
    writing.join()
    assert tail["entries"][0]["added"][0]["sentence"] == "(item Late)"


@pytest.mark.backends("sqlite", "postgres")
def test_the_durable_tail_says_too_old_after_compaction(client):
    since = client.seq
    for i in range(5):
        client.assert_(f"(item Thing{i})", "CxA")
    assert client.compact_log(2) > 0
    tail = client.changes(since=since)
    assert tail["too_old"] is True and tail["entries"] == []
    recent = client.changes(since=client.seq - 2)
    assert len(recent["entries"]) == 2 and recent["too_old"] is False


# --- ordering, in-process: the daemon's ASGI app driven directly, to see which reply
# starts first (over sockets, two client threads would race to read theirs)


async def _call(app, op: str, body: dict, started: list[str]) -> dict:
    raw = json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": f"{API}/{op}",
        "raw_path": f"{API}/{op}".encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-length", str(len(raw)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            started.append(op)
        sent.append(message)

    await app(scope, receive, send)
    return json.loads(b"".join(m.get("body", b"") for m in sent[1:]))["result"]


@pytest.mark.parametrize("grouped", [True, False], ids=["in-a-group", "alone"])
def test_a_woken_long_poll_answers_before_the_write_that_woke_it(kb, grouped):
    app = build_app(kb)
    daemon = app.state.daemon
    if not grouped:  # as under uvicorn when the write is the only request in flight
        daemon.in_flight = lambda: 1 + daemon.subs.parked
    started: list[str] = []

    async def scenario() -> None:
        token = (await _call(app, "watch", {}, []))["token"]
        poll = asyncio.create_task(
            _call(app, "poll", {"token": token, "cursor": 0, "wait_ms": 5_000}, started)
        )
        while not daemon.subs.parked:
            await asyncio.sleep(0)
        await _call(app, "assert", {"sentence": "(item Thing)", "context": "CxA"}, started)
        reply = await poll
        assert reply["events"][0]["added"][0]["sentence"] == "(item Thing)"

    asyncio.run(scenario())
    assert started == ["poll", "assert"]
    assert daemon.subs.waking == 0
