"""The channel's roster and the wrap queue's long poll hold nobody, and are refused by name
past their budget; over the memory store, whose record tables cannot leave the loop,
their reads keep the budget (issue 37, "budgets for everything a request does";
docs/daemon.md, bounded work). Over a real daemon; bounds are generous: they tell seconds
from milliseconds, as in test_pages_off_the_loop.py (benchmarks/resilience.py measures
them closely)."""

from __future__ import annotations

import threading

import httpx
import pytest

import koinii
from koinii import channel
from koinii.channel.roster import roster
from koinii.errors import Refused
from koinii.operations import invoker
from koinii.sessions import SessionStore
from tests.test_bounded_work import Prober, at_once

pytestmark = pytest.mark.backends("sqlite")


def _at_once(daemon, route: str, body: dict, callers: int = 4) -> tuple[Prober, list[bytes]]:
    """POST `body` to `route` from `callers` clients at once, the prober timing another
    client meanwhile; the replies' first bytes (not decoded: they may be megabytes)."""

    def call() -> bytes:
        return httpx.post(f"{daemon.url}/v1/{route}", json=body, timeout=120).content[:300]

    return at_once(daemon, call, callers)


def _team_of(db: str, members: int, sessions: int) -> None:
    """`members` agents on CxTeam, `sessions` sessions among them."""
    with koinii.open_kb(db) as kb, kb.budget(600):
        team = channel.local(kb)
        store = SessionStore(kb)
        for m in range(members):
            channel.join(team, "CxTeam", f"AgentM{m}")
            with kb.attributed_to(f"AgentM{m}"):
                recorder = store.recorder(batch_events=1_000)
                for i in range(sessions // members):
                    recorder.start_session(title=f"session {i} of AgentM{m}")
                recorder.flush()


def test_a_big_roster_holds_nobody(start_daemon, new_location):
    """300 members and 20,000 sessions: the roster read each member's newest session with
    a statement of its own, each reading every session, on the loop — 0.7 s of
    everyone's time per roster here; now the members are a read of the KB, their
    sessions one statement on the records thread."""
    db = new_location()
    _team_of(db, members=300, sessions=20_000)
    daemon = start_daemon(db=db)
    prober, answers = _at_once(daemon, "conversation/roster", {"channel": "CxTeam"})
    assert len(answers) == 4 and all(b'"ok":true' in answer for answer in answers), answers
    # on the loop: 2-3 s of waiting for the prober
    assert len(prober.times) > 20 and prober.worst < 1.0, prober.worst
    found = daemon.client(timeout=60).invoke("conversation.roster", channel="CxTeam")
    assert len(found["members"]) == 300
    assert all(m["session"] is not None for m in found["members"])


def test_a_roster_past_its_budget_is_refused_by_name(start_daemon, new_location):
    """It ran as a domain's write, with no budget at all; now both its parts share the
    read budget (here the daemon's, lowered to 0.1 ms: with the members' sessions found by
    owner, this roster of 100 takes about 0.5 ms in process)."""
    db = new_location()
    _team_of(db, members=100, sessions=5_000)
    client = start_daemon("--query-budget", "0.0001", db=db).client(timeout=60)
    with pytest.raises(Refused) as caught:
        client.invoke("conversation.roster", channel="CxTeam")
    assert caught.value.kind == "budget-exhausted"
    assert caught.value.data["budget_s"] == 0.0001


def test_the_roster_finds_its_members_sessions_by_owner_not_by_reading_every_one(
    start_daemon, new_location
):
    """The members' newest sessions were one statement that ranked every session by
    owner: 30,000 sessions of another agent's cost the three members' roster 0.07 s,
    past a budget of 0.02 s (as 250,000 pass the default 0.5 s); now each member's is a
    probe of the index by owner (sessions schema version 5)."""
    db = new_location()
    _team_of(db, members=3, sessions=3)
    with koinii.open_kb(db) as kb, kb.budget(600), kb.attributed_to("AgentElsewhere"):
        recorder = SessionStore(kb).recorder(batch_events=1_000)
        for i in range(30_000):
            recorder.start_session(title=f"session {i} of AgentElsewhere")
        recorder.flush()
    client = start_daemon("--query-budget", "0.02", db=db).client(timeout=60)
    found = client.invoke("conversation.roster", channel="CxTeam")
    assert [m["agent"] for m in found["members"]] == ["AgentM0", "AgentM1", "AgentM2"]
    assert all(m["session"] is not None for m in found["members"])


@pytest.mark.backends("sqlite", "postgres")
def test_each_members_newest_session_comes_from_the_index_by_owner(new_location):
    """Sessions schema version 5 indexes the sessions by owner, on both stores, and the
    roster finds each member's newest session (and its parent) through it."""
    with koinii.open_kb(new_location()) as kb:
        team = channel.local(kb)
        recorder = SessionStore(kb).recorder()
        sessions = {}
        for agent in ("AgentAtlas", "AgentBoreas"):
            channel.join(team, "CxTeam", agent)
            with kb.attributed_to(agent):
                older = recorder.start_session(title="older", created_at="2026-01-01T00:00:00.000Z")
                sessions[agent] = recorder.start_session(
                    title="newer", parent_session_id=older, created_at="2026-01-02T00:00:00.000Z"
                )
                recorder.flush()
                sessions[agent] = (sessions[agent], older)

        def index(db) -> list:
            if getattr(db, "dialect", "sqlite") == "postgres":
                sql = "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND "
                return db.execute(sql + "indexname = 'session_owner'").fetchall()
            sql = "SELECT sql FROM sqlite_master WHERE name = 'session_owner'"
            return db.execute(sql).fetchall()

        [(made,)] = kb.read_records(index)
        assert "(owner, modified_at, n)" in made
        members = roster(kb, "CxTeam")["members"]
        assert {m["agent"]: (m["session"], m["coordinator_session"]) for m in members} == sessions


NOTES = [(f"(note N{i})", "CxAtlas") for i in range(10_000)]


def file_big_wraps(call, wraps: int) -> None:
    """`wraps` wraps into the session s-lead, of 10,000 ids each (the cap: the first
    10,000 handles), through `call` (an `invoker`)."""
    for w in range(wraps):
        call(
            "wraps.add",
            wrap_id=f"w-{w}",
            created_ids=list(range(1, 10_001)),
            parent_session_id="s-lead",
            agent_id="AgentAtlas",
            session_id=f"s-{w}",
        )


def test_a_wait_for_many_big_wraps_holds_nobody(start_daemon, new_location):
    """1,000 wraps of 10,000 ids each (the cap): `wraps.wait` read and encoded them on
    the loop, as `wraps.list` did, and again after every write anyone made while it
    waited; now each look is a read of the records on a thread, past its budget refused
    by name — and a wait still wakes for the wrap it waits for."""
    db = new_location()
    with koinii.open_kb(db) as kb, kb.budget(600):
        kb.edit(add=NOTES)
        file_big_wraps(invoker(kb), 1_000)
    daemon = start_daemon(db=db)
    body = {"parent_session_id": "s-lead", "timeout_s": 5}
    prober, answers = _at_once(daemon, "wraps/wait", body, callers=2)
    assert len(answers) == 2
    assert all(b'"kind":"budget-exhausted"' in answer for answer in answers), answers
    assert len(prober.times) > 20 and prober.worst < 1.0, prober.worst
    client = daemon.client(timeout=60)
    woken: list = []
    waiter = threading.Thread(
        target=lambda: woken.append(
            client.invoke("wraps.wait", parent_session_id="s-next", timeout_s=20)
        )
    )
    waiter.start()
    daemon.client().invoke("wraps.add", wrap_id="w-next", parent_session_id="s-next")
    waiter.join(30)
    assert [w["wrap_id"] for w in woken[0]] == ["w-next"]


def test_record_reads_over_the_memory_store_keep_their_budget(start_daemon):
    """The memory store keeps its record tables in one connection's memory: a read of
    them cannot leave the loop, and ran there with no budget at all; now its statements
    share the read budget (here the daemon's, lowered to 2 ms), as on a thread."""
    daemon = start_daemon("--query-budget", "0.002", db=":memory:")
    client = daemon.client(timeout=60)
    with client.budget(30):  # an operator's (the open daemon's callers are)
        client.edit(add=NOTES)
    file_big_wraps(invoker(client), 200)
    for name, fields in [
        ("wraps.list", {}),
        ("wraps.wait", {"parent_session_id": "s-lead", "timeout_s": 1}),
    ]:
        with pytest.raises(Refused) as caught:
            client.invoke(name, **fields)
        assert caught.value.kind == "budget-exhausted", name
        assert caught.value.data == {"budget_s": 0.002}
    # the store unharmed: its connection no longer stopped past the budget (a write), and
    # a narrow read answers within it
    client.invoke("wraps.add", wrap_id="w-last", parent_session_id="s-last")
    [last] = client.invoke("wraps.list", parent_session_id="s-last")
    assert last["wrap_id"] == "w-last"
