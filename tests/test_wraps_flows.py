"""The flows of wraps.md §2 — wrap_session, permeate — and waiting for wraps (§1 wait)."""

import threading
import time

import pytest

from koinii import Refused
from koinii.channel import agent as channel
from koinii.operations import invoker
from koinii.wraps import WrapQueue, coordinate, permeate, queue, wrap_session
from tests.conftest import refused

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

SESSION = dict(session_id="session:ling-1", parent_session_id="session:coord-a")


def memory_of(store, agent="?a"):
    """Every memory entry stored anywhere, as text."""
    return sorted(
        s.text
        for predicate in ("memoryNote", "memoryDecision", "memoryConvention")
        for s in store.sentexes_matching(f"({predicate} {agent} ?text)", "?ctx")
    )


@pytest.fixture
def team(kb):
    medium = channel.local(kb)
    return {name: channel.join(medium, "CxHive", name) for name in ("AgentLingA", "AgentCoordA")}


# --- wrap_session -------------------------------------------------------------------------


def test_wrap_session_writes_the_entries_in_the_agents_context_and_files_the_wrap(kb, team):
    wrap = wrap_session(
        team["AgentLingA"],
        **SESSION,
        project_id="hive:api",
        notes=["cursor pagination", "rate limits are per token"],
        decisions=["keep v1 routes"],
        conventions=["snake_case JSON"],
    )
    assert wrap["wrap_id"].startswith("wrap-") and wrap["processed"] is False
    assert wrap["agent_id"] == "AgentLingA" and wrap["depth"] == 1
    assert wrap["stats"] == {"notes": 2, "decisions": 1, "conventions": 1}
    entries = [kb.sentex(h) for h in wrap["created_ids"]]
    assert [e.text for e in entries] == [
        '(memoryNote AgentLingA "cursor pagination")',
        '(memoryNote AgentLingA "rate limits are per token")',
        '(memoryDecision AgentLingA "keep v1 routes")',
        '(memoryConvention AgentLingA "snake_case JSON")',
    ]
    assert {e.context for e in entries} == {"CxLingA"}
    assert {e.provenance["creator"] for e in entries} == {"AgentLingA"}
    assert WrapQueue(kb).get_unprocessed_wraps_for_session("session:coord-a") == [wrap]
    # one write: the entries and the wrap took one seq
    [entry] = kb.changes(since=kb.seq - 1)["entries"]
    assert entry["op"] == "wraps.wrap_session" and len(entry["added"]) == 4


@pytest.mark.backends("sqlite", "postgres")
def test_a_failure_between_the_entries_and_the_wrap_leaves_neither(kb, team, monkeypatch):
    def broken(connection, wrap):
        connection.execute("SELECT 1")  # the entries are in the transaction by now
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(queue, "file_wrap", broken)
    seq = kb.seq
    with pytest.raises(RuntimeError, match="disk on fire"):
        wrap_session(team["AgentLingA"], **SESSION, notes=["lost"], decisions=["also lost"])
    assert memory_of(kb) == []
    assert WrapQueue(kb).wraps(include_processed=True) == []
    assert kb.seq == seq


@pytest.mark.backends("sqlite", "postgres")
def test_reusing_another_agents_wrap_id_is_refused_inside_the_write_and_leaves_neither(kb, team):
    first = wrap_session(team["AgentLingA"], **SESSION, notes=["mine"], wrap_id="wrap-1")
    seq = kb.seq
    refusal = refused(
        lambda: wrap_session(team["AgentCoordA"], **SESSION, notes=["theirs"], wrap_id="wrap-1")
    )
    assert refusal.kind == "koinii/creator-mismatch"
    assert refusal.data == {"agent": "AgentCoordA", "creator": "AgentLingA", "wrap_id": "wrap-1"}
    assert memory_of(kb) == ['(memoryNote AgentLingA "mine")']
    assert WrapQueue(kb).get_unprocessed_wraps() == [first]
    assert kb.seq == seq


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"depth": -1}, "bad-wrap"),
        ({"project_id": ""}, "bad-wrap"),
        ({"notes": ["fine", 3]}, "bad-wrap"),
        ({"decisions": "one string, not a list"}, "bad-wrap"),
        ({"wrap_id": ""}, "bad-wrap"),
        ({"notes": ["x" * 70_000]}, "shape"),  # refused by the engine, mid-write
    ],
)
def test_a_bad_wrap_session_writes_nothing(kb, team, fields, kind):
    seq = kb.seq
    refusal = refused(lambda: wrap_session(team["AgentLingA"], **{**SESSION, **fields}))
    assert refusal.kind == kind
    assert memory_of(kb) == [] and WrapQueue(kb).get_unprocessed_wraps() == []
    assert kb.seq == seq


def test_an_agent_id_that_is_not_an_agent_name_is_refused(kb):
    call = invoker(kb)
    assert refused(lambda: call("wraps.wrap_session", agent_id="ling-7")).kind == "naming"
    assert refused(lambda: call("wraps.wrap_session", agent_id=None)).kind == "bad-wrap"


def test_re_wrapping_the_same_session_adds_the_new_entries_to_the_same_wrap(kb, team):
    first = wrap_session(team["AgentLingA"], **SESSION, notes=["one"], wrap_id="w")
    WrapQueue(kb).mark_wrap_processed("w")
    again = wrap_session(team["AgentLingA"], **SESSION, notes=["one", "two"], wrap_id="w")
    assert again["processed"] is False
    assert again["created_ids"][: len(first["created_ids"])] == first["created_ids"]
    assert len(again["created_ids"]) == 2  # "one" is the same sentex, stored once


# --- permeate -----------------------------------------------------------------------------


def test_permeate_returns_the_entries_and_twice_processes_nothing_the_second_time(kb, team):
    ling, coordinator = team["AgentLingA"], team["AgentCoordA"]
    w1 = wrap_session(ling, **SESSION, project_id="hive:api", notes=["n1"], decisions=["d1"])
    w2 = wrap_session(ling, **SESSION, project_id="hive:api", conventions=["c1"])
    absorbed = permeate(coordinator, session_id="session:coord-a")
    assert absorbed["processed"] == 2
    assert absorbed["agent_ids"] == ["AgentLingA"]
    assert {w["wrap_id"] for w in absorbed["wraps"]} == {w1["wrap_id"], w2["wrap_id"]}
    assert all(w["processed"] for w in absorbed["wraps"])
    assert sorted(e.text for e in absorbed["entries"]) == [
        '(memoryConvention AgentLingA "c1")',
        '(memoryDecision AgentLingA "d1")',
        '(memoryNote AgentLingA "n1")',
    ]
    again = permeate(coordinator, session_id="session:coord-a")
    assert again == {"processed": 0, "agent_ids": [], "wraps": [], "entries": [], "skipped": []}


def test_a_coordinator_coordinates_one_session_in_every_surface(kb, team):
    """The rule lives in the wraps domain (`coordinate`), not in one tool: its first
    permeate makes the session its own, another session is refused while it is active."""
    ling, coordinator = team["AgentLingA"], team["AgentCoordA"]
    wrap_session(ling, **SESSION, project_id="hive:api", notes=["n1"])
    first = coordinate(coordinator, "AgentCoordA", default_session="session:coord-a")
    assert first["processed"] == 1 and first["entries"][0]["sentence"].startswith("(memoryNote")
    again = coordinate(coordinator, "AgentCoordA")  # its own session, held
    assert again["processed"] == 0 and again["note"] == "no unprocessed wraps"
    other = refused(lambda: coordinate(coordinator, "AgentCoordA", session_id="session:other"))
    assert other.kind == "koinii/not-your-session" and other.data["yours"] == "session:coord-a"


def test_permeate_by_project_takes_the_children_unless_told_not_to(kb, team):
    ling = team["AgentLingA"]
    top = wrap_session(ling, **SESSION, project_id="hive", notes=["top"])
    wrap_session(ling, **SESSION, project_id="hive:api", notes=["child"])
    wrap_session(ling, **SESSION, project_id="hive-mcp", notes=["sibling"])
    exact = permeate(team["AgentCoordA"], project_id="hive", include_children=False)
    assert [w["wrap_id"] for w in exact["wraps"]] == [top["wrap_id"]]
    children = permeate(team["AgentCoordA"], project_id="hive")
    assert [e.sentence[2] for e in children["entries"]] == ["child"]
    assert [w["project_id"] for w in WrapQueue(kb).get_unprocessed_wraps()] == ["hive-mcp"]


def test_an_unmarked_wrap_is_offered_again_after_a_failed_permeate(kb, team, monkeypatch):
    wrap_session(team["AgentLingA"], **SESSION, notes=["first"], wrap_id="w1")
    wrap_session(team["AgentLingA"], **SESSION, notes=["second"], wrap_id="w2")
    real_mark = WrapQueue.mark_wrap_processed

    def fails_on_w2(self, wrap_id):
        if wrap_id == "w2":
            raise Refused("store-error", "the store went away", {})
        return real_mark(self, wrap_id)

    monkeypatch.setattr(WrapQueue, "mark_wrap_processed", fails_on_w2)
    with pytest.raises(Refused):
        permeate(team["AgentCoordA"], session_id="session:coord-a")
    monkeypatch.undo()
    retry = permeate(team["AgentCoordA"], session_id="session:coord-a")
    assert [w["wrap_id"] for w in retry["wraps"]] == ["w2"]
    assert [e.sentence[2] for e in retry["entries"]] == ["second"]


def test_permeate_skips_entries_that_were_retracted_since(kb, team):
    wrap = wrap_session(team["AgentLingA"], **SESSION, notes=["kept", "withdrawn"])
    kb.retract(wrap["created_ids"][1])
    absorbed = permeate(team["AgentCoordA"], session_id="session:coord-a")
    assert [e.sentence[2] for e in absorbed["entries"]] == ["kept"]


# --- wrap_session over the wire -----------------------------------------------------------


@pytest.fixture
def wired(start_daemon):
    daemon = start_daemon(principals={"AgentLingA": "agent", "AgentLingB": "agent"})
    return {
        name: channel.join(channel.wire(daemon.client(name)), "CxHive", name)
        for name in ("AgentLingA", "AgentLingB")
    }


def test_over_the_wire_wrap_session_records_the_principal_and_is_one_write(wired):
    ling = wired["AgentLingA"]
    wrap = wrap_session(ling, **SESSION, notes=["over the wire"])
    entry = ling.store.sentex(wrap["created_ids"][0])
    assert entry.context == "CxLingA"
    assert entry.provenance["principal"] == entry.provenance["creator"] == "AgentLingA"
    [change] = ling.store.changes(since=ling.store.seq - 1)["entries"]
    assert change["op"] == "wraps.wrap_session"


def test_over_the_wire_a_ling_wraps_only_as_itself(wired):
    call = invoker(wired["AgentLingB"].store)
    refusal = refused(
        lambda: call("wraps.wrap_session", agent_id="AgentLingA", wrap_id="w", notes=["forged"])
    )
    assert refusal.kind == "koinii/creator-mismatch"
    assert memory_of(wired["AgentLingB"].store) == []


@pytest.mark.backends("sqlite", "postgres")
def test_over_the_wire_a_failure_between_the_entries_and_the_wrap_leaves_neither(wired):
    wrap_session(wired["AgentLingA"], **SESSION, notes=["a's"], wrap_id="w")
    store = wired["AgentLingB"].store
    seq = store.seq
    refusal = refused(
        lambda: wrap_session(wired["AgentLingB"], **SESSION, notes=["b's"], wrap_id="w")
    )
    assert refusal.kind == "koinii/creator-mismatch"
    assert memory_of(store) == ['(memoryNote AgentLingA "a\'s")']
    assert store.seq == seq


# --- wait ---------------------------------------------------------------------------------


def wait_in_thread(queue_, **filters):
    """Start `queue_.wait(**filters)` on a thread; returns (thread, box for its result)."""
    box = {}

    def run():
        box["result"] = queue_.wait(**filters)
        box["returned"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def wait_returns_within_a_second_of_a_matching_wrap(waiting_queue, filing_queue):
    thread, box = wait_in_thread(waiting_queue, parent_session_id="session:coord-a", timeout_s=20)
    time.sleep(0.2)
    filing_queue.add_wrap_notification("elsewhere", parent_session_id="session:coord-b")
    time.sleep(0.2)
    assert "result" not in box  # a write that does not match does not end the wait
    filed = time.monotonic()
    filing_queue.add_wrap_notification("mine", parent_session_id="session:coord-a")
    thread.join(5)
    assert [w["wrap_id"] for w in box["result"]] == ["mine"]
    assert box["returned"] - filed < 1.0


def test_wait_returns_within_a_second_of_a_matching_wrap_in_process(kb):
    wait_returns_within_a_second_of_a_matching_wrap(WrapQueue(kb), WrapQueue(kb))


def test_wait_returns_within_a_second_of_a_matching_wrap_over_the_wire(start_daemon):
    daemon = start_daemon()
    wait_returns_within_a_second_of_a_matching_wrap(
        WrapQueue(daemon.client()), WrapQueue(daemon.client())
    )


def test_wait_returns_at_once_when_wraps_are_there_and_empty_when_time_is_up(kb):
    queue_ = WrapQueue(kb)
    assert queue_.wait(project_prefix="hive", timeout_s=0.2) == []
    queue_.add_wrap_notification("w", project_id="hive:api")
    started = time.monotonic()
    assert [w["wrap_id"] for w in queue_.wait(project_prefix="hive", timeout_s=20)] == ["w"]
    assert time.monotonic() - started < 1.0
    assert [w["wrap_id"] for w in queue_.wait(timeout_s=0)] == ["w"]


@pytest.mark.parametrize("timeout_s", [-1, 31, "5", True, [1]])
def test_wait_refuses_a_bad_timeout(kb, timeout_s):
    refusal = refused(lambda: WrapQueue(kb).wait(timeout_s=timeout_s))
    assert refusal.kind == "bad-option" and refusal.data["option"] == "timeout_s"


def test_the_daemon_refuses_a_bad_timeout_with_the_same_kind(start_daemon):
    call = invoker(start_daemon().client())
    refusal = refused(lambda: call("wraps.wait", timeout_s="5"))
    assert refusal.kind == "bad-option" and refusal.data["option"] == "timeout_s"


def test_wait_with_a_session_and_a_project_prefix_wants_wraps_matching_both(kb):
    queue_ = WrapQueue(kb)
    queue_.add_wrap_notification("other-project", parent_session_id="s-a", project_id="web")
    queue_.add_wrap_notification("other-session", parent_session_id="s-b", project_id="hive")
    assert queue_.wait(parent_session_id="s-a", project_prefix="hive", timeout_s=0) == []
    queue_.add_wrap_notification("both", parent_session_id="s-a", project_id="hive:api")
    found = queue_.wait(parent_session_id="s-a", project_prefix="hive", timeout_s=0)
    assert [w["wrap_id"] for w in found] == ["both"]
