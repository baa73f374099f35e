"""Subscriptions: the live half of the channel (channel.md §3), local and over the wire —
the wire suite over channel.wire(Client) and over achannel.wire(AsyncClient), whose
async iterator runs behind a blocking face (tests/blocking.py)."""

import threading
import time

import pytest

import koinii
from koinii import Refused
from koinii.channel import agent as channel
from tests.blocking import Loop, Medium
from tests.conftest import wait_until

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix


@pytest.fixture(params=["wire", "async-wire"])
def wire(request):
    """wire(daemon, agent_id) -> the agent joined to CxDeploy on its own connection:
    channel.wire(Client), or achannel.wire(AsyncClient) behind a blocking face."""
    loop = Loop() if request.param == "async-wire" else None

    def join(daemon, agent_id: str):
        if loop is None:
            return channel.join(channel.wire(daemon.client()), "CxDeploy", agent_id)
        return Medium(koinii.aconnect(daemon.url), loop).join("CxDeploy", agent_id)

    yield join
    if loop is not None:
        loop.close()


@pytest.fixture
def daemon_team(daemon, wire):
    """Atlas and Boreas joined to CxDeploy over the wire, each with its own connection."""
    return {name: wire(daemon, f"Agent{name}") for name in ("Atlas", "Boreas")}


def test_a_local_subscription_calls_back_on_the_writers_thread_until_dropped(kb):
    medium = channel.local(kb)
    atlas = channel.join(medium, "CxDeploy", "AgentAtlas")
    boreas = channel.join(medium, "CxDeploy", "AgentBoreas")
    seen = []
    sub = boreas.subscribe(
        "(queries ?a ?q)", "CxDeploy", lambda e: seen.append((e, threading.current_thread()))
    )
    atlas.pose_query("WhichDb")
    [(event, thread)] = seen
    assert [c["sentence"] for c in event.added] == ["(queries AgentAtlas WhichDb)"]
    assert thread is threading.current_thread()
    channel.unsubscribe(sub)
    atlas.pose_query("WhichCache")
    channel.unsubscribe(sub)  # idempotent
    assert len(seen) == 1 and sub.running is False


def test_a_subscription_without_a_goal_sees_everything(kb):
    atlas = channel.join(channel.local(kb), "CxDeploy", "AgentAtlas")
    seen = []
    atlas.subscribe(None, None, seen.append)
    atlas.assert_("(ready Release)")
    assert len(seen) >= 1


def test_an_unwatchable_goal_is_refused_like_the_engines_watch(kb):
    atlas = channel.join(channel.local(kb), "CxDeploy", "AgentAtlas")
    with pytest.raises(Refused) as refusal:
        atlas.subscribe(["(p ?x)", "(q ?x)"], "CxDeploy", print)
    assert refusal.value.kind == "not-watchable"


def test_a_local_medium_has_no_cursor_feed(kb):
    medium = channel.local(kb)
    for call in (
        lambda: medium.open_feed("(p ?x)", "CxA"),
        lambda: medium.poll_feed("T", 0),
        lambda: medium.close_feed("T"),
    ):
        with pytest.raises(Refused) as refusal:
            call()
        assert refusal.value.kind == "koinii/no-wire-feed"


def test_a_wire_subscription_polls_on_its_own_named_thread(daemon):
    atlas, boreas = (
        channel.join(channel.wire(daemon.client()), "CxDeploy", f"Agent{name}")
        for name in ("Atlas", "Boreas")
    )
    seen = []
    sub = boreas.subscribe(
        "(queries ?a ?q)",
        "CxDeploy",
        lambda e: seen.append((e, threading.current_thread().name)),
        wait_ms=8000,
    )
    atlas.pose_query("WhichCacheProdClusterUses")
    assert wait_until(lambda: seen, timeout=8)
    event, thread_name = seen[0]
    assert thread_name == f"koinii-subscribe-{sub.token}"
    assert [c["sentence"] for c in event.added] == [
        "(queries AgentAtlas WhichCacheProdClusterUses)"
    ]
    assert event.added[0]["bindings"]["?q"] == koinii.Sym("WhichCacheProdClusterUses")
    sub.stop()
    assert sub.running is False
    sub.stop()  # idempotent


def test_a_subscription_is_forward_only(daemon_team):
    atlas, boreas = daemon_team["Atlas"], daemon_team["Boreas"]
    atlas.pose_query("Before")
    seen = []
    sub = boreas.subscribe("(queries ?a ?q)", "CxDeploy", seen.append, wait_ms=2000)
    atlas.pose_query("After")
    assert wait_until(lambda: seen)
    time.sleep(0.2)
    assert [c["sentence"] for e in seen for c in e.added] == ["(queries AgentAtlas After)"]
    assert [s["sentence"] for s in boreas.open_queries()] == [  # history comes from the KB
        "(queries AgentAtlas Before)",
        "(queries AgentAtlas After)",
    ]
    sub.stop()


def test_a_slow_callback_does_not_delay_other_agents_writes(daemon_team):
    atlas, boreas = daemon_team["Atlas"], daemon_team["Boreas"]
    entered = threading.Event()

    def slow(event):
        entered.set()
        time.sleep(3)

    sub = boreas.subscribe("(queries ?a ?q)", "CxDeploy", slow, wait_ms=2000)
    atlas.pose_query("First")
    assert entered.wait(5)
    started = time.monotonic()
    atlas.pose_query("Second")  # while Boreas's callback sleeps
    assert time.monotonic() - started < 2
    sub.stop()


def test_a_raising_callback_loses_only_its_own_event(daemon_team):
    atlas, boreas = daemon_team["Atlas"], daemon_team["Boreas"]
    delivered, errors = [], []

    def flaky(event):
        sentence = event.added[0]["sentence"]
        if "First" in sentence:
            raise RuntimeError("boom")
        delivered.append(sentence)

    sub = boreas.subscribe(
        "(queries ?a ?q)", "CxDeploy", flaky, wait_ms=2000, on_error=errors.append
    )
    atlas.pose_query("First")
    atlas.pose_query("Second")
    assert wait_until(lambda: delivered)
    assert delivered == ["(queries AgentAtlas Second)"]
    assert [str(e) for e in errors] == ["boom"]
    assert sub.running
    sub.stop()


def test_on_lagged_fires_with_the_dropped_count(start_daemon, wire):
    daemon = start_daemon("--ring-size", "4")
    atlas = wire(daemon, "AgentAtlas")
    boreas = wire(daemon, "AgentBoreas")
    gate = threading.Event()
    lagged = []
    first = []

    def hold_first(event):
        if not first:
            first.append(event)
            gate.wait(10)  # the loop is stuck here while the ring overflows

    sub = boreas.subscribe(
        "(queries ?a ?q)", "CxDeploy", hold_first, wait_ms=2000, on_lagged=lagged.append
    )
    atlas.pose_query("Q0")
    assert wait_until(lambda: first)
    for i in range(1, 11):
        atlas.pose_query(f"Q{i}")
    gate.set()
    assert wait_until(lambda: lagged)
    assert lagged == [6]  # 10 more events against a ring of 4
    sub.stop()


def test_an_outage_is_reported_once_and_the_subscription_waits_it_out(daemon_team, daemon):
    boreas = daemon_team["Boreas"]
    errors = []
    sub = boreas.subscribe(
        "(queries ?a ?q)", "CxDeploy", print, wait_ms=500, on_error=errors.append
    )
    daemon.kill()
    assert wait_until(lambda: errors, timeout=10)
    time.sleep(1.0)  # retrying, with backoff, quietly
    assert len(errors) == 1 and isinstance(errors[0], koinii.Unavailable)
    assert sub.running and sub.outages == 1
    started = time.monotonic()
    sub.stop()  # out of the backoff at once
    assert not sub.running and time.monotonic() - started < 2


def test_a_reaped_subscription_resumes_from_the_last_event_it_delivered(start_daemon, wire):
    daemon = start_daemon("--reap-after", "0.3")
    boreas = wire(daemon, "AgentBoreas")
    errors = []
    seen = []
    gate = threading.Event()
    atlas = wire(daemon, "AgentAtlas")

    def slow(event):
        seen.append(event)
        gate.wait(3)

    sub = boreas.subscribe("(queries ?a ?q)", "CxDeploy", slow, wait_ms=100, on_error=errors.append)
    atlas.pose_query("Q1")  # the callback holds the loop past the reaping age
    assert wait_until(lambda: seen, timeout=10)  # (else one poll may bring Q2 with Q1)
    atlas.pose_query("Q2")  # written while nobody polls: replayed on resume
    assert wait_until(lambda: not boreas.store.watchers(), timeout=10)  # reaped
    gate.set()
    assert wait_until(lambda: len(seen) == 2, timeout=10)
    assert [e.added[0]["sentence"] for e in seen] == [
        "(queries AgentAtlas Q1)",
        "(queries AgentAtlas Q2)",
    ]
    assert [r.kind for r in errors] == ["unknown-subscription"]  # the outage, once
    assert sub.running
    sub.stop()
