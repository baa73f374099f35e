"""A goal whose arity does not fit its predicate's declaration is refused `arity`, as a
write is: `query`, `watch` and `sentexes_matching` of `(answers ?who ?what)` at a
channel — `answers` takes three arguments there — were answered with nothing, and a
watch of it was accepted and never fired. Refused with the declared arity and an
example, the same in-process and over the wire (both clients). The declaration that
counts is the one a write at that context is held to; a goal read from everywhere, or
one a sentence in view does fit (stored where the declaration is not seen), is read."""

from __future__ import annotations

import pytest

import koinii
from koinii.channel import agent as channel
from tests.conftest import refused

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

WRONG = "(answers ?who ?what)"
DECLARED = {"predicate": "answers", "declared": 3, "given": 2, "example": "(answers ?a ?b ?c)"}


def reads(store, goal: str, ctx: str) -> dict:
    """Each read of `goal` at `ctx`: its refusal's (kind, message, data), or its answer."""

    def watch():
        if isinstance(store, koinii.KB):
            return store.watch(lambda event: None, goal=goal, ctx=ctx)
        return store.watch(goal=goal, ctx=ctx)["cursor"]

    calls = {
        "query": lambda: store.query(goal, ctx),
        "sentexes_matching": lambda: store.sentexes_matching(goal, ctx),
        "watch": watch,
    }
    out = {}
    for name, call in calls.items():
        try:
            out[name] = call()
        except koinii.Refused as refusal:
            out[name] = (refusal.kind, refusal.message, refusal.data)
    return out


def team(store) -> None:
    """AgentAtlas in CxDeploy; CxAtlas declares (arity likes 2); CxOld, which sees no
    vocabulary, holds a two-argument answers that CxLegacy sees beside the vocabulary."""
    medium = channel.local(store) if isinstance(store, koinii.KB) else channel.wire(store)
    channel.join(medium, "CxDeploy", "AgentAtlas")
    store.edit(
        add=[
            ("(arity likes 2)", "CxAtlas"),
            ("(likes Alice Bob)", "CxAtlas"),
            ("(answers Old Record)", "CxOld"),
            ("(genlCx CxLegacy CxOld)", "CxUniverse"),
            ("(genlCx CxLegacy CxSpeechActs)", "CxUniverse"),
        ]
    )


@pytest.fixture
def kb():
    with koinii.open_kb() as opened:
        team(opened)
        yield opened


def test_a_goal_of_the_wrong_arity_is_refused_with_the_declared_arity_and_an_example(kb):
    for read, (kind, message, data) in reads(kb, WRONG, "CxDeploy").items():
        assert kind == "arity", read
        assert data == DECLARED
        assert "answers takes 3 argument(s) at CxDeploy, not 2" in message
        assert "give it 3, e.g. (answers ?a ?b ?c)" in message


def test_a_goal_of_the_declared_arity_is_read_as_before(kb):
    found = reads(kb, "(answers ?who ?what ?q)", "CxDeploy")
    assert found["query"] == [] and found["sentexes_matching"] == []
    assert type(found["watch"]) is int


def test_a_declaration_holds_where_a_write_is_held_to_it(kb):
    assert refused(lambda: kb.query("(likes ?x)", "CxAtlas")).data["declared"] == 2
    assert kb.query("(likes ?x)", "CxOld") == []  # CxOld does not see CxAtlas
    assert kb.query("(likes ?x ?y)", "CxAtlas") == [
        {"?x": koinii.Sym("Alice"), "?y": koinii.Sym("Bob")}
    ]


def test_read_from_everywhere_or_fitting_a_sentence_in_view_a_goal_is_read(kb):
    record = [{"?who": koinii.Sym("Old"), "?what": koinii.Sym("Record")}]
    assert kb.query(WRONG, "?ctx") == [{**record[0], "?ctx": koinii.Sym("CxOld")}]
    assert [s.text for s in kb.sentexes_matching(WRONG, "CxEverything")] == ["(answers Old Record)"]
    assert type(kb.watch(lambda event: None, goal=WRONG)) is int
    assert kb.query(WRONG, "CxLegacy") == record  # CxLegacy sees the vocabulary and CxOld


def test_over_the_wire_the_same_refusal(start_daemon, connect, kb):
    daemon = start_daemon()
    client = connect(daemon)
    team(daemon.client())
    for goal, ctx in ((WRONG, "CxDeploy"), ("(likes ?x)", "CxAtlas")):
        over_the_wire = reads(client, goal, ctx)
        assert all(type(r) is tuple and r[0] == "arity" for r in over_the_wire.values())
        assert over_the_wire == reads(kb, goal, ctx)  # kind, message and data alike
