"""The wire feed: rings, cursors, lag, long polls, reaping, caps, the durable tail (wire.md §3)."""

import threading
import time

import pytest

from koinii import Refused


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

    threading.Thread(target=write_later).start()
    started = time.monotonic()
    reply = client.poll(sub["token"], 0, wait_ms=20_000)
    elapsed = time.monotonic() - started
    assert [e.added[0]["bindings"] for e in reply["events"]] == [
        {"?x": __import__("koinii").Sym("Thing")}
    ]
    assert elapsed < 1.3


def test_a_long_poll_times_out_empty(client):
    sub = client.watch()
    reply = client.poll(sub["token"], 0, wait_ms=200)
    assert reply == {"events": [], "cursor": 0, "lagged": 0}


def test_a_long_poll_stretches_the_client_timeout_for_itself_only(daemon):
    client = daemon.client(timeout=1)
    sub = client.watch()
    reply = client.poll(sub["token"], 0, wait_ms=1_500)  # longer than the client's timeout
    assert reply["events"] == []
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
        "delivered": 1,
        "pending": 1,
        "goal": "(item ?x)",
        "context": "CxA",
    }


def test_idle_subscriptions_are_reaped(start_daemon):
    daemon = start_daemon("--reap-after", "0.5")
    client = daemon.client()
    sub = client.watch()
    time.sleep(1.5)
    with pytest.raises(Refused) as refusal:
        client.poll(sub["token"], 0)
    assert refusal.value.kind == "unknown-subscription"


def test_the_subscription_cap_is_enforced(start_daemon):
    daemon = start_daemon("--max-subscriptions", "3")
    client = daemon.client()
    tokens = [client.watch()["token"] for _ in range(3)]
    with pytest.raises(Refused) as refusal:
        client.watch()
    assert refusal.value.kind == "too-many-subscriptions"
    client.unwatch(tokens[0])
    client.watch()


def test_the_ring_size_is_configurable(start_daemon):
    client = start_daemon("--ring-size", "4").client()
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


def test_the_durable_tail_resumes_across_a_daemon_restart(daemon):
    client = daemon.client()
    client.assert_("(item One)", "CxA")
    seen = client.seq
    client.assert_("(item Two)", "CxA")
    daemon.restart()
    client = daemon.client()
    client.assert_("(item Three)", "CxA")
    tail = client.changes(since=seen)
    assert [e["added"][0]["sentence"] for e in tail["entries"]] == ["(item Two)", "(item Three)"]
    assert tail["too_old"] is False and tail["seq"] == client.seq


def test_the_durable_tail_long_polls(daemon, client):
    since = client.seq
    threading.Timer(0.3, lambda: daemon.client().assert_("(item Late)", "CxA")).start()
    started = time.monotonic()
    tail = client.changes(since=since, wait_ms=10_000)
    assert time.monotonic() - started < 1.3
    assert tail["entries"][0]["added"][0]["sentence"] == "(item Late)"


def test_the_durable_tail_says_too_old_after_compaction(client):
    since = client.seq
    for i in range(5):
        client.assert_(f"(item Thing{i})", "CxA")
    assert client.compact_log(2) > 0
    tail = client.changes(since=since)
    assert tail["too_old"] is True and tail["entries"] == []
    recent = client.changes(since=client.seq - 2)
    assert len(recent["entries"]) == 2 and recent["too_old"] is False
