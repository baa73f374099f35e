"""The in-process change feed (engine.md §8)."""

import threading

import pytest

import koinii
from koinii import Refused, Sym

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix


def test_one_event_per_write_that_changes_belief_with_the_global_seq(kb):
    events = []
    kb.watch(events.append)
    h = kb.assert_("(color Sky Blue)", "CxA")
    assert len(events) == 1
    assert events[0].seq == kb.seq
    assert events[0].added == [{"handle": h, "sentence": "(color Sky Blue)", "context": "CxA"}]
    kb.assert_("(color Sky Blue)", "CxA")  # idempotent: no event
    with pytest.raises(Refused):
        kb.retract(12345)  # unknown: refused, no event
    assert len(events) == 1
    kb.retract(h)
    assert events[1].removed == [
        {"handle": h, "sentence": "(color Sky Blue)", "context": "CxA", "reason": "retracted"}
    ]
    assert events[1].seq > events[0].seq


@pytest.mark.backends("sqlite", "postgres")
def test_a_rolled_back_batch_emits_nothing(kb):
    events = []
    kb.watch(events.append)
    with pytest.raises(Refused):
        kb.edit(add=[("(color Sky Blue)", "CxA"), ("(color ?x Blue)", "CxA")])
    assert events == []


def test_removal_reasons_name_why_belief_went(kb):
    events = []
    kb.assert_("(implies (dog ?x) (mammal ?x))", "CxA")
    dog = kb.assert_("(dog Muffet)", "CxA")
    kb.assert_("(open Door)", "CxA")
    shown = kb.assert_("(color Sky Blue)", "CxA")
    kb.watch(events.append)
    kb.retract(dog)
    kb.assert_("(not (open Door))", "CxA", strength="monotonic")
    kb.assert_(f"(except (sentexHandle {shown}))", "CxA")
    reasons = [(c["sentence"], c["reason"]) for e in events for c in e.removed]
    assert reasons == [
        ("(dog Muffet)", "retracted"),
        ("(mammal Muffet)", "unsupported"),
        ("(open Door)", "defeated"),
        ("(color Sky Blue)", "excepted"),
    ]
    assert events[-1].removed[0]["hidden_in"] == "CxA"


def test_a_standing_query_delivers_matching_changes_in_view_with_bindings(kb):
    kb.assert_("(genlCx CxChannel CxAtlas)", "CxUniverse")
    events = []
    kb.watch(events.append, goal="(answers ?who ?what)", ctx="CxChannel")
    kb.assert_("(answers AgentAtlas Yes)", "CxAtlas")
    kb.assert_("(answers AgentBoreas No)", "CxElsewhere")  # not in the channel's view
    kb.assert_("(asks AgentAtlas Q)", "CxAtlas")  # does not match the goal
    assert len(events) == 1
    [change] = events[0].added
    assert change["bindings"] == {"?who": Sym("AgentAtlas"), "?what": Sym("Yes")}


def test_a_variable_context_watches_everywhere_and_binds_the_witness(kb):
    events = []
    kb.watch(events.append, goal="(answers ?who ?what)", ctx="?where")
    kb.assert_("(answers AgentBoreas No)", "CxElsewhere")
    assert events[0].added[0]["bindings"]["?where"] == Sym("CxElsewhere")


def test_a_context_without_a_goal_watches_every_change_it_sees(kb):
    kb.assert_("(genlCx CxTeam CxA)", "CxUniverse")
    events = []
    kb.watch(events.append, ctx="CxTeam")
    kb.assert_("(p a)", "CxA")
    kb.assert_("(p b)", "CxElsewhere")  # CxTeam does not see CxElsewhere
    assert [c["sentence"] for e in events for c in e.added] == ["(p a)"]


def test_callbacks_run_in_registration_order_and_a_raising_one_loses_only_its_own(kb):
    calls = []

    def broken(event):
        calls.append("broken")
        raise RuntimeError("boom")

    kb.watch(lambda e: calls.append("first"))
    kb.watch(broken)
    kb.watch(lambda e: calls.append("last"))
    kb.assert_("(color Sky Blue)", "CxA")
    assert calls == ["first", "broken", "last"]


def test_a_callback_may_write_and_its_write_arrives_as_a_later_event(kb):
    seen = []

    def echo(event):
        seen.append(event.seq)
        for change in event.added:
            if change["sentence"] == "(ping Atlas)":
                kb.assert_("(pong Atlas)", "CxA")

    kb.watch(echo)
    kb.assert_("(ping Atlas)", "CxA")
    assert len(seen) == 2 and seen[0] < seen[1]
    assert kb.query("(pong Atlas)", "CxA") == [{}]


def test_unwatch_is_idempotent_and_watchers_lists_the_rest(kb):
    token = kb.watch(print, goal="(color ?x ?c)", ctx="CxA")
    other = kb.watch(print)
    assert [w["token"] for w in kb.watchers()] == [token, other]
    assert kb.watchers()[0]["goal"] == "(color ?x ?c)"
    assert kb.unwatch(token) is True
    assert kb.unwatch(token) is False
    assert [w["token"] for w in kb.watchers()] == [other]


def test_callbacks_run_on_the_writers_thread_after_the_write_is_durable(tmp_path):
    with koinii.open_kb(tmp_path / "kb.db") as kb:
        seen = []

        def check(event):
            seen.append((threading.current_thread().name, kb.changes(event.seq - 1)["entries"]))

        kb.watch(check)
        kb.assert_("(color Sky Blue)", "CxA")
    [(thread, entries)] = seen
    assert thread == threading.current_thread().name
    assert entries[0]["added"][0]["sentence"] == "(color Sky Blue)"


# Each kind of standing query: everything; a context; a goal; a negated goal in a context;
# a goal with a variable context.
STANDING = [
    (None, None),
    (None, "CxTeam"),
    ("(usesDatabase ?s ?d)", None),
    ("(not (open ?door))", "CxTeam"),
    ("(usesDatabase ?s Postgres)", "?where"),
]


def _history(kb) -> list[int]:
    """Writes of every kind of change — added, derived, retracted, unsupported, defeated,
    masked, negated, out of view — and of none, each followed by its seq."""
    seqs = []

    def wrote(_=None):
        seqs.append(kb.seq)

    wrote(kb.assert_("(implies (usesDatabase ?s ?d) (dependsOn ?s ?d))", "CxA"))
    pg = kb.assert_("(usesDatabase Billing Postgres)", "CxA")
    wrote()
    wrote(kb.edit(add=[("(usesDatabase Search Elastic)", "CxA"), ("(open Door)", "CxA")]))
    wrote(kb.assert_("(usesDatabaseNot Billing Postgres)", "CxA"))  # a longer predicate
    wrote(kb.assert_("(usesDatabase Ledger Postgres)", "CxElsewhere"))  # out of CxTeam's view
    wrote(kb.assert_("(not (open Door))", "CxA", strength="monotonic"))
    wrote(kb.assert_(f"(except (sentexHandle {pg}))", "CxA"))
    wrote(kb.retract(pg))
    wrote(kb.assert_("(usesDatabase Billing MySQL)", "CxA"))
    wrote(kb.edit(add=[]))  # changes nothing
    wrote(kb.assert_("(usesDatabase Billing MySQL)", "CxA"))  # nor does this
    return seqs


def test_a_resumed_watch_receives_exactly_what_a_live_one_did(kb):
    kb.assert_("(genlCx CxTeam CxA)", "CxUniverse")
    live = {query: [] for query in STANDING}
    for (goal, ctx), events in live.items():
        kb.watch(events.append, goal, ctx)
    seqs = _history(kb)
    for (goal, ctx), events in live.items():
        assert events, (goal, ctx)
        for since in [seqs[0] - 1, *seqs]:
            resumed: list = []
            kb.unwatch(kb.watch(resumed.append, goal, ctx, since=since))
            assert resumed == [e for e in events if e.seq > since], (goal, ctx, since)


def test_a_resumed_watch_with_a_goal_parses_only_the_changes_of_its_predicate(kb, monkeypatch):
    from koinii.kb import feed

    kb.edit(add=[(f"(p{k} X{i})", "CxA") for i in range(20) for k in range(5)])
    parsed: list[str] = []
    monkeypatch.setattr(feed, "parse", lambda text: parsed.append(text) or koinii.parse(text))
    events: list = []
    kb.watch(events.append, "(p1 ?x)", since=0)
    assert len(events[0].added) == 20
    assert parsed and all(text.startswith("(p1 ") for text in parsed)
