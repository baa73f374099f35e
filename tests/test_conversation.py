"""The conversation (channel.md): questions that bind, answers that are claims, disputes
of any move, withdrawal, and a question's life — each run in process (`channel.local`)
and over a real daemon with agent tokens (`channel.wire`), on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

import koinii
from koinii import Sym, Var, disputes, speech
from koinii.channel import agent as channel
from koinii.channel import conversation
from koinii.disputes import majority
from koinii.terms import parse, show
from tests.conftest import refused

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

TEAM = ("AgentAtlas", "AgentBoreas", "AgentCyra", "AgentDune")
PRINCIPALS = {**{a: "agent" for a in TEAM}, "AgentMajority": "arbiter", "Ops": "operator"}
VERSION = "(postgresMajorVersion ProdCluster ?version)"
READY = "(readyToShip BillingRelease)"


@dataclass
class Team:
    kind: str
    agents: dict[str, channel.Agent]
    store: Any  # what an operator sees: the KB, or an operator's client
    daemon: Any = None

    def __getitem__(self, name: str) -> channel.Agent:
        return self.agents[name]


@pytest.fixture
def team(request, start_daemon, new_location):
    """Atlas, Boreas, Cyra and Dune joined to CxTeam: in one process, or (a test's
    `BOTH_MEDIA`/`WIRE`) each over its own connection with its own agent token. The rules
    are the operations', which answer alike over the wire (tests/test_wire_contract.py);
    the tests over the wire are those about what the wire itself does."""
    if getattr(request, "param", "local") == "local":
        kb = koinii.open_kb(new_location())
        medium = channel.local(kb)
        yield Team("local", {a[5:]: channel.join(medium, "CxTeam", a) for a in TEAM}, kb)
        kb.close()
    else:
        daemon = start_daemon(principals=PRINCIPALS)
        agents = {a[5:]: channel.join(channel.wire(daemon.client(a)), "CxTeam", a) for a in TEAM}
        yield Team("wire", agents, daemon.client("Ops"), daemon)


BOTH_MEDIA = pytest.mark.parametrize("team", ["local", "wire"], indirect=True)
WIRE = pytest.mark.parametrize("team", ["wire"], indirect=True)


def unchanged(store, call) -> koinii.Refused:
    """The refusal `call()` raises, and that it wrote nothing."""
    seq = store.seq
    refusal = refused(call)
    assert store.seq == seq, f"{refusal.kind} wrote something"
    return refusal


# --- 1. questions may be patterns ----------------------------------------------------------


def test_a_pattern_question_is_stored_as_a_ground_fact_whose_variables_are_data(team):
    q = team["Atlas"].pose_query(VERSION)
    sentex = team.store.sentex(q)
    assert sentex.text == f"(queries AgentAtlas (quote {VERSION}))"
    assert sentex.sentence[2] == (speech.QUOTE, parse(VERSION))
    assert parse(show(sentex.sentence)) == sentex.sentence  # round-trips the text
    # the pattern's variables are inert: a query matches the quote only literally
    assert team.store.query(f"(queries ?who (quote {VERSION}))", "CxTeam") == [
        {"?who": Sym("AgentAtlas")}
    ]
    assert team.store.query("(queries ?who (quote (postgresMajorVersion ?c ?v)))", "CxTeam") == []
    [asked] = team.store.query("(queries AgentAtlas ?q)", "CxTeam")
    assert asked["?q"][1][2] is Var("version")


def test_the_questions_come_in_windows_newest_first_and_bad_windows_are_refused(team):
    atlas = team["Atlas"]
    asked = [atlas.pose_query(f"(versionOf Service{i} ?v)") for i in range(5)]
    assert [q["handle"] for q in atlas.queries(limit=2)] == asked[3:]
    assert [q["handle"] for q in atlas.queries(limit=2, before=asked[3])] == asked[1:3]
    assert [q["handle"] for q in atlas.queries()] == asked
    for bad in ({"limit": 0}, {"limit": "2"}, {"before": -1}, {"before": 2.5}, {"state": 5}):
        refusal = unchanged(team.store, lambda b=bad: atlas.queries(**b))
        assert refusal.kind == "bad-option", bad  # in-process and over the wire alike


def test_a_questions_answers_come_in_windows_and_bad_windows_are_refused(team):
    atlas = team["Atlas"]
    q = atlas.pose_query("(dependsOn BillingService ?service)")
    answers = [team[a].answer(f"Service{a}", q) for a in ("Boreas", "Cyra", "Dune")]
    whole = atlas.thread(q)
    last = atlas.thread(q, limit=2)
    assert [a["handle"] for a in last["answers"]] == answers[1:] and last["older"] == answers[1]
    assert last["answers"] == whole["answers"][1:]
    assert (last["state"], last["answer_count"]) == (whole["state"], 3)
    earlier = atlas.thread(q, limit=2, before=last["older"])
    assert [a["handle"] for a in earlier["answers"]] == answers[:1] and "older" not in earlier
    assert [a["handle"] for a in atlas.thread(q, before=answers[2])["answers"]] == answers[:2]
    assert "older" not in whole and "older" not in atlas.thread(q, limit=3)
    for bad in ({"limit": 0}, {"limit": "2"}, {"before": -1}, {"before": 2.5}):
        refusal = unchanged(team.store, lambda b=bad: atlas.thread(q, **b))
        assert refusal.kind == "bad-option", bad  # in-process and over the wire alike


def test_not_ground_still_guards_claims(team):
    refusal = unchanged(team.store, lambda: team["Atlas"].assert_(VERSION))
    assert refusal.kind == "not-ground"


def test_the_kinds_of_question(team):
    atlas = team["Atlas"]
    asked = {
        "pattern": atlas.pose_query(VERSION),
        "yes-no": atlas.pose_query(READY),
        "free-text": atlas.pose_query('"Which cache do we use?"'),
        "symbol": atlas.pose_query("WhichCacheProdClusterUses"),
    }
    found = {q["handle"]: q for q in atlas.queries()}
    for kind, handle in asked.items():
        assert found[handle]["question_kind"] == kind and found[handle]["state"] == "open"
    assert found[asked["pattern"]]["question"] == VERSION
    assert found[asked["free-text"]]["question"] == '"Which cache do we use?"'


def test_a_question_is_one_sentence(team):
    refusal = unchanged(team.store, lambda: team["Atlas"].pose_query("(and (p ?x) (q ?x))"))
    assert refusal.kind == "koinii/bad-question" and "one thing at a time" in refusal.message


def test_a_quote_is_a_term_not_a_claim(team):
    refusal = unchanged(team.store, lambda: team["Atlas"].assert_(f"(quote {VERSION})"))
    assert refusal.kind == "not-well-formed" and "is a term" in refusal.message


@pytest.mark.backends("sqlite", "postgres")
def test_the_quoted_pattern_survives_reopen_and_migrate(new_location, tmp_path):
    from koinii.kb.store.migrate import migrate

    first, second = new_location(), str(tmp_path / "copy.db")
    with koinii.open_kb(first) as kb:
        atlas = channel.join(channel.local(kb), "CxTeam", "AgentAtlas")
        q = atlas.pose_query(VERSION)
        boreas = channel.join(channel.local(kb), "CxTeam", "AgentBoreas")
        boreas.answer({"?version": "16"}, q)
    migrate(first, second)
    for location in (first, second):
        with koinii.open_kb(location) as kb:
            assert kb.sentex(q).text == f"(queries AgentAtlas (quote {VERSION}))"
            assert kb.query(VERSION, "CxTeam") == [{"?version": 16}]


# --- 2. answers are claims -------------------------------------------------------------------


def test_an_answer_binds_the_pattern_and_its_claim_is_seen_by_query(team):
    atlas, boreas, cyra, dune = team["Atlas"], team["Boreas"], team["Cyra"], team["Dune"]
    q = atlas.pose_query(VERSION)
    by_map = boreas.answer({"?version": "16"}, q)
    by_instance = cyra.answer("(postgresMajorVersion ProdCluster 15)", q)
    by_value = dune.answer("16", q)  # a pattern with one variable takes the value alone
    assert team.store.query(VERSION, "CxTeam") == [{"?version": 15}, {"?version": 16}]
    answers = {a["handle"]: a for a in atlas.thread(q)["answers"]}
    assert answers[by_map]["bindings"] == {"?version": "16"}
    assert answers[by_instance]["claim"]["sentence"] == "(postgresMajorVersion ProdCluster 15)"
    assert answers[by_value]["claim"]["speaker"] == "AgentDune"
    assert team.store.sentex(answers[by_map]["claim"]["handle"]).context == "CxBoreas"


def test_answers_that_do_not_answer_are_refused_and_write_nothing(team):
    atlas, boreas = team["Atlas"], team["Boreas"]
    q = atlas.pose_query(VERSION)
    yes_no = atlas.pose_query(READY)
    for content, question in (
        ({"?db": "Postgres"}, q),  # not a variable of the question
        ({}, q),  # leaves ?version unbound
        ("(postgresMajorVersion OtherCluster 16)", q),  # not an instance
        ("(usesDatabase ProdCluster Postgres)", q),
        ({"?version": "?v"}, q),  # not ground
        ("(readyToShip OtherRelease)", yes_no),
        ("Maybe", yes_no),
    ):
        refusal = unchanged(team.store, lambda c=content, t=question: boreas.answer(c, t))
        assert refusal.kind == "koinii/answer-mismatch", content
        assert "offered" in refusal.data
        assert "answer" in refusal.message.lower()  # says how to answer
    refusal = unchanged(team.store, lambda: boreas.answer({}, q))
    assert refusal.data["missing"] == ["?version"] and refusal.data["pattern"] == VERSION


def test_a_yes_no_answer_is_the_sentence_or_its_negation(team):
    atlas, boreas, cyra, dune = team["Atlas"], team["Boreas"], team["Cyra"], team["Dune"]
    q = atlas.pose_query(READY)
    boreas.answer(READY, q)
    cyra.answer(f"(not {READY})", q)
    dune.answer("false", q)
    claims = sorted(a["claim"]["sentence"] for a in atlas.thread(q)["answers"])
    assert claims == [f"(not {READY})", f"(not {READY})", READY]
    for word, claim in (("yes", READY), ("No", f"(not {READY})"), ("true", READY)):
        dune.answer(word, q)  # (a new answer replaces Dune's)
        mine = [a for a in atlas.thread(q)["answers"] if a["speaker"] == "AgentDune"]
        assert [a["claim"]["sentence"] for a in mine] == [claim], word
    # the claims are claims: the two sides clash where the channel sees them
    [clash] = team.store.contradictions("CxTeam")
    assert {s["sentence"] for s in clash["sides"]} == {READY, f"(not {READY})"}
    assert atlas.thread(q)["state"] == "contested"


def test_a_closed_question_takes_no_answers_until_its_asker_reopens_it(team):
    atlas, boreas, cyra = team["Atlas"], team["Boreas"], team["Cyra"]
    q = atlas.pose_query('"Who owns the runbook?"')
    by_hand = f"(closes AgentCyra (sentexHandle {q}))"  # not the asker: not a closing
    assert unchanged(team.store, lambda: cyra.claim(by_hand)).kind == "koinii/use-the-move"
    assert unchanged(team.store, lambda: cyra.close(q)).kind == "koinii/not-the-asker"
    team.store.assert_(by_hand, "CxCyra", creator="AgentCyra")  # an operator's, or legacy
    boreas.answer('"Dana"', q)
    closing = atlas.close(q)
    refusal = unchanged(team.store, lambda: boreas.answer('"Erin"', q))
    assert refusal.kind == "koinii/question-closed"
    assert refusal.data == {"question": q, "closing": closing, "asker": "AgentAtlas"}
    atlas.withdraw(closing)
    boreas.answer('"Erin"', q)
    assert [a["content"] for a in atlas.thread(q)["answers"]] == ['"Erin"']


def test_a_closing_or_acceptance_by_anyone_but_the_asker_is_told_as_not_obeyed(team):
    from koinii.channel.narrator import Narrator

    atlas, boreas = team["Atlas"], team["Boreas"]
    q = atlas.pose_query('"Who owns the runbook?"')
    a = boreas.answer('"Dana"', q)
    since = team.store.seq
    # refused to Cyra herself (koinii/use-the-move); written by an operator, or kept
    # from before the rule held, they are shown and never obeyed
    team.store.assert_(f"(closes AgentCyra (sentexHandle {q}))", "CxCyra", creator="AgentCyra")
    team.store.assert_(f"(accepts AgentCyra (sentexHandle {a}))", "CxCyra", creator="AgentCyra")
    atlas.accept(a)
    narrator = Narrator(team.store, me="AgentAtlas")
    told = [
        t.text
        for entry in team.store.changes(since=since)["entries"]
        for t in narrator.entry(entry)
    ]
    assert told == [
        f"AgentCyra wrote a closing of question #{q}, which only the asker AgentAtlas can "
        "make: not obeyed",
        f"AgentCyra wrote an acceptance of answer #{a}, which only the asker AgentAtlas can "
        "make: not obeyed",
        f'AgentAtlas accepted AgentBoreas\'s answer #{a} ("Dana") to question #{q}',
    ]


def test_a_free_text_answer_claims_its_content_for_the_question(team):
    q = team["Atlas"].pose_query('"Which cache do we use?"')
    a = team["Boreas"].answer('"Redis 7, one primary"', q)
    [entry] = team["Atlas"].thread(q)["answers"]
    assert entry["handle"] == a and entry["content"] == '"Redis 7, one primary"'
    assert entry["claim"]["sentence"] == f'(answerTo (sentexHandle {q}) "Redis 7, one primary")'
    assert team.store.query(f"(answerTo (sentexHandle {q}) ?what)", "CxTeam") == [
        {"?what": "Redis 7, one primary"}
    ]


def test_two_answers_to_a_functional_pattern_are_a_contradiction(team):
    # declared in the vocabulary every agent speaks: a declaration governs the writes of
    # the contexts that see it, so one in Atlas's own context would govern Atlas's alone
    team.store.assert_("(functional postgresMajorVersion)", "CxSpeechActs")
    q = team["Atlas"].pose_query(VERSION)
    b = team["Boreas"].answer("16", q)
    c = team["Cyra"].answer("15", q)
    [clash] = team.store.contradictions("CxTeam")
    claims = {a["handle"]: a["claim"]["handle"] for a in team["Atlas"].thread(q)["answers"]}
    assert sorted(clash["handles"]) == sorted([claims[b], claims[c]])


def test_an_answers_claim_lives_and_dies_with_it(team):
    atlas, boreas = team["Atlas"], team["Boreas"]
    q = atlas.pose_query(VERSION)
    a = boreas.answer("16", q)
    claim = atlas.thread(q)["answers"][0]["claim"]["handle"]
    assert team.store.why(claim)["justifications"][0]["antecedents"][0]["handle"] == a
    atlas.withdraw(q)  # the question goes: its answers go, and their claims with them
    assert team.store.sentex(a) is None and team.store.sentex(claim) is None
    assert team.store.query(VERSION, "CxTeam") == []


def test_an_answers_claim_cannot_speak_for_another_agent(team):
    q = team["Atlas"].pose_query("(endorses ?who (sentexHandle 1))")
    refusal = unchanged(team.store, lambda: team["Boreas"].answer("AgentCyra", q))
    assert refusal.kind == "koinii/speaker-mismatch" and "dispute it" in refusal.message


# --- 3. dispute any move ---------------------------------------------------------------------


def test_disputing_an_answer_disputes_its_claim(team):
    q = team["Atlas"].pose_query(VERSION)
    a = team["Boreas"].answer("16", q)
    edge = team["Cyra"].dispute(a)
    [entry] = team["Atlas"].thread(q)["answers"]
    claim = entry["claim"]
    assert team.store.sentex(edge).text == f"(disputes AgentCyra (sentexHandle {claim['handle']}))"
    [dispute] = claim["disputes"]
    assert dispute["target"]["handle"] == claim["handle"] and dispute["state"] == "open"
    assert [m["speaker"] for m in dispute["raised_by"]] == ["AgentCyra"]
    assert team["Atlas"].thread(q)["state"] == "contested"
    [clash] = team.store.contradictions("CxTeam")
    assert claim["handle"] in clash["handles"]


def test_moves_that_assert_nothing_are_not_disputable(team):
    atlas, boreas, cyra = team["Atlas"], team["Boreas"], team["Cyra"]
    claim = atlas.assert_("(usesDatabase ProdCluster PostgreSQL16)")
    q = atlas.pose_query(VERSION)
    moves = {
        "endorsement": boreas.endorse(claim),
        "justification": boreas.justify("MatureReplication", claim),
        "ballot": boreas.vote("for", claim),
        "error": boreas.not_understood(claim),
        "dispute": boreas.dispute(claim),
        "question": q,
    }
    for kind, handle in moves.items():
        refusal = unchanged(team.store, lambda h=handle: cyra.dispute(h))
        assert refusal.kind == "koinii/not-disputable", kind
        assert refusal.data["kind"] == kind
        assert (
            "dispute(" in refusal.message
            or "vote(" in refusal.message
            or "answer question #" in (refusal.message)
        ), refusal.message
    own = unchanged(team.store, lambda: atlas.dispute(claim))
    assert own.kind == "koinii/not-disputable" and f"withdraw({claim})" in own.message


def test_the_disputes_come_in_windows_and_bad_windows_are_refused(team):
    atlas, cyra = team["Atlas"], team["Cyra"]
    claims = [atlas.assert_(f"(usesDatabase Service{i} PostgreSQL16)") for i in range(5)]
    for claim in claims:
        cyra.dispute(claim)
    every = atlas.disputes()
    ids = [d["dispute_id"] for d in every]
    assert [d["target"]["handle"] for d in every] == claims and ids == sorted(ids)
    assert atlas.disputes(limit=2) == every[3:]
    assert atlas.disputes(limit=2, before=ids[3]) == every[1:3]
    assert atlas.disputes(before=ids[1]) == every[:1]
    assert atlas.disputes(state="open", limit=1) == every[4:]
    assert atlas.disputes(state="resolved", limit=1) == []
    for bad in (
        {"limit": 0},
        {"limit": "2"},
        {"before": []},
        {"before": [0]},
        {"before": 3},
        {"state": 5},
    ):
        refusal = unchanged(team.store, lambda b=bad: atlas.disputes(**b))
        assert refusal.kind == "bad-option", bad  # in-process and over the wire alike


def disputes_built(monkeypatch) -> list[tuple[int, ...]]:
    """The ids of the disputes read in full from now on (`_Reader.dispute_entry`)."""
    built: list[tuple[int, ...]] = []
    build = conversation._Reader.dispute_entry
    monkeypatch.setattr(
        conversation._Reader,
        "dispute_entry",
        lambda reader, key, group: built.append(key) or build(reader, key, group),
    )
    return built


def test_a_read_builds_in_full_only_the_disputes_it_shows(monkeypatch):
    kb = koinii.open_kb(None)
    medium = channel.local(kb)
    atlas, boreas, cyra = (channel.join(medium, "CxTeam", a) for a in TEAM[:3])
    for i in range(30):  # a long channel's disputes, none of them about the question
        cyra.dispute(atlas.assert_(f"(usesDatabase Service{i} PostgreSQL16)"))
    q = atlas.pose_query(VERSION)
    cyra.dispute(boreas.answer("16", q))
    built = disputes_built(monkeypatch)
    [answer] = atlas.thread(q)["answers"]
    assert len(answer["claim"]["disputes"]) == 1 and len(built) == 1
    assert len(atlas.queries(limit=1)) == 1 and len(built) == 2
    assert len(atlas.disputes(limit=3)) == 3 and len(built) == 5


def test_a_page_of_disputes_counts_every_state_and_builds_only_its_window(monkeypatch):
    """The web view's disputes page (`dispute_window`): the counts and the window are
    what `disputes_on` lists, newest first — open, notified, stale, resolved and ended
    alike — and only the window's disputes are built in full."""
    kb = koinii.open_kb(None)
    medium = channel.local(kb)
    atlas, cyra = (channel.join(medium, "CxTeam", a) for a in (TEAM[0], TEAM[2]))
    edges = [cyra.dispute(atlas.claim(f"(usesDatabase Service{i} PostgreSQL16)")) for i in range(6)]
    firm = kb.assert_("(usesCache Billing Redis)", "CxAtlas", strength="monotonic")
    cyra.dispute(firm)  # its rebuttal is defeated: resolved
    ids = [d["dispute_id"] for d in conversation.disputes_on(kb, "CxTeam")]
    disputes.mark_notified(kb, ids[1], 1)
    disputes.mark_notified(kb, ids[2], 1)
    disputes.mark_stale(kb, ids[2], 2)
    cyra.withdraw(edges[3])  # ended
    every = conversation.disputes_on(kb, "CxTeam")[::-1]
    states = conversation.DISPUTE_STATES
    built = disputes_built(monkeypatch)
    page = conversation.dispute_window(kb, "CxTeam", skip=1, limit=3)
    assert page["counts"] == {"open": 3, "notified": 1, "stale": 1, "resolved": 1, "ended": 1}
    assert page["total"] == page["matched"] == len(every) == 7
    assert [d["state"] for d in page["disputes"]] == ["open", "open", "ended"]
    assert page["disputes"] == every[1:4] and len(built) == 2  # (an ended one: its record)
    for state in states:
        shown = conversation.dispute_window(kb, "CxTeam", state)
        assert shown["disputes"] == [d for d in every if d["state"] == state], state
        assert shown["matched"] == page["counts"][state]
    refusal = unchanged(kb, lambda: conversation.dispute_window(kb, "CxTeam", "ruled"))
    assert refusal.kind == "bad-option" and refusal.data["known"] == list(states)


def test_no_path_through_dispute_is_a_speaker_mismatch(team):
    q = team["Atlas"].pose_query(READY)
    for target in (team["Boreas"].answer("true", q), team["Boreas"].assert_("(slow ProdCluster)")):
        team["Cyra"].dispute(target)  # never koinii/speaker-mismatch


# --- 4. withdraw and supersede ----------------------------------------------------------------


def test_withdraw_takes_back_a_move_with_its_cascade(team):
    atlas, boreas, cyra = team["Atlas"], team["Boreas"], team["Cyra"]
    claim = atlas.assert_("(usesDatabase ProdCluster PostgreSQL16)")
    replies = [boreas.endorse(claim), boreas.vote("for", claim), cyra.dispute(claim)]
    atlas.withdraw(claim)
    assert [team.store.sentex(h) for h in [claim, *replies]] == [None] * 4
    assert team.store.contradictions("CxTeam") == []  # Cyra's rebuttal is not left alone


def test_withdrawing_a_dispute_takes_its_rebuttal_along(team):
    claim = team["Atlas"].assert_("(usesDatabase ProdCluster PostgreSQL16)")
    edge = team["Cyra"].dispute(claim)
    team["Cyra"].withdraw(edge)
    assert team.store.sentexes_matching("(not (usesDatabase ?c ?d))", "?ctx") == []
    assert team.store.contradictions("CxTeam") == [] and team.store.sentex(claim) is not None


def test_withdrawing_an_answers_claim_withdraws_the_answer(team):
    q = team["Atlas"].pose_query(VERSION)
    a = team["Boreas"].answer("16", q)
    claim = team["Atlas"].thread(q)["answers"][0]["claim"]["handle"]
    team["Boreas"].withdraw(claim)
    assert team.store.sentex(a) is None and team["Atlas"].thread(q)["state"] == "open"


def test_another_agents_move_is_not_withdrawn(team):
    claim = team["Atlas"].assert_("(usesDatabase ProdCluster PostgreSQL16)")
    refusal = unchanged(team.store, lambda: team["Boreas"].withdraw(claim))
    assert refusal.kind == "koinii/foreign-sentex"
    assert f"dispute({claim})" in refusal.message


def test_what_no_move_wrote_is_not_withdrawn(team):
    [mark] = team.store.sentexes_matching("(agentContext CxAtlas AgentAtlas)", "CxAtlas")
    assert unchanged(team.store, lambda: team["Atlas"].withdraw(mark.handle)).kind == (
        "koinii/not-a-move"
    )
    assert unchanged(team.store, lambda: team["Atlas"].withdraw(10**9)).kind == (
        "koinii/no-such-handle"
    )


def test_a_new_answer_supersedes_the_agents_earlier_one(team):
    q = team["Atlas"].pose_query(VERSION)
    first = team["Boreas"].answer("15", q)
    assert team["Boreas"].answer("15", q) == first  # the same content: the same answer
    second = team["Boreas"].answer("16", q)
    assert team.store.sentex(first) is None
    [entry] = team["Atlas"].thread(q)["answers"]
    assert entry["handle"] == second and entry["bindings"] == {"?version": "16"}
    assert team.store.query(VERSION, "CxTeam") == [{"?version": 16}]
    # the change log keeps the history
    log = team.store.changes(since=0, limit=10_000)["entries"]
    assert any(
        c["handle"] == first and c.get("reason") == "retracted" for e in log for c in e["removed"]
    )


def test_a_vote_with_the_other_stance_replaces_the_ballot(team):
    claim = team["Atlas"].assert_("(usesDatabase ProdCluster PostgreSQL16)")
    against = team["Boreas"].vote("against", claim)
    assert team["Boreas"].vote("against", claim) == against
    assert majority.tally(team.store, claim) == {"for": 0, "against": 1}
    now_for = team["Boreas"].vote("for", claim)
    assert team.store.sentex(against) is None and now_for != against
    assert majority.tally(team.store, claim) == {"for": 1, "against": 0}
    [ballot] = team["Atlas"].thread(claim)["ballots"]
    assert (ballot["voter"], ballot["stance"], ballot["counted"]) == ("AgentBoreas", "for", True)


def test_a_bad_stance_and_a_bad_target_are_refused(team):
    claim = team["Atlas"].assert_("(usesDatabase ProdCluster PostgreSQL16)")
    refusal = unchanged(team.store, lambda: team["Boreas"].vote("abstain", claim))
    assert refusal.kind == "koinii/no-such-stance" and "stance='against'" in refusal.message
    q = team["Atlas"].pose_query(VERSION)
    refusal = unchanged(team.store, lambda: team["Boreas"].vote("for", q))
    assert refusal.kind == "koinii/not-votable" and f"answer question #{q}" in refusal.message


# --- 5. a question's life ---------------------------------------------------------------------


def state(team, q) -> str:
    return team["Atlas"].thread(q)["state"]


def test_every_state_of_a_question(team):
    atlas, boreas, cyra = team["Atlas"], team["Boreas"], team["Cyra"]
    q = atlas.pose_query(VERSION)
    assert state(team, q) == "open"
    b = boreas.answer("16", q)
    assert state(team, q) == "answered"
    c = cyra.answer("15", q)
    assert state(team, q) == "contested"  # the standing answers differ
    cyra.withdraw(c)
    assert state(team, q) == "answered"
    edge = cyra.dispute(b)
    assert state(team, q) == "contested"  # the only answer is disputed
    cyra.withdraw(edge)
    atlas.accept(b)
    assert state(team, q) == "settled"
    assert [x["handle"] for x in atlas.open_queries()] == []
    assert [x["state"] for x in atlas.queries("settled")] == ["settled"]

    other = atlas.pose_query('"Who owns the runbook?"')
    closing = atlas.close(other)
    assert state(team, other) == "closed"
    atlas.withdraw(closing)
    assert state(team, other) == "open"  # reopened


def test_a_ruling_on_an_answers_claim_settles_the_question(team):
    atlas, boreas, cyra, dune = team["Atlas"], team["Boreas"], team["Cyra"], team["Dune"]
    q = atlas.pose_query(VERSION)
    b = boreas.answer("16", q)
    cyra.dispute(b)
    claim = atlas.thread(q)["answers"][0]["claim"]["handle"]
    for agent, stance in ((atlas, "for"), (boreas, "for"), (dune, "against")):
        agent.vote(stance, b)
    [dispute] = atlas.disputes()
    won = majority.resolve_by_majority(team.store, dispute["dispute_id"], claim, "CxTeam")
    assert (won["for"], won["against"], won["outcome"]) == (2, 1, "for")
    thread = atlas.thread(q)
    assert thread["state"] == "settled" and thread["ruling"]["upholds"] is True
    [dispute] = atlas.disputes()
    assert dispute["state"] == "resolved" and dispute["ruling"]["arbiter"] == "AgentMajority"


def test_only_the_asker_accepts_or_closes(team):
    q = team["Atlas"].pose_query(VERSION)
    a = team["Boreas"].answer("16", q)
    for call in (lambda: team["Cyra"].accept(a), lambda: team["Cyra"].close(q)):
        refusal = unchanged(team.store, call)
        assert refusal.kind == "koinii/not-the-asker" and refusal.data["asker"] == "AgentAtlas"
    assert unchanged(team.store, lambda: team["Atlas"].accept(q)).kind == "koinii/not-an-answer"
    assert unchanged(team.store, lambda: team["Atlas"].close(a)).kind == "koinii/not-a-question"
    assert unchanged(team.store, lambda: team["Boreas"].answer("16", a)).kind == (
        "koinii/not-a-question"
    )


def test_an_acceptance_by_anyone_but_the_asker_is_shown_never_obeyed(team):
    q = team["Atlas"].pose_query(VERSION)
    a = team["Boreas"].answer("16", q)
    by_hand = f"(accepts AgentCyra (sentexHandle {a}))"
    assert unchanged(team.store, lambda: team["Cyra"].claim(by_hand)).kind == (
        "koinii/use-the-move"
    )
    team.store.assert_(by_hand, "CxCyra", creator="AgentCyra")  # an operator's, or legacy
    assert state(team, q) == "answered"


def test_accepting_another_answer_replaces_the_acceptance(team):
    q = team["Atlas"].pose_query(VERSION)
    b = team["Boreas"].answer("16", q)
    c = team["Cyra"].answer("15", q)
    first = team["Atlas"].accept(b)
    team["Atlas"].accept(c)
    assert team.store.sentex(first) is None and team["Atlas"].thread(q)["accepted"] == c


def test_open_queries_is_this_channels_unsettled_questions(team):
    q = team["Atlas"].pose_query(VERSION)
    settled = team["Atlas"].pose_query(READY)
    team["Atlas"].accept(team["Boreas"].answer("true", settled))
    elsewhere = channel.join(team["Boreas"].medium, "CxOther", "AgentBoreas")
    [entry] = team["Atlas"].open_queries()
    assert (entry["handle"], entry["state"], entry["answer_count"]) == (q, "open", 0)
    assert [x["handle"] for x in elsewhere.open_queries()] == []  # CxOther sees no asker


def test_bad_filters_are_refused(team):
    assert refused(lambda: team["Atlas"].queries("pending")).kind == "bad-option"
    assert refused(lambda: team["Atlas"].disputes("hot")).kind == "bad-option"


# --- 6. one read per thread ---------------------------------------------------------------------


def test_a_thread_is_everything_said_about_a_claim(team):
    atlas, boreas, cyra, dune = team["Atlas"], team["Boreas"], team["Cyra"], team["Dune"]
    claim = boreas.assert_("(usesDatabase ProdCluster PostgreSQL16)")
    atlas.endorse(claim)
    boreas.justify("MatureReplication", claim)
    cyra.dispute(claim)
    dune.vote("against", claim)
    thread = atlas.thread(claim)
    assert thread["kind"] == "claim" and thread["speaker"] == "AgentBoreas"
    assert [e["speaker"] for e in thread["endorsements"]] == ["AgentAtlas"]
    assert [j["ground"] for j in thread["justifications"]] == ["MatureReplication"]
    assert [d["raised_by"][0]["speaker"] for d in thread["disputes"]] == ["AgentCyra"]
    assert thread["tally"] == {"for": 0, "against": 1}
    # a reply opens the thread of its target, focused on itself
    ballot = thread["ballots"][0]["handle"]
    focused = atlas.thread(ballot)
    assert focused["handle"] == claim and focused["focus"]["handle"] == ballot


@WIRE
def test_thread_and_disputes_are_one_request_each(team):
    atlas = team["Atlas"]
    q = atlas.pose_query(VERSION)
    a = team["Boreas"].answer("16", q)
    team["Cyra"].dispute(a)
    team["Dune"].vote("against", a)
    transport = atlas.store._transport
    sent = []
    real = transport.post
    transport.post = lambda path, body, extra=0.0: sent.append(path) or real(path, body, extra)
    try:
        thread = atlas.thread(q)
        found = atlas.disputes()
    finally:
        transport.post = real
    assert sent == ["/v1/conversation/thread", "/v1/conversation/disputes"]
    assert thread["answers"][0]["claim"]["disputes"] and found


def test_a_thread_of_nothing_is_refused_by_name(team):
    refusal = refused(lambda: team["Atlas"].thread(10**9))
    assert refusal.kind == "koinii/no-such-handle" and "questions()" in refusal.message
    assert refused(lambda: team["Atlas"].thread(0)).kind == "bad-handle"


@BOTH_MEDIA
def test_the_reads_are_the_same_in_process_and_over_the_wire(team):
    q = team["Atlas"].pose_query(VERSION)
    team["Boreas"].answer("16", q)
    local = conversation.thread(team.store, q, "CxTeam") if team.kind == "local" else None
    read = team["Atlas"].thread(q)
    if local is not None:
        assert read == local
    assert all(isinstance(k, str) for k in read)  # JSON values either way
    import json

    assert json.loads(json.dumps(read)) == read


# --- 8. subscriptions mean the same on both media ------------------------------------------------


@BOTH_MEDIA
def test_every_move_on_the_channel_without_a_goal(team):
    from tests.conftest import wait_until

    heard: list = []
    sub = team["Boreas"].subscribe(None, "CxTeam", heard.append, wait_ms=1000)
    try:
        team["Atlas"].pose_query(VERSION)
        team.store.assert_("(elsewhere Thing)", "CxNotOnTheChannel")
        assert wait_until(lambda: heard)
        sentences = [c["sentence"] for e in heard for c in e.added]
        assert sentences == [f"(queries AgentAtlas (quote {VERSION}))"]
    finally:
        sub.stop()


@BOTH_MEDIA
def test_a_callback_that_raises_is_reported_to_on_error_on_both_media(team):
    from tests.conftest import wait_until

    errors: list = []

    def explode(event):
        raise RuntimeError("boom")

    sub = team["Boreas"].subscribe(
        "(queries ?a ?q)", "CxTeam", explode, wait_ms=1000, on_error=errors.append
    )
    try:
        team["Atlas"].pose_query(VERSION)
        assert wait_until(lambda: errors)
        assert isinstance(errors[0], RuntimeError)
    finally:
        sub.stop()


@BOTH_MEDIA
def test_an_unwatchable_goal_is_refused_the_same_on_both_media(team):
    refusal = refused(lambda: team["Boreas"].subscribe(["(p ?x)", "(q ?x)"], "CxTeam", print))
    assert refusal.kind == "not-watchable"


def test_a_decision_carries_its_reason_to_the_thread_and_the_feed(team):
    from koinii.channel.narrator import Narrator

    atlas, boreas = team["Atlas"], team["Boreas"]
    q = atlas.ask(VERSION)
    a = boreas.answer(q, "16")
    since = team.store.seq
    atlas.accept(a, reason="matches the release notes")
    thread = atlas.thread(q)
    assert (thread["accepted"], thread["acceptance_reason"]) == (a, "matches the release notes")
    other = atlas.ask('"Who owns the runbook?"')
    atlas.close(other, reason="moot: the runbook was retired")
    assert atlas.thread(other)["closing_reason"] == "moot: the runbook was retired"
    narrator = Narrator(team.store, me="AgentAtlas")
    told = [t.text for e in team.store.changes(since=since)["entries"] for t in narrator.entry(e)]
    assert told[0].endswith('because "matches the release notes"')
    assert told[-1].endswith('because "moot: the runbook was retired"')
    for bad in ("", "   ", "x" * 2_001, 5):
        refusal = unchanged(team.store, lambda b=bad: atlas.close(other, reason=b))
        assert refusal.kind == "bad-option"
