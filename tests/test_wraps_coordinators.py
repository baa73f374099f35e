"""Coordinators (wraps.md §3) and the rule they exist for: two coordinators in one project
never consume each other's lings' wraps (§4) — in-process, and over the wire with tokens."""

import time
import uuid

import pytest

from koinii.channel import agent as channel
from koinii.operations import invoker
from koinii.wraps import Coordinators, WrapQueue, permeate, wrap_session
from tests.conftest import refused

TEAM = {
    "AgentCoordA": "agent",
    "AgentCoordB": "agent",
    "AgentLingA": "agent",
    "AgentLingB": "agent",
    "Ops": "operator",
    "Auditor": "reader",
    "Registrar": "admin",
}


def ids(wraps):
    return [w["wrap_id"] for w in wraps]


# --- the registry -------------------------------------------------------------------------


def test_register_makes_an_active_coordinator_with_a_uuid_session_by_default(kb):
    registry = Coordinators(kb)
    before = time.time_ns() // 1_000_000
    record = registry.register("AgentCoordA", project_id="hive", pid=4242)
    assert uuid.UUID(record["session_id"]).version == 4
    assert record["status"] == "active" and record["pid"] == 4242
    assert record["project_id"] == "hive" and record["coordinator_id"] == "AgentCoordA"
    assert before <= record["registered_at"] == record["heartbeat_at"]
    assert registry.get("AgentCoordA") == record
    assert registry.get("AgentCoordZ") is None


def test_list_filters_by_status_and_project_in_registration_order(kb):
    registry = Coordinators(kb)
    registry.register("AgentCoordA", project_id="hive", session_id="s-a")
    registry.register("AgentCoordB", project_id="hive", session_id="s-b")
    registry.register("AgentCoordC", project_id="other", session_id="s-c")
    registry.mark_stale("AgentCoordB")
    every = [c["coordinator_id"] for c in registry.list()]
    assert sorted(every) == ["AgentCoordA", "AgentCoordB", "AgentCoordC"]
    assert [c["coordinator_id"] for c in registry.list(status="stale")] == ["AgentCoordB"]
    hive = registry.list(project_id="hive", status="active")
    assert [c["coordinator_id"] for c in hive] == ["AgentCoordA"]
    assert registry.list(status="terminated") == []


def test_status_moves_stale_and_back_on_a_heartbeat_but_terminated_stays(kb):
    registry = Coordinators(kb)
    registry.register("AgentCoordA", project_id="hive", session_id="s-a")
    assert registry.mark_stale("AgentCoordA")["status"] == "stale"
    beat = registry.heartbeat("AgentCoordA")
    assert beat["status"] == "active"
    assert registry.mark_terminated("AgentCoordA")["status"] == "terminated"
    assert registry.heartbeat("AgentCoordA")["status"] == "terminated"


def test_cleanup_stale_marks_only_active_coordinators_with_an_old_heartbeat(kb):
    registry = Coordinators(kb)
    registry.register("AgentCoordA", project_id="hive", session_id="s-a")
    registry.register("AgentCoordB", project_id="hive", session_id="s-b")
    registry.register("AgentCoordC", project_id="hive", session_id="s-c")
    registry.mark_terminated("AgentCoordC")
    assert registry.cleanup_stale() == []  # every heartbeat is fresh against 120 s
    # A's heartbeat is 300 ms old, B's fresh: a 150 ms threshold tells them apart with room
    # for a slow machine (10 ms did not: B's heartbeat aged past it on a loaded one)
    time.sleep(0.3)
    registry.heartbeat("AgentCoordB")
    assert registry.cleanup_stale(threshold_ms=150) == ["AgentCoordA"]
    assert registry.get("AgentCoordA")["status"] == "stale"
    assert registry.get("AgentCoordC")["status"] == "terminated"
    seq = kb.seq
    assert registry.cleanup_stale(threshold_ms=150) == [] and kb.seq == seq


def test_remove_returns_the_last_record_and_calls_on_unknown_ids_return_none_and_write_nothing(
    kb,
):
    registry = Coordinators(kb)
    record = registry.register("AgentCoordA", project_id="hive", session_id="s-a")
    assert registry.remove("AgentCoordA") == record
    seq = kb.seq
    for call in (
        registry.heartbeat,
        registry.get,
        registry.mark_stale,
        registry.mark_terminated,
        registry.remove,
    ):
        assert call("AgentCoordA") is None
    assert kb.seq == seq


def test_re_registering_starts_a_new_run_as_active(kb):
    registry = Coordinators(kb)
    first = registry.register("AgentCoordA", project_id="hive", session_id="s-1")
    registry.mark_terminated("AgentCoordA")
    again = registry.register("AgentCoordA", project_id="hive:api", session_id="s-2")
    assert again["status"] == "active" and again["session_id"] == "s-2"
    assert again["project_id"] == "hive:api"
    assert again["registered_at"] == first["registered_at"]


@pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix
@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda r: r.register("", project_id="hive"), "coordinator_id"),
        (lambda r: r.register(None, project_id="hive"), "coordinator_id"),
        (lambda r: r.register("AgentCoordA", project_id=None), "project_id"),
        (lambda r: r.register("AgentCoordA", project_id="hive", pid=-1), "pid"),
        (lambda r: r.register("AgentCoordA", project_id="hive", pid="12"), "pid"),
        (lambda r: r.register("AgentCoordA", project_id="hive", session_id=""), "session_id"),
        (lambda r: r.list(status="sleeping"), "status"),
        (lambda r: r.heartbeat(7), "coordinator_id"),
    ],
)
def test_a_bad_coordinator_call_is_refused_as_bad_coordinator_and_writes_nothing(kb, call, field):
    seq = kb.seq
    refusal = refused(lambda: call(Coordinators(kb)))
    assert refusal.kind == "bad-coordinator" and refusal.data["field"] == field
    assert kb.seq == seq and Coordinators(kb).list() == []


@pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix
def test_an_unknown_status_is_refused_with_the_known_ones(kb):
    Coordinators(kb).register("AgentCoordA", project_id="hive", session_id="s-a")
    call = invoker(kb)
    refusal = refused(
        lambda: call("wraps.coordinators.set_status", coordinator_id="AgentCoordA", status="gone")
    )
    assert refusal.kind == "bad-coordinator"
    assert refusal.data["known"] == ["active", "stale", "terminated"]


def test_a_session_belongs_to_one_coordinator(kb):
    registry = Coordinators(kb)
    registry.register("AgentCoordA", project_id="hive", session_id="session:shared")
    refusal = refused(
        lambda: registry.register("AgentCoordB", project_id="hive", session_id="session:shared")
    )
    assert refusal.kind == "bad-coordinator" and refusal.data["holder"] == "AgentCoordA"
    assert registry.get("AgentCoordB") is None


@pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix
def test_cleanup_refuses_a_bad_threshold(kb):
    refusal = refused(lambda: Coordinators(kb).cleanup_stale(threshold_ms=-5))
    assert refusal.kind == "bad-option" and refusal.data["option"] == "threshold_ms"


# --- two coordinators in one project ------------------------------------------------------


def two_teams(coordinator_a, coordinator_b, ling_a, ling_b):
    """A and B coordinate in project `hive`; each has a ling that wraps into its session."""
    Coordinators(coordinator_a.store).register(
        "AgentCoordA", project_id="hive", session_id="session:coord-a"
    )
    Coordinators(coordinator_b.store).register(
        "AgentCoordB", project_id="hive", session_id="session:coord-b"
    )
    wrap_a = wrap_session(
        ling_a,
        session_id="session:ling-a",
        parent_session_id="session:coord-a",
        project_id="hive:api",
        notes=["the API paginates by cursor"],
    )
    wrap_b = wrap_session(
        ling_b,
        session_id="session:ling-b",
        parent_session_id="session:coord-b",
        project_id="hive:web",
        decisions=["the web app keeps server rendering"],
    )
    return wrap_a, wrap_b


def test_two_coordinators_in_one_project_each_read_only_their_own_lings_wraps(kb):
    medium = channel.local(kb)
    coord_a, coord_b, ling_a, ling_b = (
        channel.join(medium, "CxHive", name)
        for name in ("AgentCoordA", "AgentCoordB", "AgentLingA", "AgentLingB")
    )
    wrap_a, wrap_b = two_teams(coord_a, coord_b, ling_a, ling_b)
    queue = WrapQueue(kb)
    assert ids(queue.get_unprocessed_wraps_for_session("session:coord-a")) == [wrap_a["wrap_id"]]
    assert ids(queue.get_unprocessed_wraps_for_session("session:coord-b")) == [wrap_b["wrap_id"]]
    assert set(ids(queue.get_unprocessed_wraps_for_hierarchy("hive"))) == {
        wrap_a["wrap_id"],
        wrap_b["wrap_id"],
    }

    absorbed = permeate(coord_a, session_id="session:coord-a")
    assert absorbed["processed"] == 1 and absorbed["agent_ids"] == ["AgentLingA"]
    assert [e.text for e in absorbed["entries"]] == [
        '(memoryNote AgentLingA "the API paginates by cursor")'
    ]
    assert queue.get_unprocessed_wraps_for_session("session:coord-a") == []
    assert ids(queue.get_unprocessed_wraps_for_hierarchy("hive")) == [wrap_b["wrap_id"]]
    assert permeate(coord_a, session_id="session:coord-a")["processed"] == 0


@pytest.fixture
def team(start_daemon):
    return start_daemon(principals=TEAM)


@pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix
def test_over_the_wire_a_coordinator_cannot_consume_another_coordinators_wraps(team):
    clients = {name: team.client(name) for name in TEAM}
    agents = {
        name: channel.join(channel.wire(clients[name]), "CxHive", name)
        for name in ("AgentCoordA", "AgentCoordB", "AgentLingA", "AgentLingB")
    }
    wrap_a, wrap_b = two_teams(
        agents["AgentCoordA"], agents["AgentCoordB"], agents["AgentLingA"], agents["AgentLingB"]
    )
    as_a = WrapQueue(clients["AgentCoordA"])

    # A's session read returns only A's lings' wraps; the project read returns both.
    assert ids(as_a.get_unprocessed_wraps_for_session("session:coord-a")) == [wrap_a["wrap_id"]]
    assert set(ids(as_a.get_unprocessed_wraps_for_hierarchy("hive"))) == {
        wrap_a["wrap_id"],
        wrap_b["wrap_id"],
    }

    # A cannot mark B's wrap processed, even when it asks by name.
    refusal = refused(lambda: as_a.mark_wrap_processed(wrap_b["wrap_id"]))
    assert refusal.kind == "koinii/foreign-context"
    assert refusal.data == {
        "agent": "AgentCoordA",
        "wrap_id": wrap_b["wrap_id"],
        "coordinator_id": "AgentCoordB",
    }

    # Permeating by project by mistake consumes A's wrap and leaves B's in the queue.
    absorbed = permeate(agents["AgentCoordA"], project_id="hive")
    assert ids(absorbed["wraps"]) == [wrap_a["wrap_id"]]
    assert absorbed["skipped"] == [wrap_b["wrap_id"]]
    assert [e.context for e in absorbed["entries"]] == ["CxLingA"]
    assert ids(as_a.get_unprocessed_wraps()) == [wrap_b["wrap_id"]]

    # A processed wrap is never offered again; B consumes its own.
    assert permeate(agents["AgentCoordA"], session_id="session:coord-a")["processed"] == 0
    as_b = permeate(agents["AgentCoordB"], session_id="session:coord-b")
    assert as_b["agent_ids"] == ["AgentLingB"]
    assert as_b["entries"][0].provenance["principal"] == "AgentLingB"
    assert as_a.get_unprocessed_wraps() == []


@pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix
def test_over_the_wire_a_wraps_agent_is_its_principal(team):
    ling = WrapQueue(team.client("AgentLingA"))
    refusal = refused(lambda: ling.add_wrap_notification("w", agent_id="AgentLingB"))
    assert refusal.kind == "koinii/creator-mismatch"
    assert refusal.data == {"agent": "AgentLingA", "creator": "AgentLingB", "field": "agent_id"}
    assert refused(lambda: ling.add_wrap_notification("w")).kind == "koinii/creator-mismatch"
    assert ling.add_wrap_notification("w", agent_id="AgentLingA")["wrap_id"] == "w"
    # nor may another agent file the same wrap id again as itself
    other = WrapQueue(team.client("AgentLingB"))
    refusal = refused(lambda: other.add_wrap_notification("w", agent_id="AgentLingB"))
    assert refusal.kind == "koinii/creator-mismatch" and refusal.data["creator"] == "AgentLingA"
    assert WrapQueue(team.client("Ops")).get_unprocessed_wraps()[0]["agent_id"] == "AgentLingA"


@pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix
def test_over_the_wire_readers_and_admins_read_but_do_not_change_the_queue(team):
    WrapQueue(team.client("AgentLingA")).add_wrap_notification("w", agent_id="AgentLingA")
    for name in ("Auditor", "Registrar"):
        queue, registry = WrapQueue(team.client(name)), Coordinators(team.client(name))
        assert ids(queue.get_unprocessed_wraps()) == ["w"]
        assert refused(lambda q=queue: q.mark_wrap_processed("w")).kind == "forbidden"
        assert refused(lambda q=queue, n=name: q.add_wrap_notification("x", agent_id=n)).kind == (
            "forbidden"
        )
        assert refused(lambda r=registry: r.cleanup_stale()).kind == "forbidden"
        assert registry.list() == []


@pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix
def test_over_the_wire_an_agent_registers_and_changes_only_its_own_coordinator_record(team):
    a, b = Coordinators(team.client("AgentCoordA")), Coordinators(team.client("AgentCoordB"))
    refusal = refused(lambda: a.register("AgentCoordB", project_id="hive"))
    assert refusal.kind == "koinii/creator-mismatch"
    a.register("AgentCoordA", project_id="hive", session_id="session:coord-a")
    for call in (b.heartbeat, b.mark_stale, b.mark_terminated, b.remove):
        assert refused(lambda c=call: c("AgentCoordA")).kind == "koinii/foreign-context"
    # and cannot take over A's session to consume A's wraps
    refusal = refused(
        lambda: b.register("AgentCoordB", project_id="hive", session_id="session:coord-a")
    )
    assert refusal.kind == "bad-coordinator"
    assert a.get("AgentCoordA")["status"] == "active"


@pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix
def test_over_the_wire_an_operator_may_mark_any_wrap(team):
    Coordinators(team.client("AgentCoordA")).register(
        "AgentCoordA", project_id="hive", session_id="session:coord-a"
    )
    WrapQueue(team.client("AgentLingA")).add_wrap_notification(
        "w", agent_id="AgentLingA", parent_session_id="session:coord-a"
    )
    assert WrapQueue(team.client("Ops")).mark_wrap_processed("w")["wrap_id"] == "w"


def test_a_wrap_into_an_unregistered_session_may_be_marked_by_any_agent(team):
    WrapQueue(team.client("AgentLingA")).add_wrap_notification(
        "w", agent_id="AgentLingA", parent_session_id="session:nobody"
    )
    assert WrapQueue(team.client("AgentCoordB")).mark_wrap_processed("w")["wrap_id"] == "w"


# --- a lead's session and its workers' entries are not another agent's to take (issue 37) --


def test_an_agent_cannot_register_a_session_another_agent_started(team):
    """A lead names its session in the session store; the name is the lead's, so another
    agent that reads it in wraps/list cannot register it, take the workers' wraps and
    lock the lead out."""
    from koinii.sessions import SessionStore

    lead = SessionStore(team.client("AgentCoordA"))
    by_id = lead.start_session(title="the lead", external_id="lead-billing")
    ling = channel.join(channel.wire(team.client("AgentLingA")), "CxHive", "AgentLingA")
    wrap = wrap_session(
        ling, session_id="s-ling", parent_session_id="lead-billing", notes=["x"], wrap_id="u"
    )
    attacker = Coordinators(team.client("AgentCoordB"))
    seq = team.client("Ops").seq
    for session_id in ("lead-billing", by_id):
        refusal = refused(
            lambda s=session_id: attacker.register(
                "AgentCoordB", project_id="billing", session_id=s
            )
        )
        assert refusal.kind == "koinii/foreign-session"
        assert refusal.data["owner"] == "AgentCoordA"
        assert refusal.data["field"] == "session_id"
        assert "koinii mcp --session NAME --record" in refusal.message
    assert team.client("Ops").seq == seq and attacker.get("AgentCoordB") is None
    # nor consume them before the lead has registered: the stored session's wraps are its
    refusal = refused(lambda: WrapQueue(team.client("AgentCoordB")).mark_wrap_processed("u"))
    assert (refusal.kind, refusal.data["coordinator_id"]) == (
        "koinii/foreign-context",
        "AgentCoordA",
    )
    thief = channel.join(channel.wire(team.client("AgentCoordB")), "CxHive", "AgentCoordB")
    taken = permeate(thief, session_id="lead-billing")
    assert taken["processed"] == 0 and taken["skipped"] == [wrap["wrap_id"]]
    # the lead registers its own session, late as it is, and permeates its worker's wrap
    Coordinators(team.client("AgentCoordA")).register(
        "AgentCoordA", project_id="billing", session_id="lead-billing"
    )
    coordinator = channel.join(channel.wire(team.client("AgentCoordA")), "CxHive", "AgentCoordA")
    absorbed = permeate(coordinator, session_id="lead-billing")
    assert ids(absorbed["wraps"]) == [wrap["wrap_id"]]


def test_a_free_session_tag_others_already_wrap_into_cannot_be_registered_by_an_agent(team):
    """A tag the session store does not hold has no owner to ask: once other agents'
    wraps name it, nobody's registration can claim their workers (an operator still may),
    while a fresh tag is its first registrant's, as a lead's first permeate makes it."""
    WrapQueue(team.client("AgentLingA")).add_wrap_notification(
        "w", agent_id="AgentLingA", parent_session_id="s-lead"
    )
    attacker = Coordinators(team.client("AgentCoordB"))
    refusal = refused(
        lambda: attacker.register("AgentCoordB", project_id="hive", session_id="s-lead")
    )
    assert refusal.kind == "koinii/foreign-session"
    assert refusal.data["wrapped_by"] == ["AgentLingA"]
    assert "register your session before your workers wrap into it" in refusal.message
    # nor does a session the attacker stores under that tag (or that id) once it is seen
    from koinii.sessions import SessionStore

    tag = str(uuid.uuid4())
    WrapQueue(team.client("AgentLingA")).add_wrap_notification(
        "u", agent_id="AgentLingA", parent_session_id=tag
    )
    squatter = SessionStore(team.client("AgentCoordB"))
    squatter.start_session(external_id="s-lead")
    squatter.call("start_session", id=tag)
    for session_id in ("s-lead", tag):
        refusal = refused(
            lambda s=session_id: attacker.register("AgentCoordB", project_id="hive", session_id=s)
        )
        assert refusal.kind == "koinii/foreign-session"
        assert refusal.data["wrapped_by"] == ["AgentLingA"]
    assert attacker.register("AgentCoordB", project_id="hive", session_id="s-fresh")
    # its own workers' wraps into its own session, and its re-registration, stay its own
    WrapQueue(team.client("AgentLingB")).add_wrap_notification(
        "v", agent_id="AgentLingB", parent_session_id="s-fresh"
    )
    assert attacker.register("AgentCoordB", project_id="hive", session_id="s-fresh")
    Coordinators(team.client("Ops")).register("Ops", project_id="hive", session_id="s-lead")


def test_a_wrap_lists_only_sentexes_its_filer_wrote(team):
    """Else a lead's permeate absorbs other agents' sentences as its worker's entries."""
    atlas = channel.join(channel.wire(team.client("AgentLingB")), "CxHive", "AgentLingB")
    theirs = atlas.assert_("(deployFrozen Billing)")
    ling = channel.join(channel.wire(team.client("AgentLingA")), "CxHive", "AgentLingA")
    mine = ling.assert_("(cacheWarm Billing)")
    queue = WrapQueue(team.client("AgentLingA"))
    seq = team.client("Ops").seq
    for created in ([theirs], [mine, theirs, 10**9]):
        refusal = refused(
            lambda c=created: queue.add_wrap_notification(
                "w", agent_id="AgentLingA", parent_session_id="s-lead", created_ids=c
            )
        )
        assert refusal.kind == "koinii/foreign-sentex"
        assert refusal.data["handles"] == [h for h in created if h != mine]
        assert "leave them out" in refusal.message and str(theirs) in refusal.message
    assert team.client("Ops").seq == seq and queue.get_unprocessed_wraps() == []
    filed = queue.add_wrap_notification(
        "w", agent_id="AgentLingA", parent_session_id="s-lead", created_ids=[mine, "note-1"]
    )
    assert filed["wrap_id"] == "w"
    lead = channel.join(channel.wire(team.client("AgentCoordA")), "CxHive", "AgentCoordA")
    assert [e.handle for e in permeate(lead, session_id="s-lead")["entries"]] == [mine]


def test_a_wrap_lists_at_most_ten_thousand_ids_counted_before_any_is_looked_up(team):
    """Issue 37: 1.4 million `created_ids` held the daemon for seconds, then slowed every
    later `wraps/list`; the cap is refused, with its limit, before a handle is read."""
    queue = WrapQueue(team.client("AgentLingA"))
    seq = team.client("Ops").seq
    refusal = refused(
        lambda: queue.add_wrap_notification(
            "w", agent_id="AgentLingA", created_ids=list(range(1, 10_002))
        )
    )
    assert (refusal.kind, refusal.data["field"], refusal.data["limit"]) == (
        "bad-wrap",
        "created_ids",
        10_000,
    )
    assert "10,000" in refusal.message and "several wraps" in refusal.message
    # the same refusal in-process, and for a wrap filed again and again
    operator = WrapQueue(team.client("Ops"))
    operator.add_wrap_notification("v", created_ids=[f"id-{n}" for n in range(6_000)])
    again = refused(
        lambda: operator.add_wrap_notification("v", created_ids=[f"n-{n}" for n in range(6_000)])
    )
    assert (again.kind, again.data["limit"], again.data["count"]) == ("bad-wrap", 10_000, 12_000)
    assert team.client("Ops").seq == seq + 1
    ling = channel.join(channel.wire(team.client("AgentLingA")), "CxHive", "AgentLingA")
    many = refused(lambda: wrap_session(ling, session_id="s", notes=["x"] * 10_001))
    assert (many.kind, many.data["limit"]) == ("bad-wrap", 10_000)
