"""Catch-up: snapshot plus tail over the wire feed and the durable change log
(disputes.md §4; upstream-scenarios §8).

The real-daemon tests pin the happy paths and recoveries end to end. The failure paths
use `ScriptedPeer`, which stands in for a remote peer misbehaving (a proxy hanging up, a
feed that never stops lagging): it replaces the far side of the wire, not our code."""

import json
import os
import threading

import pytest

import koinii
from koinii import Event, Refused, Sym, Unavailable
from koinii.channel import agent as channel
from koinii.channel import catchup
from koinii.channel.catchup import FileCursorStore, MemoryCursorStore
from tests.conftest import refused

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

GOAL = "(queries ?a ?q)"


def q(name):
    return (Sym("queries"), Sym("AgentAva"), Sym(name))


def join(daemon, agent):
    return channel.join(channel.wire(daemon.client()), "CxDeploy", agent)


# --- over a real daemon ---------------------------------------------------------------------------


def test_a_consumer_resumes_from_its_stored_cursor(daemon):
    ava, boreas = join(daemon, "AgentAva"), join(daemon, "AgentBoreas")
    store = MemoryCursorStore()
    consumer = catchup.open(boreas, GOAL, "CxDeploy", store)
    assert catchup.sync(consumer) == frozenset()
    ava.pose_query("Q1")
    ava.pose_query("Q2")
    view = catchup.sync(consumer)
    assert view == {q("Q1"), q("Q2")} == catchup.snapshot(boreas, GOAL, "CxDeploy")
    assert consumer.snapshots == 1  # the bootstrap; the rest was tailed

    again = catchup.open(boreas, GOAL, "CxDeploy", store, initial_view=view)
    ava.pose_query("Q3")
    assert catchup.sync(again) == {q("Q1"), q("Q2"), q("Q3")}
    assert again.snapshots == 0 and catchup.view_of(again) == {q("Q1"), q("Q2"), q("Q3")}


def test_a_lagging_consumer_reaches_the_full_view_by_resnapshotting(start_daemon):
    daemon = start_daemon("--ring-size", "4")
    ava, boreas = join(daemon, "AgentAva"), join(daemon, "AgentBoreas")
    consumer = catchup.open(boreas, GOAL, "CxDeploy", MemoryCursorStore())
    catchup.sync(consumer)
    for i in range(10):
        ava.pose_query(f"Over{i}")
    view = catchup.sync(consumer)
    assert len(view) == 10 and view == catchup.snapshot(boreas, GOAL, "CxDeploy")
    assert consumer.snapshots == 2  # bootstrap, then the lag


def test_tailing_and_resnapshotting_reach_the_same_view(start_daemon):
    daemon = start_daemon("--ring-size", "4")
    ava, boreas, ciel = (join(daemon, a) for a in ("AgentAva", "AgentBoreas", "AgentCiel"))
    tailer = catchup.open(boreas, GOAL, "CxDeploy", MemoryCursorStore())
    snapshotter = catchup.open(ciel, GOAL, "CxDeploy", MemoryCursorStore())
    catchup.sync(tailer)
    catchup.sync(snapshotter)
    for i in range(10):
        ava.pose_query(f"Q{i}")
        catchup.sync(tailer)
    assert len(catchup.view_of(tailer)) == 10
    assert catchup.sync(snapshotter) == catchup.view_of(tailer)
    assert (tailer.snapshots, snapshotter.snapshots) == (1, 2)


def test_an_agent_restarted_with_a_file_cursor_store_resumes(daemon, tmp_path):
    cursor_file = tmp_path / "boreas.cursor"
    ava = join(daemon, "AgentAva")
    first = catchup.open(
        join(daemon, "AgentBoreas"), GOAL, "CxDeploy", FileCursorStore(cursor_file)
    )
    ava.pose_query("Q1")
    kept = sorted(koinii.show(s) for s in catchup.sync(first))  # the agent keeps its view
    assert json.loads(cursor_file.read_text())["cursor"] >= 0
    ava.pose_query("Q2")  # while the agent is down

    # a new process in all but name: new connection, new handle, new store object
    boreas = join(daemon, "AgentBoreas")
    restarted = catchup.open(
        boreas, GOAL, "CxDeploy", FileCursorStore(cursor_file), initial_view=kept
    )
    assert catchup.view_of(restarted) == {q("Q1")}
    assert catchup.sync(restarted) == {q("Q1"), q("Q2")}
    assert restarted.snapshots == 0


@pytest.mark.backends("sqlite", "postgres")
def test_after_a_daemon_restart_the_durable_tail_resumes_without_a_snapshot(start_daemon):
    daemon = start_daemon()
    store = MemoryCursorStore()
    consumer = catchup.open(join(daemon, "AgentBoreas"), GOAL, "CxDeploy", store, durable=True)
    ava = join(daemon, "AgentAva")
    ava.pose_query("Q1")
    view = catchup.sync(consumer)
    assert view == {q("Q1")} and set(store.read_position()) == {"seq"}
    ava.pose_query("Q2")
    daemon.restart()  # the daemon's subscriptions are gone; its change log is not

    join(daemon, "AgentAva").pose_query("Q3")
    resumed = catchup.open(
        join(daemon, "AgentBoreas"), GOAL, "CxDeploy", store, initial_view=view, durable=True
    )
    assert catchup.sync(resumed) == {q("Q1"), q("Q2"), q("Q3")}
    assert resumed.snapshots == 0
    assert store.read_position()["seq"] == daemon.client().seq


def test_after_a_daemon_restart_the_feed_consumer_reopens_and_resnapshots(start_daemon):
    daemon = start_daemon()
    store = MemoryCursorStore()
    consumer = catchup.open(join(daemon, "AgentBoreas"), GOAL, "CxDeploy", store)
    join(daemon, "AgentAva").pose_query("Q1")
    view = catchup.sync(consumer)
    old_token = store.read_position()["token"]
    daemon.restart()
    join(daemon, "AgentAva").pose_query("Q2")
    resumed = catchup.open(join(daemon, "AgentBoreas"), GOAL, "CxDeploy", store, initial_view=view)
    assert catchup.sync(resumed) == {q("Q1"), q("Q2")}
    assert resumed.snapshots == 1 and store.read_position()["token"] != old_token


# --- the durable tail in process ------------------------------------------------------------


@pytest.fixture
def team(kb):
    medium = channel.local(kb)
    return (
        kb,
        channel.join(medium, "CxDeploy", "AgentAva"),
        channel.join(medium, "CxDeploy", "AgentBoreas"),
    )


def test_the_durable_tail_applies_additions_and_removals(team):
    kb, ava, boreas = team
    consumer = catchup.open(boreas, GOAL, "CxDeploy", MemoryCursorStore(), durable=True)
    first = ava.pose_query("Q1")
    assert catchup.sync(consumer) == {q("Q1")}
    ava.pose_query("Q2")
    kb.retract(first)
    kb.assert_("(queries AgentAva Elsewhere)", "CxOther")  # not in view of CxDeploy
    assert catchup.sync(consumer) == {q("Q2")} == catchup.snapshot(kb, GOAL, "CxDeploy")
    assert consumer.snapshots == 1


@pytest.mark.backends("sqlite", "postgres")
def test_the_durable_tail_rereads_when_the_log_was_compacted(team):
    kb, ava, boreas = team
    consumer = catchup.open(boreas, GOAL, "CxDeploy", MemoryCursorStore(), durable=True)
    catchup.sync(consumer)
    ava.pose_query("Q1")
    kb.compact_log(0)
    assert catchup.sync(consumer) == {q("Q1")}
    assert consumer.snapshots == 2


def test_the_durable_tail_rereads_when_the_hierarchy_changes(team):
    kb, _, boreas = team
    consumer = catchup.open(boreas, GOAL, "CxDeploy", MemoryCursorStore(), durable=True)
    catchup.sync(consumer)
    kb.assert_("(queries AgentCiel Q9)", "CxCiel")  # not yet seen by the channel
    assert catchup.sync(consumer) == frozenset()
    channel.join(channel.local(kb), "CxDeploy", "AgentCiel")  # now it is
    assert catchup.sync(consumer) == {(Sym("queries"), Sym("AgentCiel"), Sym("Q9"))}


def test_a_local_medium_has_no_feed_to_tail(team):
    _, _, boreas = team
    consumer = catchup.open(boreas, GOAL, "CxDeploy", MemoryCursorStore())
    assert refused(lambda: catchup.sync(consumer)).kind == "koinii/no-wire-feed"


# --- cursor stores ------------------------------------------------------------------------------


def test_a_file_cursor_store_round_trips_and_replaces_atomically(tmp_path):
    path = tmp_path / "agent.cursor"
    store = FileCursorStore(path)
    assert store.read_position() is None
    store.write_position({"token": "w1", "cursor": 3})
    store.write_position({"token": "w1", "cursor": 5})
    assert FileCursorStore(path).read_position() == {"token": "w1", "cursor": 5}
    assert os.listdir(tmp_path) == ["agent.cursor"]  # no temporary file left behind


def test_a_broken_cursor_file_is_refused_by_name(tmp_path):
    path = tmp_path / "agent.cursor"
    path.write_text("{not json")
    assert refused(lambda: FileCursorStore(path).read_position()).kind == (
        "koinii/cursor-store-error"
    )
    path.write_text("[1, 2]")
    assert refused(lambda: FileCursorStore(path).read_position()).kind == (
        "koinii/cursor-store-error"
    )
    missing = FileCursorStore(tmp_path / "no-such-dir" / "agent.cursor")
    refusal = refused(lambda: missing.write_position({"seq": 1}))
    assert refusal.kind == "koinii/cursor-store-error"


# --- a scripted peer: the failure paths ------------------------------------------------------


class ScriptedPeer:
    """The far side of the wire, scripted: what each poll answers (a reply dict, or an
    exception to raise), what the channel's state is when read (a list of views, the last
    one repeating), and a record of opens, closes, polls and reads."""

    def __init__(self, polls=(), truths=((),), repeat=None):
        self.medium = self
        self.polls = list(polls)
        self.repeat = repeat  # answered once the script runs out
        self.truths = [list(t) for t in truths]
        self.opened, self.closed = [], []
        self.poll_count = self.reads = 0

    def query(self, goal, ctx):
        truth = self.truths[min(self.reads, len(self.truths) - 1)]
        self.reads += 1
        return [{"?a": Sym("AgentAva"), "?q": Sym(name)} for name in truth]

    def open_feed(self, goal, ctx):
        if len(self.opened) >= 50:
            raise AssertionError("runaway: more than 50 opens")
        self.opened.append(f"T{len(self.opened) + 1}")
        return {"token": self.opened[-1], "cursor": 0}

    def poll_feed(self, token, cursor, wait_ms=0):
        self.poll_count += 1
        answer = self.polls.pop(0) if self.polls else self.repeat
        if callable(answer):
            answer = answer(self.poll_count)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close_feed(self, token):
        self.closed.append(token)
        return True


def drained(cursor, events=(), lagged=0):
    return {"events": list(events), "cursor": cursor, "lagged": lagged}


def added(*names, removed=()):
    return Event(
        1,
        [{"sentence": koinii.show(q(n))} for n in names],
        [{"sentence": koinii.show(q(n))} for n in removed],
    )


def consumer_at(peer, position, view=()):
    return catchup.open(peer, GOAL, "CxDeploy", MemoryCursorStore(position), initial_view=view)


def test_an_untyped_poll_failure_is_a_feed_error_and_changes_nothing():
    peer = ScriptedPeer(polls=[RuntimeError("the proxy hung up")])
    consumer = consumer_at(peer, {"token": "T", "cursor": 7}, [q("Q1")])
    refusal = refused(lambda: catchup.sync(consumer))
    assert refusal.kind == "koinii/feed-error" and refusal.data["cause_kind"] is None
    assert str(refusal.__cause__) == "the proxy hung up"
    assert consumer.store.read_position() == {"token": "T", "cursor": 7}
    assert catchup.view_of(consumer) == {q("Q1")}


def test_a_typed_poll_failure_keeps_its_kind():
    for failure, kind in (
        (Refused("daemon-error", "the daemon broke", {}), "daemon-error"),
        (Refused("bad-cursor", "ahead of delivered", {}), "bad-cursor"),
        (Unavailable("cannot reach the daemon"), None),
    ):
        consumer = consumer_at(ScriptedPeer(polls=[failure]), {"token": "T", "cursor": 7})
        refusal = refused(lambda c=consumer: catchup.sync(c))
        assert (refusal.kind, refusal.data["cause_kind"]) == ("koinii/feed-error", kind)
        assert refusal.__cause__ is failure
        assert consumer.store.read_position() == {"token": "T", "cursor": 7}


def test_two_threads_driving_one_consumer_do_not_corrupt_its_view():
    """Both threads start at once with no stored position. Without the lock, both would
    bootstrap and the second snapshot (empty) would land over the first's applied batch."""
    peer = ScriptedPeer(polls=[drained(1, [added("Q1")])], repeat=drained(1))
    consumer = catchup.open(peer, GOAL, "CxDeploy", MemoryCursorStore())
    start = threading.Barrier(2)
    results = []

    def drive():
        start.wait()
        results.append(catchup.sync(consumer))

    threads = [threading.Thread(target=drive) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == [{q("Q1")}, {q("Q1")}]
    assert catchup.view_of(consumer) == {q("Q1")}
    assert (len(peer.opened), peer.reads) == (1, 1)  # one bootstrap, one snapshot


def test_a_replayed_batch_converges_on_the_reread():
    batch = added("Q1", "Q2", removed=["Q1"])
    peer = ScriptedPeer(
        polls=[drained(1, [batch]), drained(2, [batch]), drained(2)], truths=[["Q2"]]
    )
    consumer = catchup.open(peer, GOAL, "CxDeploy", MemoryCursorStore())
    assert catchup.sync(consumer) == {q("Q2")} == catchup.snapshot(peer, GOAL, "CxDeploy")
    assert peer.poll_count == 3


def test_a_lag_reported_again_in_one_pass_resnapshots_again():
    peer = ScriptedPeer(
        repeat=lambda n: drained(n, lagged=4 - n) if n <= 4 else None,
        truths=[["Q1"], ["Q1", "Q2"]],
    )
    consumer = consumer_at(peer, {"token": "T", "cursor": 7})
    assert catchup.sync(consumer) == {q("Q1"), q("Q2")}
    assert peer.reads > 1 and peer.poll_count == 4
    assert consumer.store.read_position() == {"token": "T", "cursor": 4}


def test_a_feed_that_never_stops_lagging_is_thrashing():
    peer = ScriptedPeer(repeat=drained(9, lagged=5))
    consumer = consumer_at(peer, {"token": "T", "cursor": 7})
    refusal = refused(lambda: catchup.sync(consumer))
    assert refusal.kind == "koinii/catchup-thrashing" and "not keeping up" in refusal.message
    assert refusal.data == {"condition": "lagged", "snapshots": 8, "token": "T"}
    assert consumer.store.read_position() == {"token": "T", "cursor": 7}


def test_a_subscription_reaped_at_every_poll_is_thrashing():
    peer = ScriptedPeer(repeat=Refused("unknown-subscription", "gone", {}))
    consumer = consumer_at(peer, {"token": "T", "cursor": 7})
    refusal = refused(lambda: catchup.sync(consumer))
    assert refusal.kind == "koinii/catchup-thrashing"
    assert refusal.data["condition"] == "unknown-subscription"
    assert refusal.__cause__.kind == "unknown-subscription"
    assert len(peer.opened) == 8 == refusal.data["snapshots"]
    assert consumer.store.read_position() == {"token": "T", "cursor": 7}
    assert peer.closed == ["T8"]  # the last one it opened, which nothing names


def test_lag_and_reaping_share_one_budget():
    def alternate(n):
        return Refused("unknown-subscription", "gone", {}) if n % 2 else drained(n, lagged=1)

    peer = ScriptedPeer(repeat=alternate)
    refusal = refused(lambda: catchup.sync(consumer_at(peer, {"token": "T", "cursor": 7})))
    assert refusal.kind == "koinii/catchup-thrashing" and refusal.data["snapshots"] == 8


def test_a_failed_bootstrap_closes_the_subscription_it_opened():
    peer = ScriptedPeer(repeat=TimeoutError("timed out"))
    consumer = catchup.open(peer, GOAL, "CxDeploy", MemoryCursorStore())
    for _ in range(3):
        assert refused(lambda: catchup.sync(consumer)).kind == "koinii/feed-error"
    assert peer.closed == ["T1", "T2", "T3"]
    assert consumer.store.read_position() is None

    stored = ScriptedPeer(repeat=TimeoutError("timed out"))
    refused(lambda: catchup.sync(consumer_at(stored, {"token": "T", "cursor": 7})))
    assert stored.closed == []


def test_a_reply_without_a_cursor_is_refused():
    for bad in (None, -1, "7", 1.5, True):
        peer = ScriptedPeer(polls=[{"events": [], "cursor": bad}])
        consumer = consumer_at(peer, {"token": "T", "cursor": 7}, [q("Q1")])
        refusal = refused(lambda c=consumer: catchup.sync(c))
        assert refusal.kind == "koinii/no-cursor"
        assert refusal.data == {"token": "T", "cursor": bad}
        assert consumer.store.read_position() == {"token": "T", "cursor": 7}
        assert catchup.view_of(consumer) == {q("Q1")}


def test_a_stored_position_without_a_cursor_is_refused():
    for position in ({"token": "T"}, {"token": "T", "cursor": -3}, {"cursor": 2}):
        refusal = refused(lambda p=position: catchup.sync(consumer_at(ScriptedPeer(), p)))
        assert refusal.kind == "koinii/no-cursor"
