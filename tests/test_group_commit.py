"""Group commit: writes that arrive together become durable together, or not at all.

The failure cases make the real store refuse the commit: a trigger on the change log
raises, as a full disk or a broken connection would.
"""

import sqlite3
import threading

import koinii
from koinii import Refused
from koinii.terms import Sym

from .conftest import refused

CTX = "CxGroup"


def refuse_log_writes(location: str, refuse: bool = True) -> None:
    """Make every change-log insert of the store at `location` fail (or stop failing)."""
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            if refuse:
                conn.execute(
                    "CREATE FUNCTION refuse_log() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'the disk is full'; END $$"
                )
                conn.execute(
                    "CREATE TRIGGER refuse_log BEFORE INSERT ON change_log "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_log()"
                )
            else:
                conn.execute("DROP TRIGGER refuse_log ON change_log")
                conn.execute("DROP FUNCTION refuse_log()")
        return
    with sqlite3.connect(location, isolation_level=None) as conn:
        if refuse:
            conn.execute(
                "CREATE TRIGGER refuse_log BEFORE INSERT ON change_log "
                "BEGIN SELECT RAISE(ABORT, 'the disk is full'); END"
            )
        else:
            conn.execute("DROP TRIGGER refuse_log")


def log_seqs(kb) -> list[int]:
    return [e["seq"] for e in kb.changes(0, limit=10_000)["entries"]]


def test_a_group_commits_its_writes_together_then_publishes_them(new_location):
    location = new_location()
    with koinii.open_kb(location) as kb:
        events, commits = [], []
        kb.watch(events.append)
        kb.on_commit(lambda seq, op: commits.append(seq))
        durable = log_seqs(kb)

        kb.begin_group()
        handles = [kb.assert_(f"(likes Ann Item{i})", CTX) for i in range(3)]
        assert len(kb.query("(likes Ann ?x)", CTX)) == 3  # later reads see them at once
        assert events == [] and commits == []  # nothing is published before it is durable
        assert log_seqs(kb) == durable

        assert kb.commit_group() == 3
        assert [e.seq for e in events] == commits == [durable[-1] + n for n in (1, 2, 3)]
        assert [e.added[0]["handle"] for e in events] == handles
        assert kb.commit_group() == 0  # no group open: nothing to do

    with koinii.open_kb(location) as reopened:
        assert all(reopened.sentex(h).believed for h in handles)
        assert log_seqs(reopened)[-3:] == commits


def test_a_group_that_cannot_commit_is_undone_entirely(new_location):
    location = new_location()
    with koinii.open_kb(location) as kb:
        kept = kb.assert_("(likes Ann Tea)", CTX)
        seq = kb.seq
        events = []
        kb.watch(events.append)
        refuse_log_writes(location)

        kb.begin_group()
        added = kb.assert_("(likes Ann Coffee)", CTX)
        kb.retract(kept)
        failed = refused(kb.commit_group)
        assert failed.kind == "store-error" and "disk is full" in failed.message
        assert kb.seq == seq and events == []
        assert kb.sentex(added) is None and kb.sentex(kept).believed

        refuse_log_writes(location, refuse=False)
        later = kb.assert_("(likes Ann Juice)", CTX)
        assert later > added  # a handle the failed group took is never handed out again

    with koinii.open_kb(location) as reopened:
        assert reopened.sentex(added) is None
        assert reopened.sentex(kept).believed and reopened.sentex(later).believed


def test_a_refused_write_in_a_group_undoes_only_itself(new_location):
    location = new_location()
    with koinii.open_kb(location) as kb:
        kb.begin_group()
        first = kb.assert_("(likes Ann Tea)", CTX)
        refused(lambda: kb.assert_("(likes Ann", CTX))
        refused(lambda: kb.assert_("(likes ?who Tea)", "NotAContext"))
        second = kb.assert_("(likes Ann Coffee)", CTX)
        assert kb.commit_group() == 2
    with koinii.open_kb(location) as reopened:
        assert reopened.sentex(first).believed and reopened.sentex(second).believed


def test_what_writes_the_store_at_once_is_refused_inside_a_group(kb):
    kb.begin_group()
    for call in (
        lambda: kb.compact_log(10),
        lambda: kb.ensure_schema("example", ["CREATE TABLE example (n INTEGER)"]),
        lambda: kb.transact("example.op", lambda db, handles: None),
        kb.begin_group,
    ):
        assert refused(call).kind == "group-open"
    kb.commit_group()
    assert kb.compact_log(10) >= 0  # outside a group, each works again


def test_closing_commits_an_open_group(new_location):
    location = new_location()
    with koinii.open_kb(location) as kb:
        kb.begin_group()
        handle = kb.assert_("(likes Ann Tea)", CTX)
    with koinii.open_kb(location) as reopened:
        assert reopened.sentex(handle).believed


def test_the_daemon_refuses_each_request_of_a_group_that_cannot_commit(start_daemon, new_location):
    location = new_location()
    daemon = start_daemon(db=location)
    with daemon.client() as client:
        client.assert_("(likes Ann Tea)", CTX)
    refuse_log_writes(location)

    outcomes: list = []

    def write(n: int) -> None:
        with daemon.client() as client:
            for i in range(5):
                try:
                    outcomes.append(client.assert_(f"(likes Writer{n} Item{i})", CTX))
                except Refused as refusal:
                    outcomes.append(refusal)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert len(outcomes) == 30
    assert all(isinstance(o, Refused) and o.kind == "store-error" for o in outcomes)
    # a write with no company in flight commits alone; six writers in flight share groups
    assert any(o.data.get("group_commit") for o in outcomes)
    refuse_log_writes(location, refuse=False)
    with daemon.client() as client:
        assert client.query("(likes ?who ?what)", CTX) == [
            {"?who": Sym("Ann"), "?what": Sym("Tea")}
        ]
        assert client.assert_("(likes Ann Coffee)", CTX) > 0


def test_concurrent_writers_over_the_wire_all_land_once(daemon):
    writers = 8
    acknowledged: list[tuple[int, str]] = []

    def write(n: int) -> None:
        with daemon.client() as client:
            for i in range(40):
                sentence = f"(likes Writer{n} Item{i})"
                acknowledged.append((client.assert_(sentence, CTX), sentence))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    daemon.stop()
    with koinii.open_kb(daemon.db) as kb:
        assert len({h for h, _ in acknowledged}) == writers * 40
        assert all(kb.sentex(h).text == s for h, s in acknowledged)
        seqs = log_seqs(kb)
        assert seqs == sorted(set(seqs))  # one entry per write, in seq order
