"""The record of a disagreement (issue 38): what was said stays said. A move taken back —
withdrawn, conceded, superseded — leaves a record with the disputes and ballots it
carried and how each ended; reads as of a point of the log; one-value questions and
declared single-valued predicates make differing values a contradiction; `concede` and
the channel roster — each over a real daemon (and in process), on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid

import pytest

import koinii
from koinii.channel import agent as channel
from koinii.kb.store.migrate import migrate
from tests.conftest import refused
from tests.test_mcp import mcp_agent, play

TEAM = ("AgentAtlas", "AgentBoreas", "AgentCyra", "AgentDune")
PRINCIPALS = {**{a: "agent" for a in TEAM}, "Ops": "operator"}
POOL = "(poolSize ProdDb ?size)"


@pytest.fixture(params=["local", "wire"])
def team(request, start_daemon, new_location):
    """Atlas, Boreas, Cyra and Dune on CxTeam, in one process or each over its own token;
    `store` is what an operator sees."""
    if request.param == "local":
        kb = koinii.open_kb(new_location())
        medium = channel.local(kb)
        yield {a[5:]: channel.join(medium, "CxTeam", a) for a in TEAM}, kb
        kb.close()
    else:
        daemon = start_daemon(principals=PRINCIPALS)
        agents = {a[5:]: channel.join(channel.wire(daemon.client(a)), "CxTeam", a) for a in TEAM}
        yield agents, daemon.client("Ops")


def _disputed_answer(agents):
    """Atlas asks the pool size; Boreas answers 500, Cyra disputes it, Dune votes against
    and Atlas endorses it. Returns (question, Boreas's answer, its claim, Cyra's dispute)."""
    q = agents["Atlas"].ask(POOL)
    made = agents["Boreas"].move("answer", question=q, content={"?size": 500})
    disputed = agents["Cyra"].move("dispute", target=made["handle"])
    agents["Dune"].vote(made["handle"], "against")
    agents["Atlas"].endorse(made["handle"])
    return q, made["handle"], made["claim_handle"], disputed


def _reads(agent, q, answer, ending):
    """What a later reader finds of Boreas's answer, taken back with `ending`."""
    found = agent.thread(q)
    assert found["answers"] == [] and found["state"] == "open"
    [gone] = found["withdrawn_answers"]
    assert gone["handle"] == answer and gone["speaker"] == "AgentBoreas"
    assert gone["withdrawn"]["ending"] == ending and gone["withdrawn"]["by"] == "AgentBoreas"
    assert [b["speaker"] for b in gone["ballots"]] == ["AgentDune"]
    assert [e["speaker"] for e in gone["endorsements"]] == ["AgentAtlas"]
    [dispute] = [d for d in gone["disputes"] if d["class"] == "contradiction"]
    assert dispute["ending"] == ending and dispute["state"] == "ended"
    assert [m["speaker"] for m in dispute["raised_by"]] == ["AgentCyra"]
    assert dispute["tally"] == {"for": 0, "against": 1}
    # the withdrawn handle reads as withdrawn, never as unknown
    alone = agent.thread(answer)
    assert alone["withdrawn"]["ending"] == ending and alone["believed"] is False
    ended = agent.disputes(state="ended")
    assert [d["raised_by"][0]["speaker"] for d in ended] == ["AgentCyra"]
    assert agent.disputes(state=ending) == ended
    assert all(d["ending"] is None for d in agent.disputes(state="open"))
    return gone


@pytest.mark.parametrize("how", ["withdraw", "concede"])
def test_a_dispute_on_a_taken_back_answer_stays_in_the_record_after_a_restart(how, start_daemon):
    daemon = start_daemon(principals=PRINCIPALS)
    agents = {a[5:]: channel.join(channel.wire(daemon.client(a)), "CxTeam", a) for a in TEAM}
    q, answer, claim, _ = _disputed_answer(agents)
    if how == "withdraw":
        agents["Boreas"].withdraw(answer)
        ending, reason = "withdrawn", None
    else:
        made = agents["Boreas"].concede(claim, "the prod config says 800")  # its claim: one
        assert made["withdrawn"] == answer and made["ending"] == "conceded"
        ending, reason = "conceded", "the prod config says 800"
    late = channel.join(channel.wire(daemon.client("AgentDune")), "CxTeam", "AgentDune")
    before = _reads(late, q, answer, ending)
    assert before["withdrawn"]["reason"] == reason
    refusal = refused(lambda: late.vote(answer, "for"))
    assert refusal.kind == "koinii/withdrawn" and "thread(" in str(refusal)

    daemon.restart()
    again = channel.join(channel.wire(daemon.client("AgentAtlas")), "CxTeam", "AgentAtlas")
    assert _reads(again, q, answer, ending) == before


def test_as_of_reads_what_the_channel_showed_at_that_seq(team):
    agents, store = team
    atlas = agents["Atlas"]
    asked_at = store.seq
    q, answer, _, disputed = _disputed_answer(agents)
    then = store.seq
    shown = atlas.thread(q)
    listed = atlas.disputes()
    agents["Boreas"].concede(answer, "wrong cluster")
    agents["Cyra"].answer(q, {"?size": 800})

    assert atlas.thread(q, as_of=then) == shown  # what was shown at that seq, exactly
    assert atlas.disputes(as_of=then) == listed
    assert [x["handle"] for x in atlas.questions(state="all", as_of=asked_at)] == []
    assert atlas.questions(state="all", as_of=then)[0]["state"] == "contested"
    now = atlas.thread(q)
    assert [a["speaker"] for a in now["answers"]] == ["AgentCyra"]
    assert now["withdrawn_answers"][0]["withdrawn"]["reason"] == "wrong cluster"
    refusal = refused(lambda: atlas.thread(q, as_of=store.seq + 50))
    assert refusal.kind == "bad-option"
    assert disputed["rebuttal"] in {s["handle"] for d in listed for s in d["sides"]}


def test_as_of_before_a_ruling_shows_what_the_ruling_defeated_as_believed_then(team):
    """Belief as of a seq: a claim a later ruling defeats was believed then, and its
    dispute open — as the reads showed it before the ruling."""
    from koinii.client.adjudicator import Adjudicator, Policy

    agents, store = team
    atlas = agents["Atlas"]
    q = atlas.ask(POOL)
    made = agents["Boreas"].move("answer", question=q, content={"?size": 500})
    agents["Cyra"].move("dispute", target=made["handle"])
    agents["Dune"].vote(made["handle"], "against")
    before = store.seq
    shown = (atlas.thread(q), atlas.disputes(), atlas.questions(state="all"))
    assert shown[0]["answers"][0]["claim"]["believed"] is True
    Adjudicator(store, "CxTeam", Policy(quorum=1)).settle()
    assert atlas.thread(made["claim_handle"])["believed"] is False  # the ruling defeats it
    then = (
        atlas.thread(q, as_of=before),
        atlas.disputes(as_of=before),
        atlas.questions(state="all", as_of=before),
    )
    assert then == shown


def test_as_of_a_time_reads_the_last_write_made_by_then(kb):
    medium = channel.local(kb)
    atlas, boreas = (channel.join(medium, "CxTeam", a) for a in TEAM[:2])
    q = atlas.ask(POOL)
    answer = boreas.answer(q, {"?size": 500})
    at = kb.log_point(seq=kb.seq)["at"]
    shown = atlas.thread(q)
    boreas.withdraw(answer)
    assert atlas.thread(q, as_of_ms=at) == shown
    assert refused(lambda: atlas.thread(q, as_of=1, as_of_ms=at)).kind == "bad-option"


def test_two_differing_answers_contest_a_one_value_question_with_no_dispute_written(team):
    agents, store = team
    q = agents["Atlas"].ask(POOL)
    agents["Boreas"].answer(q, {"?size": 500})
    agents["Cyra"].answer(q, {"?size": 800})
    assert agents["Atlas"].thread(q)["state"] == "contested"
    assert store.query("(disputes ?who ?what)", "CxTeam") == []  # nobody disputed
    [values] = agents["Dune"].disputes()
    assert values["class"] == "values" and values["question"] == q
    assert sorted(s["sentence"] for s in values["sides"]) == [
        "(poolSize ProdDb 500)",
        "(poolSize ProdDb 800)",
    ]
    agents["Boreas"].answer(q, {"?size": 800})  # Boreas comes round: no conflict left
    assert agents["Dune"].disputes(state="open") == []
    [superseded] = agents["Atlas"].thread(q)["withdrawn_answers"]
    assert superseded["withdrawn"]["ending"] == "superseded"


def test_a_declared_single_valued_predicate_clashes_at_the_channel_and_not_elsewhere(team):
    agents, store = team
    for name in ("Boreas", "Cyra"):  # both also on a channel that declares nothing
        channel.join(agents[name].medium, "CxOther", f"Agent{name}")
    agents["Boreas"].claim("(leaks BillingWorker Yes)")
    agents["Cyra"].claim("(leaks BillingWorker No)")
    assert agents["Atlas"].disputes() == []  # not declared: two claims, no clash
    store.assert_("(functional leaks)", "CxTeam")  # the channel's operator declares it
    [clash] = agents["Atlas"].disputes()
    assert clash["class"] == "values" and clash["state"] == "open"
    assert sorted(s["speaker"] for s in clash["sides"]) == ["AgentBoreas", "AgentCyra"]
    other = channel.join(agents["Boreas"].medium, "CxOther", "AgentBoreas")
    assert other.disputes() == []  # CxOther does not see CxTeam's declaration


def test_a_predicate_declared_single_valued_in_an_argument_clashes_at_the_channel_only(team):
    """`(singleValued P N)` (Cyc's functionalInArgs): the engine's `contradictions` list
    differing values of argument N at a context that sees the declaration — the channel
    whose operator declared it — and nowhere that cannot see it."""
    agents, store = team
    for name in ("Boreas", "Cyra"):  # both also on a channel that declares nothing
        channel.join(agents[name].medium, "CxOther", f"Agent{name}")
    billing = agents["Boreas"].claim("(leakingService BillingWorker Incident7)")
    search = agents["Cyra"].claim("(leakingService SearchIndexer Incident7)")
    agents["Dune"].claim("(leakingService SearchIndexer Incident8)")  # another incident
    assert store.contradictions("CxTeam") == []  # not declared: three claims, no clash
    store.assert_("(singleValued leakingService 1)", "CxTeam")  # the channel's operator
    [clash] = store.contradictions("CxTeam")
    assert clash["handles"] == sorted([billing, search])
    assert clash["single_valued"] == {"predicate": "leakingService", "argument": 1}
    for elsewhere in ("CxOther", "CxBoreas", "CxCyra"):  # none sees the declaration
        assert store.contradictions(elsewhere) == [], elsewhere
    assert [c["handles"] for c in store.contradictions()] == [clash["handles"]]
    [values] = agents["Atlas"].disputes()
    assert values["class"] == "values" and values["state"] == "open"
    assert values["declared"] == {"predicate": "leakingService", "argument": 1}
    assert [(v["value"], v["speaker"]) for v in values["values"]] == [
        ("BillingWorker", "AgentBoreas"),
        ("SearchIndexer", "AgentCyra"),
    ]
    other = channel.join(agents["Boreas"].medium, "CxOther", "AgentBoreas")
    assert other.disputes() == []
    before, shown = store.seq, agents["Atlas"].disputes()
    agents["Cyra"].concede(search, "the heap dump says BillingWorker")
    assert store.contradictions("CxTeam") == []
    [ended] = agents["Atlas"].disputes(state="conceded")  # kept, with who said which
    assert ended["values"] == values["values"] and ended["declared"] == values["declared"]
    assert agents["Atlas"].disputes(as_of=before) == shown  # as it stood then


def test_a_single_valued_declaration_that_declares_nothing_is_refused(team):
    _, store = team
    seq = store.seq
    for bad in (
        "(singleValued poolSize 0)",
        "(singleValued poolSize Two)",
        '(singleValued poolSize "2")',
        "(singleValued (poolSize ProdDb) 2)",
    ):
        refusal = refused(lambda b=bad: store.assert_(b, "CxTeam"))
        assert refusal.kind == "not-well-formed", bad
        assert "(singleValued poolSize 2)" in refusal.message  # how to write one
    assert store.seq == seq


def test_a_one_value_question_declares_its_pattern_single_valued_at_the_channel(team):
    """A value claimed without answering counts: the question asks for one value."""
    agents, _ = team
    q = agents["Atlas"].ask("(leakingService ?service Incident7)")
    agents["Boreas"].claim("(leakingService BillingWorker Incident7)")  # said, not answered
    agents["Cyra"].answer(q, "SearchIndexer")
    assert agents["Atlas"].thread(q)["state"] == "contested"
    [values] = agents["Dune"].disputes()
    assert values["class"] == "values" and values["question"] == q
    assert [(v["value"], v["speaker"]) for v in values["values"]] == [
        ("BillingWorker", "AgentBoreas"),
        ("SearchIndexer", "AgentCyra"),
    ]


def test_replaced_ballots_and_acceptances_leave_a_record(team):
    agents, _ = team
    atlas = agents["Atlas"]
    q = atlas.ask(POOL)
    first = agents["Boreas"].answer(q, {"?size": 500})
    second = agents["Cyra"].answer(q, {"?size": 800})
    agents["Dune"].vote(first, "for")
    agents["Dune"].vote(first, "against")  # a changed stance: the first ballot is replaced
    atlas.accept(first, reason="the runbook says 500")
    atlas.accept(second, reason="the live config says 800")  # a changed decision
    found = atlas.thread(q)
    assert found["accepted"] == second and found["acceptance_reason"] == "the live config says 800"
    [earlier] = found["withdrawn_acceptances"]
    assert (
        earlier["withdrawn"]["ending"] == "superseded"
        and earlier["withdrawn"]["by"] == "AgentAtlas"
    )
    assert earlier["reason"] == "the runbook says 500"
    [claim] = [a["claim"] for a in found["answers"] if a["handle"] == first]
    [ballot] = claim["withdrawn"]
    assert ballot["kind"] == "ballot" and ballot["speaker"] == "AgentDune"
    assert ballot["sentence"].startswith("(votesFor AgentDune")
    assert ballot["withdrawn"]["ending"] == "superseded"
    assert [b["stance"] for b in claim["ballots"]] == ["against"]


def test_as_of_returns_what_each_read_showed_at_each_seq(team):
    """Every step of a disagreement, read as it happened and again later with `as_of`:
    the same thread, questions and disputes, replaced ballots and acceptances included."""
    agents, store = team
    atlas = agents["Atlas"]
    shown = {}

    def seen():
        shown[store.seq] = (atlas.thread(q), atlas.questions(state="all"), atlas.disputes())

    q = atlas.ask(POOL)
    seen()
    first = agents["Boreas"].answer(q, {"?size": 500})
    seen()
    disputed = agents["Cyra"].move("dispute", target=first)
    seen()
    agents["Dune"].vote(first, "for")
    seen()
    agents["Dune"].vote(first, "against")
    seen()
    atlas.accept(first, reason="the runbook says 500")
    seen()
    second = agents["Cyra"].answer(q, {"?size": 800})
    seen()
    accepted = atlas.move("accept", answer=second, reason="the live config says 800")
    seen()
    agents["Cyra"].withdraw(disputed["handle"])
    seen()
    agents["Boreas"].concede(first, "the live config says 800")
    seen()
    atlas.withdraw(accepted["handle"])  # the asker reopens it
    seen()
    for seq, (thread, listed, disputes) in shown.items():
        assert atlas.thread(q, as_of=seq) == thread, seq
        assert atlas.questions(state="all", as_of=seq) == listed, seq
        assert atlas.disputes(as_of=seq) == disputes, seq


def test_claiming_again_what_was_withdrawn_under_dispute_carries_the_dispute(team):
    agents, _ = team
    boreas = agents["Boreas"]
    claim = boreas.claim("(leaks SearchIndexer Yes)")
    disputed = agents["Cyra"].move("dispute", target=claim)
    agents["Dune"].vote(claim, "against")
    boreas.withdraw(claim)
    again = boreas.claim("(leaks SearchIndexer Yes)")  # withdraw, then claim it again
    assert again != claim
    [live] = agents["Atlas"].disputes(state="open")  # the rebuttal still stands against it
    assert {s["handle"] for s in live["sides"]} == {again, disputed["rebuttal"]}
    [carried] = live["carried"]  # and the dispute it was under comes with it
    assert [m["speaker"] for m in carried["raised_by"]] == ["AgentCyra"]
    assert carried["tally"] == {"for": 0, "against": 1} and carried["ending"] == "withdrawn"
    [earlier] = agents["Atlas"].thread(again)["earlier"]
    assert earlier["handle"] == claim
    assert [b["speaker"] for b in earlier["ballots"]] == ["AgentDune"]


def test_concede_is_refused_for_another_agents_claim_and_without_a_reason(team):
    agents, store = team
    claim = agents["Boreas"].claim("(leaks SearchIndexer Yes)")
    seq = store.seq
    assert refused(lambda: agents["Cyra"].concede(claim, "no")).kind == "koinii/foreign-sentex"
    assert refused(lambda: agents["Boreas"].concede(claim, " ")).kind == "bad-option"
    q = agents["Boreas"].ask(POOL)
    assert refused(lambda: agents["Boreas"].concede(q, "x")).kind == "koinii/not-a-claim"
    assert store.seq == seq + 1  # only the question was written


def test_the_history_is_read_through_an_index_kept_until_the_next_write(kb):
    """A read finds a record by the handle it retired, its target or its question from
    the index, not by scanning every record; reads between two writes share one index."""
    from koinii.channel import history

    medium = channel.local(kb)
    atlas, boreas, cyra = (channel.join(medium, "CxTeam", a) for a in TEAM[:3])
    q = atlas.ask(POOL)
    first = boreas.answer(q, {"?size": 500})
    claim = atlas.thread(q)["answers"][0]["claim"]["handle"]
    cyra.vote(first, "for")
    cyra.vote(first, "against")
    boreas.answer(q, {"?size": 800})  # supersedes the first, its claim and ballot with it
    index = history.index(kb)
    assert history.index(kb) is index and history.records(kb) is index.records
    record, item = history.record_of(kb, claim)
    assert record["handle"] == first and item["handle"] == claim
    assert [r["ending"] for r in index.of_question[q]] == ["superseded"]
    [ballot] = index.on_target[claim]
    assert ballot["kind"] == "ballot" and ballot["by"] == "AgentCyra"
    boreas.withdraw(atlas.thread(q)["answers"][0]["handle"])
    assert history.index(kb) is not index and len(history.records(kb)) == 3


def test_the_history_survives_migrate_and_export_and_may_be_forgotten(tmp_path):
    from koinii.channel import history

    source = str(tmp_path / "source.db")
    with koinii.open_kb(source) as kb:
        agents = {a[5:]: channel.join(channel.local(kb), "CxTeam", a) for a in TEAM}
        q, answer, _, _ = _disputed_answer(agents)
        agents["Boreas"].concede(answer, "wrong cluster")
        shown = agents["Atlas"].thread(q)
    dump = str(tmp_path / "copy.jsonl")
    migrate(source, dump)
    target = str(tmp_path / "target.db")
    migrate(dump, target)
    with koinii.open_kb(target) as kb:
        atlas = channel.join(channel.local(kb), "CxTeam", "AgentAtlas")
        assert atlas.thread(q) == shown
        assert history.forget(kb, before_seq=kb.seq + 1) == 1  # the operator's retention
        assert atlas.thread(q)["withdrawn_answers"] == []
        assert refused(lambda: atlas.thread(answer)).kind == "koinii/no-such-handle"


def test_the_roster_names_each_members_role_session_and_coordinators_session(start_daemon):
    daemon = start_daemon(principals={**PRINCIPALS, "AgentMajority": "arbiter"})
    lead = channel.join(channel.wire(daemon.client("AgentAtlas")), "CxTeam", "AgentAtlas")
    s_lead, s_boreas = str(uuid.uuid4()), str(uuid.uuid4())
    lead.store.invoke("sessions.start_session", id=s_lead)
    lead.store.invoke(
        "wraps.coordinators.register",
        coordinator_id="AgentAtlas",
        project_id="p",
        session_id=s_lead,
    )
    worker = channel.join(channel.wire(daemon.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    worker.store.invoke("sessions.start_session", id=s_boreas)
    found = worker.roster()
    by_agent = {m["agent"]: m for m in found["members"]}
    assert by_agent["AgentBoreas"] == {
        "agent": "AgentBoreas",
        "role": "agent",
        "session": s_boreas,
        "coordinator_session": s_lead,
    }
    assert by_agent["AgentAtlas"]["session"] == s_lead
    assert found["coordinators"] == [
        {"coordinator": "AgentAtlas", "session": s_lead, "status": "active"}
    ]


# --- over MCP ---------------------------------------------------------------------------------


def test_concede_and_the_roster_over_mcp(start_daemon):
    daemon = start_daemon(principals=PRINCIPALS)

    async def script():
        async with (
            mcp_agent(daemon, "AgentAtlas") as atlas,
            mcp_agent(daemon, "AgentBoreas") as boreas,
            mcp_agent(daemon, "AgentCyra") as cyra,
        ):
            q = (await atlas.ask(question=POOL))["handle"]
            answer = (await boreas.answer(question=q, content="500"))["handle"]
            await cyra.dispute(target=answer)
            made = await boreas.concede(target=answer, reason="the prod config says 800")
            assert made["withdrawn"] == answer
            thread = await atlas.thread(handle=q)
            conceded = await atlas.disputes(state="conceded")
            gone = await atlas.thread(handle=answer)
            roster = await cyra.roster()
            then = await atlas.as_of(seq=made["seq"] - 1)
            return thread, conceded, gone, roster, then

    thread, conceded, gone, roster, then = play(script)
    [withdrawn] = thread["withdrawn_answers"]
    assert withdrawn["withdrawn"]["reason"] == "the prod config says 800"
    assert conceded["count"] == 1 and conceded["disputes"][0]["ending"] == "conceded"
    assert gone["withdrawn"]["ending"] == "conceded"
    assert {m["agent"] for m in roster["members"]} == {"AgentAtlas", "AgentBoreas", "AgentCyra"}
    assert {m["role"] for m in roster["members"]} == {"agent"}
    [asked] = then["questions"]  # before the concession: Boreas's answer stood, disputed
    assert asked["state"] == "contested" and then["disputes"][0]["ending"] is None


def test_the_tools_say_how_to_concede_and_where_the_history_and_the_roster_are(start_daemon):
    daemon = start_daemon(principals=PRINCIPALS)

    async def script():
        async with mcp_agent(daemon, "AgentAtlas") as atlas:
            listed = (await atlas.session.list_tools()).tools
            return {t.name: t.description for t in listed}

    tools = play(script)
    assert "reason" in tools["concede"] and "conceded" in tools["concede"]
    assert "history" in tools["withdraw"] and "concede(" in tools["withdraw"]
    assert "withdrawn_answers" in tools["thread"]
    assert "ending" in tools["disputes"] and "values" in tools["disputes"]
    assert "single-valued" in tools["disputes"] and "declared" in tools["disputes"]
    assert "coordinator" in tools["roster"] and "wrap_session" in tools["roster"]
    assert "as_of(" in tools["as_of"]
    from koinii.mcp import INSTRUCTIONS

    for said in (
        "concede(",
        "reason",
        "roster()",
        "history",
        "as_of(",
        "one value",
        "(singleValued",
        "single-valued",
    ):
        assert said in INSTRUCTIONS, said


def test_a_concession_is_told_as_one_with_its_reason(kb):
    from koinii.channel.narrator import Narrator

    medium = channel.local(kb)
    boreas = channel.join(medium, "CxTeam", "AgentBoreas")
    claim = boreas.claim("(leaks SearchIndexer Yes)")
    since = kb.seq
    boreas.concede(claim, "it was BillingWorker")
    narrator = Narrator(kb)
    told = [t for e in kb.changes(since)["entries"] for t in narrator.entry(e)]
    [conceded] = [t for t in told if t.kind == "concession"]
    assert conceded.text == (
        f"AgentBoreas conceded claim #{claim}: (leaks SearchIndexer Yes), "
        'because "it was BillingWorker"'
    )


def test_a_replaced_ballot_and_acceptance_are_told_as_replaced_with_their_reasons(kb):
    from koinii.channel.narrator import Narrator

    medium = channel.local(kb)
    atlas, boreas, cyra = (channel.join(medium, "CxTeam", a) for a in TEAM[:3])
    q = atlas.ask(POOL)
    first = boreas.answer(q, {"?size": 500})
    second = cyra.answer(q, {"?size": 800})
    since = kb.seq
    cyra.vote(first, "for")
    cyra.vote(first, "against")
    atlas.accept(first, reason="the runbook says 500")
    atlas.accept(second, reason="the live config says 800")
    narrator = Narrator(kb)
    told = [t.text for e in kb.changes(since)["entries"] for t in narrator.entry(e)]
    assert any(t.startswith("AgentCyra replaced ballot #") for t in told), told
    assert any(t.startswith("AgentAtlas replaced acceptance #") for t in told), told
    assert any(t.endswith('because "the runbook says 500"') for t in told), told  # gone now


def test_the_web_view_shows_an_ended_dispute_with_its_ending_and_reason(tmp_path):
    from tests.test_web import start, viewer

    daemon = start(tmp_path)
    try:
        atlas = channel.join(channel.wire(daemon.client("AgentAtlas")), "CxTeam", "AgentAtlas")
        boreas = channel.join(channel.wire(daemon.client("AgentBoreas")), "CxTeam", "AgentBoreas")
        claim = boreas.claim("(leaks SearchIndexer Yes)")
        atlas.dispute(claim)
        boreas.concede(claim, "it was <b>BillingWorker</b>")
        page = viewer(daemon).get("/channel/CxTeam/disputes?state=ended")
        assert page.status == 200
        assert "conceded by AgentBoreas" in page.text
        assert "it was &lt;b&gt;BillingWorker&lt;/b&gt;" in page.text  # agent text, escaped
    finally:
        daemon.kill()
