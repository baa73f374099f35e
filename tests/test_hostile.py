"""Hostile agents: each test is one attack an agent token could make on other agents,
over a real daemon, and the rule that stops it (docs/security.md, "The rules").

The attacker is AgentAtlas; its victims are AgentBoreas and AgentCharlie. Every attack
uses only requests the wire accepts from some caller — the question each test answers is
whether the daemon lets an agent's own moves reach into another agent's claims, sessions,
subscriptions or connection. One section per rule, in the order of the table; a new
attack goes into the section of the rule it tests. Each test failed before its rule was
enforced. Attacks on the transport, which no store takes part in, run once (`on_sqlite`);
the others run on both backends (`team`).
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import time

import pytest
from click.testing import CliRunner

import koinii
from koinii.channel import agent as channel
from koinii.channel import belief
from koinii.cli import main
from koinii.disputes import majority
from koinii.server.tokens import add_token
from koinii.sessions import Introspection, SessionStore
from koinii.wraps.coordinators import Coordinators
from tests.conftest import Daemon, forker, refused, wait_until

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

TEAM = {
    "AgentAtlas": "agent",
    "AgentBoreas": "agent",
    "AgentCharlie": "agent",
    "Registrar": "admin",
    "Ops": "operator",
    "Auditor": "reader",
}


@pytest.fixture
def team(start_daemon):
    return start_daemon(principals=TEAM)


@pytest.fixture
def on_sqlite(tmp_path):
    """on_sqlite(*args, principals=None) -> a running daemon over SQLite, for the attacks
    on the transport, which no store takes part in (so they run once, not per backend)."""
    started: list[Daemon] = []

    def start(
        *args: str, principals: dict[str, str] | None = None, fd_limit: int | None = None
    ) -> Daemon:
        n = len(started)
        tokens: dict[str, str] = {}
        extra: list[str] = []
        if principals:
            table = str(tmp_path / f"tokens-{n}.json")
            tokens = {p: add_token(table, p, role) for p, role in principals.items()}
            extra = ["--tokens", table]
        daemon = Daemon(str(tmp_path / f"transport-{n}.db"), [*args, *extra], tokens)
        daemon.fd_limit = fd_limit
        started.append(daemon)
        return daemon.start()

    yield start
    for daemon in started:
        daemon.kill()


def koinii_cli(*args: str) -> subprocess.CompletedProcess:
    return forker().run(list(args))


# --- one context per principal -------------------------------------------------------------


def test_token_add_refuses_a_second_principal_for_one_context(tmp_path):
    path = tmp_path / "team.tokens"
    table = str(path)
    assert koinii_cli("token", "add", "AgentAtlas", "--tokens", table).returncode == 0
    clash = koinii_cli("token", "add", "Atlas", "--role", "agent", "--tokens", table)
    assert clash.returncode == 1
    assert "koinii/context-taken" in clash.stderr
    assert "Atlas" in clash.stderr and "AgentAtlas" in clash.stderr and "CxAtlas" in clash.stderr
    assert "koinii token revoke Atlas" in clash.stderr  # how to fix it
    assert [e["id"] for e in json.loads(path.read_text())["tokens"]] == ["AgentAtlas"]
    # a second token for the same principal is a rotation, not a clash
    assert koinii_cli("token", "add", "AgentAtlas", "--tokens", table).returncode == 0


def test_the_daemon_refuses_to_start_on_a_table_where_two_principals_share_a_context(tmp_path):
    table = tmp_path / "edited.tokens"
    add_token(str(table), "AgentAtlas", "agent")
    data = json.loads(table.read_text())
    data["tokens"].append({**data["tokens"][0], "id": "Atlas"})  # edited by hand
    table.write_text(json.dumps(data))
    daemon = Daemon(str(tmp_path / "team.db"), ["--tokens", str(table)])
    try:
        with pytest.raises(RuntimeError) as exited:
            daemon.start()
    finally:
        daemon.kill()
    message = str(exited.value)
    assert "koinii/context-taken" in message and "CxAtlas" in message
    assert "Atlas" in message and f"koinii token revoke Atlas --tokens {table}" in message


def token_cli(*args: str):
    """`koinii token …` in process (click's CliRunner), stderr apart."""
    return CliRunner().invoke(main, ["token", *args])


def test_token_add_refuses_reserved_and_system_names(tmp_path):
    """Issue 37: `token add` minted AgentUniverse, AgentSpeechActs, AgentMajority — ids
    that own the system's contexts or that the system speaks as — without a word."""
    table = str(tmp_path / "team.tokens")
    for principal, role in (
        ("AgentUniverse", "agent"),
        ("Universe", "reader"),
        ("AgentSpeechActs", "agent"),
        ("AgentRegistry", "agent"),
        ("AgentCore", "arbiter"),
        ("AgentDisputes", "agent"),
        ("AgentEverything", "agent"),
        ("AgentMajority", "agent"),
        ("Majority", "arbiter"),
    ):
        result = token_cli("add", principal, "--role", role, "--tokens", table)
        assert result.exit_code == 1, principal
        assert result.stderr.startswith("koinii: koinii/reserved-name: "), result.stderr
        assert f"{principal} is reserved: " in result.stderr and "Choose an id" in result.stderr
        assert not (tmp_path / "team.tokens").exists()
    # the adjudicator's arbiter token is the one AgentMajority
    assert token_cli("add", "AgentMajority", "--role", "arbiter", "--tokens", table).exit_code == 0


def test_token_add_warns_of_a_look_alike_of_a_principal_in_the_table(tmp_path):
    table = str(tmp_path / "team.tokens")
    for principal in ("AgentAtlas", "AgentKim", "AgentOrion"):
        result = token_cli("add", principal, "--tokens", table)
        assert result.exit_code == 0 and result.stderr == ""
    for principal, like in (
        ("AgentAtIas", "AgentAtlas"),  # capital I for l
        ("AgentATLAS", "AgentAtlas"),  # case
        ("AgentKirn", "AgentKim"),  # rn for m
        ("Agent0rion", "AgentOrion"),  # zero for O
    ):
        result = token_cli("add", principal, "--tokens", table)
        assert result.exit_code == 0 and result.stdout.startswith("kt_")  # minted
        assert result.stderr.startswith(f"koinii: warning: {principal} looks like ")
        assert f"looks like {like}, already in the table" in result.stderr
        assert f"koinii token revoke {principal} --tokens {table}" in result.stderr
    assert token_cli("add", "AgentBoreas", "--tokens", table).stderr == ""


def test_the_daemon_refuses_a_table_whose_agent_would_own_a_channel(tmp_path):
    """Issue 37: AgentTeam owns CxTeam — a channel in the store — and could write as it.
    `token add` sees the table, not the store (its daemon holds it), so the daemon
    refuses the table: at its start (exit 1), and on SIGHUP (the table in force kept)."""
    db = str(tmp_path / "team.db")
    with koinii.open_kb(db) as kb:
        channel.join(channel.local(kb), "CxTeam", "AgentAtlas")
    table = str(tmp_path / "team.tokens")
    tokens = {p: add_token(table, p, "agent") for p in ("AgentAtlas", "AgentTeam")}
    daemon = Daemon(db, ["--tokens", table], tokens)
    try:
        with pytest.raises(RuntimeError) as exited:
            daemon.start()
    finally:
        daemon.kill()
    message = str(exited.value)
    assert "koinii/context-taken" in message and "AgentTeam would own CxTeam" in message
    assert "a channel in the store (it sees the contexts of AgentAtlas)" in message
    assert f"koinii token revoke AgentTeam --tokens {table}" in message
    assert koinii_cli("token", "revoke", "AgentTeam", "--tokens", table).returncode == 0
    daemon = Daemon(db, ["--tokens", table], tokens).start()
    try:
        tokens["AgentCiel"] = add_token(table, "AgentCiel", "agent")
        tokens["AgentTeam"] = add_token(table, "AgentTeam", "agent")
        daemon.proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert refused(lambda: daemon.client("AgentCiel").seq).kind == "unauthorized"
        assert koinii_cli("token", "revoke", "AgentTeam", "--tokens", table).returncode == 0
        daemon.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: _answers(daemon.client("AgentCiel")))
        tokens["Team"] = add_token(table, "Team", "reader")  # a reader's name owns nothing
        daemon.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: _answers(daemon.client("Team")))
    finally:
        daemon.kill()


def _answers(client) -> bool:
    try:
        client.seq  # noqa: B018 (a read that needs a token)
    except koinii.Refused:
        return False
    return True


# --- sessions: written by the principal that started them, and operators -------------------


def test_an_agent_cannot_write_another_agents_session(team):
    boreas = SessionStore(team.client("AgentBoreas"))
    sid = boreas.start_session(title="boreas at work", external_id="boreas:1")
    turn = boreas.start_turn(sid, "migrate the db")
    iteration = boreas.record_iteration(turn, prose="looking")
    done = boreas.start_turn(sid, "an earlier turn")
    boreas.finish_turn(done, "done", "complete")
    atlas = SessionStore(team.client("AgentAtlas"))
    ops = team.client("Ops")
    seq = ops.seq
    attacks = [
        lambda: atlas.set_title(sid, "pwned"),
        lambda: atlas.start_turn(sid, "words in boreas's session"),
        lambda: atlas.record_iteration(turn, prose="not boreas"),
        lambda: atlas.record_block(iteration, code="rm -rf /"),
        lambda: atlas.finish_turn(turn, "error", "error", error="cut short"),
        lambda: atlas.retry_turn(done),
        lambda: atlas.fork_session(sid, position=0),
        lambda: atlas.record_routing(sid, "error", reason="made up"),
        lambda: atlas.add_attachment(turn, filename="planted.txt"),
        lambda: atlas.start_session(title="under boreas", parent_session_id=sid),
    ]
    for attack in attacks:
        refusal = refused(attack)
        assert refusal.kind == "koinii/foreign-session", refusal
        assert refusal.data["agent"] == "AgentAtlas" and refusal.data["owner"] == "AgentBoreas"
        assert "started" in refusal.message
    assert ops.seq == seq  # nothing was written
    reader = Introspection(team.client("Auditor"))
    assert reader.get_session(sid)["title"] == "boreas at work"
    # the owner and an operator still write it; the attacker records its own sessions
    boreas.set_title(sid, "still boreas")
    SessionStore(ops).set_title(sid, "an operator may")
    own = atlas.start_session(title="atlas's own")
    child = atlas.start_session(title="its child", parent_session_id=own)
    atlas.start_turn(child, "a child session under its own")
    # an import of boreas's source id is atlas's own session: boreas's is untouched
    imported = atlas.call("import_part", external_id="boreas:1", part=0, session={})
    assert imported["status"] == "new" and imported["session_id"] != sid
    assert reader.get_session(sid)["title"] == "an operator may"


def test_an_agent_cannot_mark_a_live_coordinator_stale_by_a_threshold_of_its_own(team):
    """Issue 37, hostile rerun: `cleanup_stale(threshold_ms=0)` marked every live
    coordinator stale — Atlas's write on Boreas's record, which `mark_stale` refuses — and
    a stale lead's next permeate no longer found the session it holds. An agent applies
    the staleness rule as it stands (120 s); an operator may choose another."""
    boreas = Coordinators(team.client("AgentBoreas"))
    boreas.register("AgentBoreas", project_id="hive", session_id="session:boreas-lead")
    atlas = Coordinators(team.client("AgentAtlas"))
    for threshold in (0, 1, 119_999):
        refusal = refused(lambda t=threshold: atlas.cleanup_stale(threshold_ms=t))
        assert refusal.kind == "bad-option" and refusal.data["least"] == 120_000
        assert "Leave threshold_ms out" in refusal.message
    assert boreas.get("AgentBoreas")["status"] == "active"
    assert atlas.cleanup_stale() == []  # the rule as it stands: Boreas is live
    assert Coordinators(team.client("Ops")).cleanup_stale(threshold_ms=0) == ["AgentBoreas"]


def test_an_admin_records_no_sessions(team):
    refusal = refused(lambda: SessionStore(team.client("Registrar")).start_session())
    assert refusal.kind == "forbidden" and "CxRegistry" in refusal.message
    sid = SessionStore(team.client("AgentBoreas")).start_session()
    assert refused(lambda: SessionStore(team.client("Registrar")).set_title(sid, "x")).kind == (
        "forbidden"
    )


def test_an_admin_writes_no_speech_act_in_the_registry(team):
    """An admin writes registry rows, and wrote `(answers AgentAtlas …)` and `(endorses
    AgentAtlas …)` there too: read across contexts (`Agent.answers_to`,
    `endorsements_of`), Atlas had answered and endorsed what it never did. An admin
    makes no moves, so it writes no speech act — nor a rule concluding one, nor a denial —
    and makes no rulings: a ruling's tag is refused it as it is an agent."""
    boreas = channel.join(channel.wire(team.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    registrar = team.client("Registrar")
    claim = boreas.claim("(usesDb Prod Pg)")
    question = boreas.ask("(quote (usesDb Staging ?db))")
    seq = registrar.seq
    for sentence, kind in (
        (f"(answers AgentAtlas (quote (usesDb Staging X)) (sentexHandle {question}))", "answer"),
        (f"(endorses AgentAtlas (sentexHandle {claim}))", "endorsement"),
        ("(not (queries AgentBoreas (quote (usesDb Staging ?db))))", "question"),
        ("(implies (registeredAgent ?a) (votesFor ?a (sentexHandle 1)))", "ballot"),
    ):
        refusal = refused(lambda s=sentence: registrar.assert_(s, "CxRegistry"))
        assert refusal.kind == "forbidden" and refusal.data["kind"] == kind, sentence
        assert "admin" in refusal.message and "agent token" in refusal.message
        [problem] = registrar.check(sentence, "CxRegistry")  # the dry run says the same
        assert problem["kind"] == "forbidden"
    # nor a ruling: a sentence anywhere with a ruling's tag is read as one (rulings_on)
    ruling = {"adjudication": {"dispute": [[claim, claim + 1]], "at": 1}}
    for write in (
        lambda: registrar.assert_("(not (usesDb Prod Pg))", "CxRegistry", provenance=ruling),
        lambda: registrar.add_provenance(
            registrar.assert_("(registeredAgent AgentDune)", "CxRegistry"), ruling
        ),
    ):
        assert refused(write).kind == "reserved-provenance"
    assert registrar.seq == seq + 1  # the row alone
    assert boreas.answers_to(question) == [] and boreas.endorsements_of(claim) == []
    registrar.assert_("(registeredAgent AgentAtlas)", "CxRegistry")  # a registry row: fine


# --- meaning: what an agent's claims do to the meaning of others' ---------------------------
# Each attack is made once with raw writes over the agent's token and once by a cooperative
# agent through koinii.channel.agent, in process: the rule holds on both.

CLAIM = "(usesDb Prod Pg)"


@pytest.fixture(params=["wire", "local"])
def members(request, team, new_location):
    """Atlas, Boreas and Charlie joined to CxTeam: each over its own agent token, or in
    one process; with the store an operator (or the KB itself) sees."""
    if request.param == "wire":
        agents = {
            a: channel.join(channel.wire(team.client(a)), "CxTeam", a)
            for a in ("AgentAtlas", "AgentBoreas", "AgentCharlie")
        }
        yield agents, team.client("Ops")
    else:
        kb = koinii.open_kb(new_location())
        medium = channel.local(kb)
        yield (
            {
                a: channel.join(medium, "CxTeam", a)
                for a in ("AgentAtlas", "AgentBoreas", "AgentCharlie")
            },
            kb,
        )
        kb.close()


def test_an_agent_cannot_censor_another_agents_claim_with_a_mask(members):
    agents, store = members
    claim = agents["AgentBoreas"].assert_(CLAIM)
    seq = store.seq
    refusal = refused(lambda: agents["AgentAtlas"].assert_(f"(except (sentexHandle {claim}))"))
    assert refusal.kind == "koinii/foreign-mask" and f"dispute({claim})" in refusal.message
    assert store.seq == seq and store.why_not(claim, "CxTeam") is None  # still seen
    # an agent masking its own claim is its own business
    own = agents["AgentAtlas"].assert_("(draft Idea)")
    agents["AgentAtlas"].assert_(f"(except (sentexHandle {own}))")
    assert store.why_not(own, "CxTeam") == "excepted"


def test_an_agent_cannot_hide_its_own_move_with_a_mask(members):
    """A mask hides a sentex from the moves' reads too: over Atlas's own answer, `answer`
    saw no standing answer and wrote a second, and once the mask was withdrawn both
    stood; the same gave one ballot for and one against, and two acceptances of one
    question; a mask over a rebuttal left its dispute standing without it (the clash gone
    from the channel). So a mask hides no move, no claim an answer carries and no rebuttal
    a standing dispute rests on: `withdraw` takes them back, with their rules."""
    agents, store = members
    atlas, boreas, charlie = (agents[a] for a in ("AgentAtlas", "AgentBoreas", "AgentCharlie"))
    claim = boreas.claim(CLAIM)
    question = boreas.ask("(quote (usesDb Staging ?db))")
    answer = atlas.answer(question, "(usesDb Staging Pg)")
    [carried] = store.sentexes_matching("(usesDb Staging Pg)", "CxAtlas")
    said = charlie.claim("(usesDb Staging Oracle)")  # said first, then answered: the same
    charlies = charlie.move("answer", question=question, content="(usesDb Staging Oracle)")
    ballot = atlas.vote(claim, "for")
    acceptance = boreas.accept(answer)
    rebuttal = charlie.move("dispute", target=claim)["rebuttal"]
    raw = isinstance(atlas.medium, channel.Wire)  # and the daemon's plain write
    seq = store.seq
    for who, target, kind, instead in (
        (atlas, answer, "answer", answer),
        (atlas, carried.handle, "answer", answer),
        (charlie, said, "answer", charlies["handle"]),
        (atlas, ballot, "ballot", ballot),
        (boreas, acceptance, "acceptance", acceptance),
        (charlie, rebuttal, "rebuttal", rebuttal),
    ):
        mask = f"(except (sentexHandle {target}))"
        writes = [lambda w=who, m=mask: w.claim(m)]
        if raw:
            writes.append(lambda w=who, m=mask: w.medium.store.assert_(m, w.context))
        for write in writes:
            refusal = refused(write)
            assert refusal.kind == "koinii/use-the-move", (kind, refusal)
            assert refusal.data["move"] == "withdraw" and refusal.data["kind"] == kind
            assert f"withdraw(handle={instead})" in refusal.message, refusal.message
            assert "mask" in refusal.message
    assert store.seq == seq  # nothing written
    assert store.why_not(rebuttal, "CxTeam") is None and store.contradictions("CxTeam")
    own = atlas.claim("(draft Idea)")  # a mask over one's own claim: one's own business
    atlas.claim(f"(except (sentexHandle {own}))")


def test_a_mask_hides_no_claim_other_agents_replied_to(members):
    """A claim others replied to is taken back by `withdraw`, which keeps the record of
    their disputes, ballots and endorsements (a plain retract writes it too, issue 37):
    Atlas's mask over its own disputed claim hid the claim, and the clash with Boreas's
    rebuttal, from the channel, and kept no record. Masking a claim nobody answered is
    still the agent's own business."""
    agents, store = members
    atlas, boreas = agents["AgentAtlas"], agents["AgentBoreas"]
    claim = atlas.claim(CLAIM)
    boreas.dispute(claim)
    seq = store.seq
    refusal = refused(lambda: atlas.claim(f"(except (sentexHandle {claim}))"))
    assert refusal.kind == "koinii/use-the-move" and refusal.data["move"] == "withdraw"
    assert f"withdraw(handle={claim})" in refusal.message
    assert store.seq == seq and store.contradictions("CxTeam")
    own = atlas.claim("(draft Idea)")
    atlas.claim(f"(except (sentexHandle {own}))")


def test_a_claim_taken_back_goes_with_the_answer_that_carries_it(members):
    """Atlas claimed a value, then answered with it: the claim stood twice, said and
    carried. `concede` (or `withdraw`) of it removed the said copy only — the record said
    conceded, and the disputes on it ended so, while the claim stood on, carried, and
    Boreas's dispute stayed open. Taken back, a claim goes with the answers of its
    speaker that carry it, in the same edit."""
    agents, store = members
    atlas, boreas = agents["AgentAtlas"], agents["AgentBoreas"]
    question = boreas.ask("(quote (usesDb Staging ?db))")
    said = atlas.claim("(usesDb Staging Pg)")
    answer = atlas.answer(question, "(usesDb Staging Pg)")
    boreas.dispute(said)
    conceded = atlas.concede(said, "Staging runs Oracle")
    assert conceded["ending"] == "conceded" and answer in conceded["removed"]
    assert store.sentexes_matching("(usesDb Staging ?db)", "CxAtlas") == []
    assert store.contradictions("CxTeam") == []
    thread = boreas.thread(question)
    assert thread["answers"] == [] and thread["withdrawn_answers"][0]["handle"] == answer
    if isinstance(atlas.medium, channel.Wire):  # a plain retract leaves it carried: no record
        said = atlas.claim("(usesDb Staging Oracle)")
        atlas.answer(question, "(usesDb Staging Oracle)")
        boreas.dispute(said)
        records = len(store.sentexes_matching("(retired ?h ?seq ?json)", "CxHistory"))
        atlas.medium.store.retract(said)
        assert len(store.sentexes_matching("(retired ?h ?seq ?json)", "CxHistory")) == records
        assert [s.handle for s in store.sentexes_matching("(usesDb Staging ?db)", "CxAtlas")] == [
            said
        ]
        assert boreas.thread(said)["earlier"] == [] and store.contradictions("CxTeam")


def test_a_mask_made_before_the_move_hides_none_of_it(members):
    """The same hiding in the other order: Charlie claimed the rebuttal `(not S)` and
    masked it, then disputed S — the dispute wrote the rebuttal it already held, masked,
    and stood without it (no clash in the channel); Atlas masked a claim, then answered
    with it, and the answer's claim was hidden. A move refuses to stand on what its own
    speaker's mask hides: withdraw the mask first."""
    agents, store = members
    atlas, boreas, charlie = (agents[a] for a in ("AgentAtlas", "AgentBoreas", "AgentCharlie"))
    claim = boreas.claim(CLAIM)
    question = boreas.ask("(quote (usesDb Staging ?db))")
    rebuttal = charlie.claim(f"(not {CLAIM})")
    hidden = charlie.claim(f"(except (sentexHandle {rebuttal}))")
    answer_claim = atlas.claim("(usesDb Staging Pg)")
    hiding = atlas.claim(f"(except (sentexHandle {answer_claim}))")
    seq = store.seq
    for move, mask in (
        (lambda: charlie.dispute(claim), hidden),
        (lambda: atlas.answer(question, "(usesDb Staging Pg)"), hiding),
    ):
        refusal = refused(move)
        assert refusal.kind == "koinii/use-the-move" and refusal.data["move"] == "withdraw"
        assert refusal.data["mask"] == mask and f"withdraw(handle={mask})" in refusal.message
    assert store.seq == seq
    charlie.withdraw(hidden)  # the mask withdrawn, the move stands on what it says
    charlie.dispute(claim)
    assert store.contradictions("CxTeam")


def test_an_agent_cannot_silently_override_another_with_a_monotonic_rebuttal(members):
    agents, store = members
    claim = agents["AgentBoreas"].assert_(CLAIM)
    refusal = refused(lambda: agents["AgentAtlas"].assert_(f"(not {CLAIM})", strength="monotonic"))
    assert refusal.kind == "koinii/strength-forbidden" and "arbiter" in refusal.message
    assert store.believed(claim, "CxTeam")
    agents["AgentAtlas"].assert_(f"(not {CLAIM})")  # at default strength: a visible clash
    [clash] = store.contradictions("CxTeam")
    assert claim in clash["handles"]


def test_an_agents_rule_concludes_no_move_its_own_or_anothers(members):
    """A move is made by its move, which keeps the conversation's rules: an agent's rule
    concluding `(answers AgentAtlas …)` gave Atlas as many answers to one question as the
    rule had firings, where `answer` allows one, and an answer to "(endorses AgentAtlas
    ?x)" carried an endorsement no `endorse` made. So no rule of an agent's concludes a
    speech act, in its own name or another's, and no answer carries one (in one process
    the engine still derives none in another's name: test_adjudication)."""
    agents, store = members
    atlas = agents["AgentAtlas"]
    question = agents["AgentBoreas"].ask("(quote (usesDb Staging ?db))")
    seq = store.seq
    for rule, kind in (
        (
            f"(implies (pick ?db) (answers AgentAtlas (quote (usesDb Staging ?db)) "
            f"(sentexHandle {question})))",
            "answer",
        ),
        ("(implies (trigger ?x) (endorses AgentAtlas ?x))", "endorsement"),
        ("(implies (trigger ?x) (endorses AgentBoreas ?x))", "endorsement"),
        ("(implies (trigger ?x) (and (seen ?x) (votesAgainst AgentCharlie ?x)))", "ballot"),
    ):
        refusal = refused(lambda r=rule: atlas.assert_(r))
        assert refusal.kind == "koinii/use-the-move", rule
        assert refusal.data["kind"] == kind and "rule" in refusal.message, rule
    # nor as the claim its answer carries: (endorses AgentAtlas …) made by no endorse
    claim = agents["AgentBoreas"].assert_(CLAIM)
    asked = atlas.ask("(quote (endorses AgentAtlas ?x))")
    seq = store.seq
    refusal = refused(lambda: atlas.answer(asked, f"(endorses AgentAtlas (sentexHandle {claim}))"))
    assert refusal.kind == "koinii/use-the-move" and refusal.data["move"] == "endorse"
    assert "answer" in refusal.message
    assert store.seq == seq
    assert store.sentexes_matching("(endorses ?who ?what)", "?ctx") == []
    atlas.assert_("(implies (trigger ?x) (seen ?x))")  # a rule of claims: fine
    atlas.answer(question, "(usesDb Staging Pg)")  # the move itself: fine


def test_an_agents_own_claim_carrier_carries_no_move(members):
    """`(carriesClaim says 2)` is an agent's to declare for its own predicate, and made
    argument 2 of each `says` sentence a claim: `(says AgentAtlas (quote (answers
    AgentAtlas …)))` gave Atlas a second standing answer, and as many endorsements, ballots
    and closings as it wrote, none by its move — and `(says AgentBoreas (quote (endorses
    AgentBoreas …)))` an endorsement in Boreas's name, seen in the channel. So no agent's
    sentence — a claim, a rule's conclusion, an answer's claim — quotes a move, at any
    depth, declared a carrier or not."""
    agents, store = members
    atlas, boreas = agents["AgentAtlas"], agents["AgentBoreas"]
    claim = boreas.claim(CLAIM)
    question = boreas.ask("(quote (usesDb Staging ?db))")
    atlas.answer(question, "(usesDb Staging Pg)")
    answers = f"(answers AgentAtlas (quote (usesDb Staging Oracle)) (sentexHandle {question}))"
    endorses = f"(endorses AgentAtlas (sentexHandle {claim}))"
    saying = "(says AgentAtlas (quote {}))".format
    attacks = [
        (saying(answers), "answer"),
        (saying(endorses), "endorsement"),
        (saying(f"(votesFor AgentAtlas (sentexHandle {claim}))"), "ballot"),
        (saying(f"(closes AgentAtlas (sentexHandle {question}))"), "closing"),
        (saying(saying(endorses)), "endorsement"),  # a carried claim carries in turn
        # in Boreas's name: the engine took the carrier's argument 1 for its author
        (
            f"(says AgentBoreas (quote (endorses AgentBoreas (sentexHandle {claim}))))",
            "endorsement",
        ),
        (f"(implies (trigger ?x) {saying(endorses)})", "endorsement"),
    ]
    seq = store.seq
    refusal = refused(lambda: atlas.claim(saying(endorses)))  # declared later or never
    assert refusal.kind == "koinii/use-the-move"
    atlas.claim("(carriesClaim says 2)")
    seq = store.seq
    for sentence, kind in attacks:
        refusal = refused(lambda s=sentence: atlas.claim(s))
        assert refusal.kind == "koinii/use-the-move", sentence
        assert refusal.data["kind"] == kind and "quote" in refusal.message, sentence
        assert refused(lambda s=sentence: atlas.reply_many([s])).kind == refusal.kind
        if isinstance(atlas.medium, channel.Wire):  # the daemon's plain write
            plain = refused(lambda s=sentence: atlas.medium.store.assert_(s, "CxAtlas"))
            assert plain.kind == refusal.kind and plain.data == refusal.data
    for sentence, kind in (  # nor a denial of a move or of a system sentence, carried
        (saying(f"(not (disputes AgentCharlie (sentexHandle {claim})))"), "koinii/use-the-move"),
        (saying("(not (agentContext CxBoreas AgentBoreas))"), "koinii/foreign-mark"),
        (saying(saying("(not (contested Prod))")), "koinii/system-vocabulary"),
        (f"(implies (trigger ?x) {saying('(not (contested Prod))')})", "koinii/system-vocabulary"),
    ):
        assert refused(lambda s=sentence: atlas.claim(s)).kind == kind, sentence
    asked = boreas.ask("(quote (says AgentAtlas ?what))")  # nor as an answer's claim
    refusal = refused(lambda: atlas.answer(asked, saying(endorses)))
    assert refusal.kind == "koinii/use-the-move" and refusal.data["kind"] == "endorsement"
    assert store.seq == seq + 1  # the question alone
    assert store.sentexes_matching("(endorses ?who ?what)", "?ctx") == []
    assert len(store.sentexes_matching("(answers AgentAtlas ?c ?q)", "CxAtlas")) == 1
    atlas.claim(saying("(usesDb Staging Pg)"))  # a claim carried: fine


def test_a_plain_retract_keeps_the_record_of_the_replies_to_a_claim(team):
    """Issue 37, hostile rerun: withdraw keeps the record of a claim's dispute, ballots and
    endorsements (issue 38), but a plain `retract` (or an edit's removal) of the same claim
    took them along unrecorded — Boreas's dispute gone from Boreas's own context — and
    the claim made again stood clean. The daemon writes the record in the removal's own
    edit; the removal stays allowed (refusing it would let a ballot limit Atlas's writes)."""
    wire = {a: channel.wire(team.client(a)) for a in ("AgentAtlas", "AgentBoreas", "AgentCharlie")}
    agents = {a: channel.join(medium, "CxTeam", a) for a, medium in wire.items()}
    atlas, boreas = agents["AgentAtlas"], agents["AgentBoreas"]
    for remove, adds in (
        (lambda h: [atlas.store.retract(h)], None),
        (lambda h: atlas.store.edit(remove=[h]).handles, 0),
        (lambda h: atlas.store.edit(add=[("(draft Other)", "CxAtlas")], remove=[h]).handles, 1),
    ):
        claim = atlas.claim(CLAIM)
        dispute = boreas.dispute(claim)
        agents["AgentCharlie"].vote(claim, "against")
        replied = remove(claim)
        assert adds is None or len(replied) == adds  # an edit's reply lists its own adds
        again = atlas.claim(CLAIM)
        earlier = boreas.thread(again)["earlier"][-1]
        assert earlier["handle"] == claim and earlier["withdrawn"]["by"] == "AgentAtlas"
        assert [m["handle"] for m in earlier["dispute_moves"]] == [dispute]
        assert [b["speaker"] for b in earlier["ballots"]] == ["AgentCharlie"]
        atlas.withdraw(again)
    own = atlas.claim("(draft Idea)")  # nobody replied to it: no record to keep
    seq = team.client("Ops").seq
    assert atlas.store.retract(own).seq == seq + 1
    assert boreas.thread(atlas.claim("(draft Idea)"))["earlier"] == []


def test_an_agent_cannot_erase_the_record_of_what_it_took_back(team):
    """A record in CxHistory is written by the move (or the removal) as its agent, so the
    daemon attributed it to Atlas, and Atlas's plain `retract` of its own record erased
    the withdrawn answer from the question's thread — the record that keeps a move taken
    back from standing clean. No agent removes a record, or adds provenance to one."""
    boreas = channel.join(channel.wire(team.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    atlas = channel.join(channel.wire(team.client("AgentAtlas")), "CxTeam", "AgentAtlas")
    question = boreas.ask("(quote (usesDb Staging ?db))")
    answer = atlas.answer(question, "(usesDb Staging Pg)")
    record = atlas.move("withdraw", handle=answer)["record"]
    seq = atlas.store.seq
    for erase in (
        lambda: atlas.store.retract(record),
        lambda: atlas.store.edit(remove=[record]),
        lambda: atlas.store.add_provenance(record, {"ending": "never-said"}),
    ):
        refusal = refused(erase)
        assert refusal.kind == "koinii/foreign-context", refusal
        assert refusal.data["context"] == "CxHistory" and "withdraw" in refusal.message
    [problem] = atlas.store.check_edit(remove=[record])  # the dry run says the same
    assert problem["kind"] == "koinii/foreign-context"
    assert atlas.store.seq == seq
    [withdrawn] = boreas.thread(question)["withdrawn_answers"]
    assert withdrawn["handle"] == answer


def test_a_forged_ballot_neither_counts_nor_vetoes_a_majority(members):
    """A ballot in another's name is nobody's: an agent's rule concluding one is refused,
    and one an operator wrote is not derived (the engine's own guard)."""
    agents, store = members
    claim = agents["AgentBoreas"].assert_(CLAIM)
    agents["AgentCharlie"].dispute(claim)
    forged = "(implies (trigger ?x) (votesAgainst AgentCharlie ?x))"
    assert refused(lambda: agents["AgentAtlas"].assert_(forged)).kind == "koinii/use-the-move"
    store.assert_(forged, "CxAtlas")
    agents["AgentAtlas"].assert_(f"(trigger (sentexHandle {claim}))")
    assert {v["reason"] for v in store.violations()} == {"speaks-for-another"}
    for voter, stance in (("AgentAtlas", "for"), ("AgentBoreas", "for")):
        agents[voter].vote(stance, claim)
    [dispute] = agents["AgentAtlas"].disputes()
    won = majority.resolve_by_majority(store, dispute["dispute_id"], claim, "CxTeam")
    assert (won["for"], won["against"], won["outcome"]) == (2, 0, "for")  # no veto


def test_a_ballot_from_outside_the_channel_never_counts_in_its_majority(team):
    """Issue 37, hostile rerun: Charlie never joined CxOther, yet its ballot against
    Atlas's claim counted in CxOther's tally, and in the majority that rules there — any
    agent could swing any channel's vote. A channel counts its members' ballots: those
    cast in a context it sees."""
    wire = {a: channel.wire(team.client(a)) for a in ("AgentAtlas", "AgentBoreas", "AgentCharlie")}
    atlas = channel.join(wire["AgentAtlas"], "CxOther", "AgentAtlas")
    boreas = channel.join(wire["AgentBoreas"], "CxOther", "AgentBoreas")
    charlie = channel.join(wire["AgentCharlie"], "CxTeam", "AgentCharlie")
    claim = atlas.claim(CLAIM)
    boreas.dispute(claim)
    atlas.vote(claim, "for")
    outsider = charlie.vote(claim, "against")
    [dispute] = boreas.disputes()
    assert dispute["tally"] == {"for": 1, "against": 0}
    assert boreas.thread(claim)["tally"] == {"for": 1, "against": 0}
    won = majority.resolve_by_majority(team.client("Ops"), dispute["dispute_id"], claim, "CxOther")
    assert (won["for"], won["against"], won["outcome"]) == (1, 0, "for")
    assert outsider in won["ignored"]  # listed, never counted, never a veto
    channel.join(wire["AgentCharlie"], "CxOther", "AgentCharlie")  # a member: its ballot counts
    assert boreas.thread(claim)["tally"] == {"for": 1, "against": 1}


def test_a_reply_from_outside_the_channel_is_not_said_there(team):
    """Issue 37, hostile rerun: Charlie never joined CxOther, yet its answer to Boreas's
    question there made the question contested, and its endorsement and justification of
    Atlas's claim were listed in CxOther's thread as said there. A channel shows what its
    members say: the replies in a context it sees."""
    wire = {a: channel.wire(team.client(a)) for a in ("AgentAtlas", "AgentBoreas", "AgentCharlie")}
    atlas = channel.join(wire["AgentAtlas"], "CxOther", "AgentAtlas")
    boreas = channel.join(wire["AgentBoreas"], "CxOther", "AgentBoreas")
    charlie = channel.join(wire["AgentCharlie"], "CxTeam", "AgentCharlie")
    question = boreas.ask("(quote (usesDb Prod ?db))")
    atlas.answer(question, "(usesDb Prod Pg)")
    claim = atlas.claim("(level Prod 3)")
    charlie.answer(question, "(usesDb Prod My)")
    charlie.endorse(claim)
    charlie.justify(claim, "(quote (saw Dashboard))")
    thread = boreas.thread(question)
    assert (thread["state"], thread["answer_count"]) == ("answered", 1)
    assert [(q["state"], q["answer_count"]) for q in boreas.questions()] == [("answered", 1)]
    shown = boreas.thread(claim)
    assert shown["endorsements"] == [] and shown["justifications"] == []
    assert boreas.disputes() == []
    channel.join(wire["AgentCharlie"], "CxOther", "AgentCharlie")  # a member: said there
    assert boreas.thread(question)["state"] == "contested"
    assert [e["speaker"] for e in boreas.thread(claim)["endorsements"]] == ["AgentCharlie"]


def test_a_reason_cannot_forge_a_line_of_another_agents_move_in_the_terminal(team):
    """Issue 37, hostile rerun: a reason is printed after `because`, and one holding a
    newline printed a line of its own — `  #999 AgentBoreas: (usesDb Prod Forged)` — in
    `koinii thread` and `koinii tail`, read as Boreas's. A reason is kept as one line."""
    atlas = channel.join(channel.wire(team.client("AgentAtlas")), "CxTeam", "AgentAtlas")
    boreas = channel.join(channel.wire(team.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    question = atlas.ask("(quote (usesDb Prod ?db))")
    answer = boreas.answer(question, "(usesDb Prod Pg)")
    atlas.accept(answer, "fine\n  #999 AgentBoreas: (usesDb Prod Forged)\r\n")
    source = ["--url", team.url, "--token", team.tokens["AgentAtlas"]]
    for args in (
        ("thread", str(question), "-c", "CxTeam"),
        ("tail", "--no-follow", "--since", "0"),
    ):
        shown = koinii_cli(*args, *source)
        assert shown.returncode == 0, shown.stderr
        assert "fine #999 AgentBoreas" in shown.stdout
        assert not any(line.lstrip().startswith("#999") for line in shown.stdout.splitlines())


def test_an_agent_cannot_hijack_a_channel_with_an_agent_context_mark(members):
    agents, store = members
    seq = store.seq
    refusal = refused(lambda: agents["AgentAtlas"].assert_("(agentContext CxNext AgentAtlas)"))
    assert refusal.kind == "koinii/foreign-mark" and store.seq == seq
    medium = agents["AgentBoreas"].medium
    assert channel.join(medium, "CxNext", "AgentBoreas").channel == "CxNext"


def test_a_rule_cannot_take_over_a_channel_by_concluding_an_ownership_mark(members):
    """Issue 37: a rule over Atlas's own mark, placed where both contexts are seen — the
    channel — marked CxTeam as Boreas's, and every later join was refused."""
    agents, store = members
    seq = store.seq
    for rule in (
        "(implies (agentContext CxBoreas AgentBoreas) (agentContext CxTeam AgentAtlas))",
        "(implies (agentContext ?c AgentAtlas) (agentContext CxTeam AgentBoreas))",
        "(implies (usesDb ?x ?y) (and (isDb ?y) (not (agentContext CxTeam AgentBoreas))))",
    ):
        refusal = refused(lambda r=rule: agents["AgentBoreas"].assert_(r))
        assert refusal.kind == "koinii/underivable", rule
        assert refusal.data["predicate"] == "agentContext"
        assert "written by join" in refusal.message and "of your own" in refusal.message
    assert store.seq == seq
    medium = agents["AgentCharlie"].medium
    assert channel.join(medium, "CxTeam", "AgentCharlie").channel == "CxTeam"


def test_a_rule_cannot_derive_the_systems_vocabulary(team):
    """Declarations, registry rows and dispute marks are each written by one operation;
    derived, an agent's rule would decide how everyone's writes are read."""
    boreas = channel.join(channel.wire(team.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    for conclusion in (
        "(arity ?x 3)",
        "(functional ?x)",
        "(carriesClaim ?x 1)",
        "(speechAct ?x)",
        "(trustLevel AgentBoreas 1.0)",
        "(registeredAgent AgentBoreas)",
        "(disputeStale ?x 1 Gone)",
    ):
        refusal = refused(lambda c=conclusion: boreas.assert_(f"(implies (pick ?x) {c})"))
        assert refusal.kind == "koinii/underivable", conclusion
        assert refusal.data["predicate"] == conclusion[1:].split()[0]


def test_a_rule_concludes_in_its_own_context_never_in_the_channel(members):
    """Issue 37: Boreas's rule over Atlas's claim concluded in CxTeam — the one context
    that sees both — a claim the channel then held as its own, shown as Boreas's. A
    rule applies to what its own context sees, and concludes there."""
    agents, store = members
    agents["AgentAtlas"].assert_(CLAIM)
    boreas = agents["AgentBoreas"]
    boreas.assert_("(implies (usesDb Prod ?db) (usesDb Staging ?db))")
    boreas.assert_("(usesDb Prod My)")  # its own claim: the rule applies
    derived = store.sentexes_matching("(usesDb Staging ?db)", "?ctx")
    assert [(s.text, s.context) for s in derived] == [("(usesDb Staging My)", "CxBoreas")]
    assert store.query("(usesDb Staging ?db)", "CxTeam") == [{"?db": koinii.Sym("My")}]
    assert store.violations() == []  # Atlas's claim is not the rule's to use: no firing
    # the rule derived nothing into Atlas's context, which sees neither


# --- placements: an agent places its own context, and only under a channel ---------------

DUNE = {**TEAM, "AgentDune": "agent"}


def test_an_agent_cannot_squat_the_context_of_a_principal_that_has_not_joined_yet(
    start_daemon,
):
    """Issue 37: (genlCx CxDune CxAtlas) before Dune's first join made CxDune see
    CxAtlas, and stayed after it: Atlas's claims and rules read as Dune's own."""
    daemon = start_daemon(principals=DUNE)
    atlas = channel.join(channel.wire(daemon.client("AgentAtlas")), "CxTeam", "AgentAtlas")
    atlas.assert_("(implies (pick ?x) (usesDb Prod ?x))")
    ops = daemon.client("Ops")
    seq = ops.seq
    refusal = refused(lambda: atlas.store.assert_("(genlCx CxDune CxAtlas)", "CxUniverse"))
    assert refusal.kind == "koinii/not-a-channel"
    assert refusal.data == {"agent": "AgentAtlas", "parent": "CxDune", "owners": ["AgentDune"]}
    assert "reserved" in refusal.message and "(genlCx CxTeam CxAtlas)" in refusal.message
    assert ops.seq == seq
    dune = channel.join(channel.wire(daemon.client("AgentDune")), "CxTeam", "AgentDune")
    dune.assert_("(pick Pg)")
    assert ops.context_up("CxDune") == frozenset({"CxDune", "CxSpeechActs", "CxCore", "CxUniverse"})
    assert ops.query("(usesDb Prod ?db)", "CxDune") == []  # Atlas's rule is not Dune's
    # nor may any agent place a principal's context under its own (or anything else)
    refusal = refused(lambda: atlas.store.assert_("(genlCx CxAtlas CxDune)", "CxUniverse"))
    assert refusal.kind == "koinii/not-vocabulary" and "CxDune" in refusal.message


def test_an_agent_cannot_squat_the_context_the_system_speaks_as(tmp_path):
    """Issue 37, hostile rerun: with no AgentMajority in the table yet, Atlas joined a
    channel CxMajority — and from then on every table with the adjudicator's arbiter
    token was refused (`AgentMajority would own CxMajority, … a channel`), at start and on
    SIGHUP: majority rulings could never be deployed. The system's voices are reserved
    whether or not a token names them."""
    db, table = str(tmp_path / "team.db"), str(tmp_path / "team.tokens")
    tokens = {p: add_token(table, p, r) for p, r in (("AgentAtlas", "agent"), ("Ops", "operator"))}
    daemon = Daemon(db, ["--tokens", table], tokens).start()
    try:
        atlas = daemon.client("AgentAtlas")
        seq = daemon.client("Ops").seq
        refusal = refused(lambda: channel.join(channel.wire(atlas), "CxMajority", "AgentAtlas"))
        assert refusal.kind == "koinii/not-a-channel"
        assert refusal.data["owners"] == ["AgentMajority"]
        assert "the system speaks as AgentMajority" in refusal.message
        assert daemon.client("Ops").seq == seq
    finally:
        daemon.kill()
    add_token(table, "AgentMajority", "arbiter")  # the adjudicator, deployed later
    Daemon(db, ["--tokens", table], tokens).start().kill()  # starts: nothing squats it


def test_an_agent_cannot_place_its_context_under_another_agents_beliefs(team):
    """Boreas's belief context, CxAgentAgentBoreas, is what Boreas believes (`believe_own`
    links it to CxBoreas): Atlas placed its own context under it — by `join`, or a plain
    placement — and Boreas believed Atlas's claims. Another principal's belief context is
    no channel, before its owner links it too (Charlie's)."""
    boreas, atlas = team.client("AgentBoreas"), team.client("AgentAtlas")
    belief.believe_own(boreas, "AgentBoreas")
    channel.join(channel.wire(atlas), "CxTeam", "AgentAtlas").claim("(usesDb Prod Evil)")
    seq = atlas.seq
    placed = "(genlCx CxAgentAgent{} CxAtlas)".format
    for owner, place in (
        (
            "AgentBoreas",
            lambda: channel.join(channel.wire(atlas), "CxAgentAgentBoreas", "AgentAtlas"),
        ),
        ("AgentBoreas", lambda: atlas.assert_(placed("Boreas"), "CxUniverse")),
        ("AgentCharlie", lambda: atlas.assert_(placed("Charlie"), "CxUniverse")),
    ):
        refusal = refused(place)
        assert refusal.kind == "koinii/not-a-channel" and refusal.data["owners"] == [owner]
        assert "belief" in refusal.message and "(genlCx CxTeam CxAtlas)" in refusal.message
    assert atlas.seq == seq
    assert not belief.would_believe(boreas, "AgentBoreas", "(usesDb Prod Evil)")
    assert belief.believe_own(atlas, "AgentAtlas") == "CxAgentAgentAtlas"  # its own: fine


def test_an_agent_cannot_pull_another_channel_into_its_own(team):
    """Issue 37: (genlCx CxAtlas CxOther) made CxTeam — which sees CxAtlas — list
    CxOther's questions and disputes as its own. An agent's own context sees only
    vocabulary; to take part in CxOther, it joins it."""
    wire = {a: channel.wire(team.client(a)) for a in ("AgentAtlas", "AgentBoreas")}
    atlas = channel.join(wire["AgentAtlas"], "CxTeam", "AgentAtlas")
    boreas = channel.join(wire["AgentBoreas"], "CxOther", "AgentBoreas")
    boreas.pose_query("(quote (usesDb Prod ?db))")
    ops = team.client("Ops")
    seq = ops.seq
    for sup, why in (
        ("CxOther", "a channel (it sees CxBoreas)"),
        ("CxBoreas", "AgentBoreas's own context"),
        ("CxNowhere", "empty"),
    ):
        refusal = refused(lambda s=sup: atlas.store.assert_(f"(genlCx CxAtlas {s})", "CxUniverse"))
        assert refusal.kind == "koinii/not-vocabulary", sup
        assert why in refusal.message and f"(genlCx {sup} CxAtlas)" in refusal.message
    assert ops.seq == seq
    assert ops.context_up("CxTeam") == frozenset(
        {"CxTeam", "CxAtlas", "CxSpeechActs", "CxCore", "CxUniverse"}
    )
    # joining is how Atlas takes part: the channel sees it
    assert channel.join(wire["AgentAtlas"], "CxOther", "AgentAtlas").channel == "CxOther"
    assert atlas.store.context_up("CxTeam") == ops.context_up("CxTeam")


def test_an_agent_cannot_make_the_vocabulary_its_channel(team):
    """Placed under CxSpeechActs — which every agent's context sees — an agent's claims,
    rules and declarations would be in every agent's own view."""
    boreas = channel.join(channel.wire(team.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    atlas = team.client("AgentAtlas")
    for parent in ("CxSpeechActs", "CxRegistry"):
        refusal = refused(lambda p=parent: channel.join(channel.wire(atlas), p, "AgentAtlas"))
        assert refusal.kind == "koinii/not-a-channel", parent
    refusal = refused(lambda: atlas.assert_("(genlCx CxSpeechActs CxAtlas)", "CxUniverse"))
    assert refusal.kind == "koinii/not-a-channel" and "AgentBoreas" in refusal.data["owners"]
    assert boreas.store.context_up("CxBoreas") == frozenset(
        {"CxBoreas", "CxSpeechActs", "CxCore", "CxUniverse"}
    )


def test_an_agent_cannot_join_a_system_context_as_a_channel(team):
    """Issue 37, hostile rerun: `join(channel="CxDisputes")` was accepted — CxDisputes,
    where the daemon keeps disputes' lifecycle marks, then saw the attacker's context, and
    listed it as a channel with the attacker its member. The system's contexts are never
    channels, whether or not some agent speaks them."""
    atlas = team.client("AgentAtlas")
    ops = team.client("Ops")
    seq = ops.seq
    for parent in ("CxDisputes", "CxHistory"):
        refusal = refused(lambda p=parent: channel.join(channel.wire(atlas), p, "AgentAtlas"))
        assert refusal.kind == "koinii/not-a-channel", parent
        assert "one of the system's own contexts" in refusal.message
        assert "(genlCx CxTeam CxAtlas)" in refusal.message  # how to fix the call
        assert refusal.data == {"agent": "AgentAtlas", "parent": parent, "owners": []}
    refusal = refused(lambda: atlas.assert_("(genlCx CxDisputes CxAtlas)", "CxUniverse"))
    assert refusal.kind == "koinii/not-a-channel"
    assert ops.seq == seq and ops.context_up("CxDisputes") == frozenset(
        {"CxDisputes", "CxCore", "CxUniverse"}
    )


# --- declarations: they govern the writes of the contexts that see them ------------------


def test_a_declaration_governs_only_the_contexts_that_see_it(members):
    """Issue 37: Atlas's `(functional P)` in its own context made two values of Boreas's
    a clash in every context — in channels Atlas never joined too."""
    agents, store = members
    agents["AgentAtlas"].assert_("(functional level)")
    agents["AgentBoreas"].assert_("(level Prod 1)")
    agents["AgentBoreas"].assert_("(level Prod 2)")
    assert store.contradictions("CxTeam") == [] and store.contradictions() == []
    agents["AgentAtlas"].assert_("(level Staging 1)")
    agents["AgentAtlas"].assert_("(level Staging 2)")  # its own values: its own rule
    for ctx in ("CxTeam", "CxAtlas", None):
        [clash] = store.contradictions(ctx)
        assert {s["sentence"] for s in clash["sides"]} == {"(level Staging 1)", "(level Staging 2)"}
    assert store.contradictions("CxBoreas") == []


def test_an_agent_cannot_declare_the_systems_vocabulary(members):
    """Issue 37, hostile rerun: `(functional genlCx)` in Atlas's own context made CxTeam
    list its members' placements as an open dispute of differing values (with a tally to
    vote on), and `(arity queries 1)` listed the vocabulary's own `(arity queries 2)` as
    contested. An agent declares the predicates of its own, never the system's."""
    agents, store = members
    atlas = agents["AgentAtlas"]
    seq = store.seq
    for declaration, declared_in in (
        ("(functional genlCx)", "CxCore"),
        ("(arity queries 1)", "CxSpeechActs"),
        ("(singleValued agentContext 1)", "CxSpeechActs"),
        ("(functional trustLevel)", "CxRegistry"),
        ("(carriesClaim endorses 2)", "CxSpeechActs"),
        ("(target_following_predicate queries)", "CxSpeechActs"),
        ("(speechAct disputeStale)", "CxDisputes"),
        ("(arity arity 3)", "CxCore"),
        ("(not (arity endorses 2))", "CxSpeechActs"),
    ):
        refusal = refused(lambda d=declaration: atlas.claim(d))
        assert refusal.kind == "koinii/system-vocabulary", declaration
        assert refusal.data["declared_in"] == declared_in, declaration
        assert "declare a predicate of your own" in refusal.message
    assert store.seq == seq
    assert [d for d in atlas.disputes() if d["class"] == "values"] == []
    atlas.claim("(functional level)")  # a predicate of its own: its own rule
    atlas.claim("(arity level 2)")


def test_an_agent_cannot_deny_another_agents_move_or_the_systems_sentences(members):
    """Issue 37, hostile rerun: `(not (disputes AgentBoreas (sentexHandle T)))` in Atlas's
    own context was accepted — a negated speech act names no speaker to check — and CxTeam
    listed Boreas's dispute, its ballot, its question and Charlie's answer each as an open
    contradiction, for a majority to rule against. A move is taken back by its speaker and
    challenged by a dispute; an ownership mark and the system's sentences are no agent's
    to deny, by a claim or by a rule's conclusion."""
    agents, store = members
    atlas, boreas = agents["AgentAtlas"], agents["AgentBoreas"]
    claim = agents["AgentCharlie"].claim(CLAIM)
    dispute = boreas.dispute(claim)
    boreas.vote(claim, "against")
    question = boreas.ask("(quote (usesDb Staging ?db))")
    agents["AgentCharlie"].answer(question, "(usesDb Staging Pg)")
    seq = store.seq
    for denial, kind in (
        (f"(not (disputes AgentBoreas (sentexHandle {claim})))", "koinii/use-the-move"),
        (f"(not (votesAgainst AgentBoreas (sentexHandle {claim})))", "koinii/use-the-move"),
        ("(not (queries AgentBoreas (quote (usesDb Staging ?db))))", "koinii/use-the-move"),
        (
            f"(not (answers AgentCharlie (quote (usesDb Staging Pg)) (sentexHandle {question})))",
            "koinii/use-the-move",
        ),
        (f"(not (disputes AgentAtlas (sentexHandle {claim})))", "koinii/use-the-move"),
        ("(not (agentContext CxBoreas AgentBoreas))", "koinii/foreign-mark"),
        (f"(not (contested (sentexHandle {claim})))", "koinii/system-vocabulary"),
        ("(not (registeredAgent AgentBoreas))", "koinii/system-vocabulary"),
        ("(implies (pick ?x) (not (disputes AgentBoreas ?x)))", "koinii/use-the-move"),
        ("(implies (pick ?x) (and (seen ?x) (not (contested ?x))))", "koinii/system-vocabulary"),
    ):
        refusal = refused(lambda d=denial: atlas.claim(d))
        assert refusal.kind == kind, denial
        assert "may not write (not (" in refusal.message
    for denied, kind in (  # nor as the claim an answer to its own yes/no question carries
        (f"(disputes AgentBoreas (sentexHandle {claim}))", "koinii/use-the-move"),
        (f"(contested (sentexHandle {claim}))", "koinii/system-vocabulary"),
    ):
        asked = atlas.ask(f"(quote {denied})")
        refusal = refused(lambda d=denied, q=asked: atlas.answer(q, f"(not {d})"))
        assert refusal.kind == kind, denied
        seq = store.seq
    assert store.seq == seq
    assert [d["class"] for d in boreas.disputes()] == ["contradiction"]  # Boreas's own
    [standing] = boreas.disputes()
    assert [m["handle"] for m in standing["raised_by"]] == [dispute]
    atlas.claim(f"(not {CLAIM})")  # denying a claim is a claim: it stands beside it


def test_a_functional_clash_of_thousands_of_values_is_one_group_read_at_once(team):
    """Issue 37: 2,000 values of one functional predicate were compared in pairs — 4
    million — and any read listing clashes (disputes, a thread, the web view's channel
    page) held the daemon 4 to 16 s. Values are grouped, so the read is one pass."""
    atlas = channel.join(channel.wire(team.client("AgentAtlas")), "CxTeam", "AgentAtlas")
    atlas.assert_("(functional level)")
    for first in range(0, 2000, 25):  # (in batches each within a write's budget)
        atlas.store.edit(add=[(f"(level Prod {i})", "CxAtlas") for i in range(first, first + 25)])
    ops = team.client("Ops")
    # (paired, each read ran past its budget, 0.5 s: refused budget-exhausted)
    [clash] = ops.contradictions("CxTeam")
    [everywhere] = ops.contradictions()
    assert len(clash["handles"]) == 2000 and everywhere["handles"] == clash["handles"]


def test_the_raw_wire_writes_meet_the_same_rules(team):
    """The same attacks as raw requests with Atlas's token: the daemon refuses them."""
    boreas = channel.join(channel.wire(team.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    channel.join(channel.wire(team.client("AgentAtlas")), "CxTeam", "AgentAtlas")
    claim = boreas.assert_(CLAIM)
    atlas = team.client("AgentAtlas")
    ops = team.client("Ops")
    seq = ops.seq
    for sentence, opts, kind in (
        (f"(except (sentexHandle {claim}))", {}, "koinii/foreign-mask"),
        (f"(not {CLAIM})", {"strength": "monotonic"}, "koinii/strength-forbidden"),
        ("(agentContext CxTeam AgentAtlas)", {}, "koinii/foreign-mark"),
    ):
        assert refused(lambda s=sentence, o=opts: atlas.assert_(s, "CxAtlas", **o)).kind == kind
        batch = [(sentence, "CxAtlas", opts)]
        assert refused(lambda b=batch: atlas.edit(add=b)).kind == kind
    assert ops.seq == seq
    # a mark another context holds claims nothing: an old store that has one still joins
    ops.assert_("(agentContext CxTeam AgentAtlas)", "CxAtlas")
    assert channel.join(channel.wire(team.client("AgentCharlie")), "CxTeam", "AgentCharlie")


def test_a_dry_run_names_the_refusal_the_write_would_get(team):
    """`check` and `check_edit` judge an agent's entries by the daemon's rules as well as
    the engine's: an agent told "no problems" was then refused its write."""
    boreas = channel.join(channel.wire(team.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    mover = channel.join(channel.wire(team.client("AgentAtlas")), "CxTeam", "AgentAtlas")
    claim = boreas.claim(CLAIM)
    ballot = mover.vote(claim, "for")
    atlas, ops = team.client("AgentAtlas"), team.client("Ops")
    seq = ops.seq
    quoted = f"(says AgentAtlas (quote (endorses AgentAtlas (sentexHandle {claim}))))"
    for sentence, opts, kind in (
        (f"(except (sentexHandle {claim}))", {}, "koinii/foreign-mask"),
        (f"(except (sentexHandle {ballot}))", {}, "koinii/use-the-move"),  # its own move
        (quoted, {}, "koinii/use-the-move"),
        (f"(not {CLAIM})", {"strength": "monotonic"}, "koinii/strength-forbidden"),
        ("(agentContext CxTeam AgentAtlas)", {}, "koinii/foreign-mark"),
        ("(note Mine)", {"creator": "AgentBoreas"}, "koinii/creator-mismatch"),
    ):
        assert [p["kind"] for p in atlas.check(sentence, "CxAtlas", **opts)] == [kind]
        problems = atlas.check_edit(add=[("(note Fine)", "CxAtlas"), (sentence, "CxAtlas", opts)])
        assert [(p["kind"], p["in"], p["index"]) for p in problems] == [(kind, "add", 1)]
    [problem] = atlas.check_edit(remove=[claim])
    assert (problem["kind"], problem["in"], problem["index"]) == (
        "koinii/foreign-sentex",
        "remove",
        0,
    )
    assert refused(lambda: atlas.retract(claim)).kind == problem["kind"]
    assert atlas.check_edit(add=[("(note Fine)", "CxAtlas")], remove=[]) == []
    assert ops.seq == seq  # a dry run stores nothing


def test_an_agent_cannot_make_its_claim_read_as_a_ruling_after_the_fact(team):
    """A ruling's tag (`adjudication`, `adjudication#2`) is refused in an agent's write,
    and was taken by `add_provenance` on the agent's own claim: the claim then read as a
    ruling. The tag is a ruling's on every path that writes provenance."""
    atlas = team.client("AgentAtlas")
    claim = atlas.assert_(CLAIM, "CxAtlas")
    seq = atlas.seq
    for field in ("adjudication", "adjudication#2"):
        refusal = refused(lambda f=field: atlas.add_provenance(claim, {f: {"ruling": "upheld"}}))
        assert refusal.kind == "reserved-provenance" and refusal.data == {"field": field}
        assert "ruling" in refusal.message
    assert atlas.seq == seq and "adjudication" not in atlas.provenance(claim)
    atlas.add_provenance(claim, {"source": "runbook"})  # a writer's own field: fine


# --- poisoned reads: values no JSON reader takes back ----------------------------------------


def test_an_agent_cannot_poison_the_reads_of_others_with_nan(team):
    atlas, boreas = team.client("AgentAtlas"), team.client("AgentBoreas")
    claim = "(usesDb ProdCluster Postgres)"
    refusal = refused(
        lambda: atlas.assert_(claim, "CxAtlas", provenance={"confidence": float("nan")})
    )
    assert refusal.kind == "bad-value" and refusal.data["field"] == "provenance.confidence"
    h = atlas.assert_(claim, "CxAtlas", provenance={"confidence": 0.9})
    seq = atlas.seq
    refusal = refused(lambda: atlas.add_provenance(h, {"weight": float("inf")}))
    assert refusal.kind == "bad-value" and atlas.seq == seq  # refused, and nothing committed
    refusal = refused(lambda: atlas.add_provenance(h, {"by": "\ud800"}))
    assert refusal.kind == "bad-value"
    # every read of the claim still answers, for everyone
    assert boreas.provenance(h)["confidence"] == 0.9
    assert [s.handle for s in boreas.sentexes_matching("(usesDb ?c ?d)", "CxAtlas")] == [h]
    assert boreas.query("(usesDb ?c ?d)", "CxAtlas")


# --- DNS rebinding: the Host is a name the daemon answers to ---------------------------------


def raw(daemon, path: str, body: bytes = b"{}", headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
    conn.request("POST" if path.startswith("/v1/") else "GET", path, body, headers or {})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def test_a_rebinding_page_cannot_drive_an_open_daemon(on_sqlite):
    daemon = on_sqlite()
    # evil.example resolved to 127.0.0.1 for a moment: to the browser the page and the
    # daemon are one origin, so it sends its own name as Host and as Origin
    site = f"evil.example:{daemon.port}"
    page = {"Host": site, "Origin": f"http://{site}", "Content-Type": "text/plain"}
    body = json.dumps({"sentence": "(pwned By Rebinding)", "context": "CxA"}).encode()
    status, reply = raw(daemon, "/v1/assert", body, page)
    assert (status, reply["error"]["kind"]) == (403, "bad-host")
    assert "--allow-host evil.example" in reply["error"]["message"]
    assert raw(daemon, "/health", headers=page)[0] == 403  # reads too
    with daemon.client() as client:
        assert client.query("(pwned ?x ?y)", "CxA") == []


def test_a_rebinding_page_gets_no_further_with_an_agents_token(on_sqlite):
    team = on_sqlite(principals=TEAM)
    site = f"evil.example:{team.port}"
    page = {
        "Host": site,
        "Origin": f"http://{site}",
        "Authorization": f"Bearer {team.tokens['AgentAtlas']}",
    }
    body = json.dumps({"sentence": "(pwned By Rebinding)", "context": "CxAtlas"}).encode()
    assert raw(team, "/v1/assert", body, page)[1]["error"]["kind"] == "bad-host"


def test_loopback_and_allowed_names_are_answered_and_the_origin_check_still_holds(on_sqlite):
    daemon = on_sqlite("--allow-host", "koinii.internal")
    for host in ("127.0.0.1", "localhost", "LOCALHOST.", "127.0.0.2", "[::1]"):
        status, reply = raw(daemon, "/v1/stats", headers={"Host": f"{host}:{daemon.port}"})
        assert status == 200 and reply["ok"] is True, host
    named = f"koinii.internal:{daemon.port}"
    assert raw(daemon, "/v1/stats", headers={"Host": named, "Origin": f"http://{named}"})[0] == 200
    local = f"localhost:{daemon.port}"
    for origin in ("http://localhost:3000", "null", f"http://{named}"):  # another origin
        status, reply = raw(daemon, "/v1/stats", headers={"Host": local, "Origin": origin})
        assert (status, reply["error"]["kind"]) == (403, "cross-origin"), origin
    assert raw(daemon, "/v1/stats", headers={"Host": f"other.internal:{daemon.port}"})[0] == 403


# --- starving others: subscriptions, memory, connections -------------------------------------


def test_one_token_cannot_take_another_principals_subscription_slots(on_sqlite):
    team = on_sqlite(principals=TEAM)
    atlas, boreas = team.client("AgentAtlas"), team.client("AgentBoreas")
    opened = 0
    with pytest.raises(koinii.Refused) as refusal:
        while opened < 2000:  # bounded: the daemon's cap is 1024
            atlas.watch()
            opened += 1
    assert opened == 64  # the documented default quota
    assert refusal.value.kind == "too-many-subscriptions"
    assert refusal.value.data["quota"] == 64
    assert "--max-subscriptions-per-principal" in refusal.value.message
    assert boreas.poll(boreas.watch()["token"], 0)["events"] == []


def test_an_agent_cannot_see_poll_stream_or_drop_another_agents_subscription(on_sqlite):
    team = on_sqlite(principals=TEAM)
    atlas, boreas = team.client("AgentAtlas"), team.client("AgentBoreas")
    mine = boreas.watch("(usesDb ?c ?d)", "CxBoreas")["token"]
    [listed] = atlas.watchers()
    assert listed["token"] is None and listed["principal"] == "AgentBoreas"
    for attack in (
        lambda: atlas.unwatch(mine),
        lambda: atlas.poll(mine, 0),
        lambda: next(atlas.stream(mine, 0)),
    ):
        assert refused(attack).kind == "koinii/foreign-subscription"
    boreas.assert_("(usesDb ProdCluster Postgres)", "CxBoreas")
    assert len(boreas.poll(mine, 0)["events"]) == 1
    assert team.client("Ops").watchers()[0]["token"] == mine  # an operator sees all


def rss_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS"))
    return int(line.split()[1]) // 1024


def test_watchers_share_one_copy_of_each_event(on_sqlite):
    daemon = on_sqlite()
    client = daemon.client()
    filler = "x" * 180  # 3,000 sentences: a 0.6 MB edit

    def growth_of_an_edit(ctx: str) -> int:
        # A search of what is written waits for the search's model, which the daemon loads
        # in a thread as it starts (80 MiB), and indexes all that is not yet indexed:
        # neither then grows the daemon while the edit is measured.
        assert client.search("seed note", "CxA")
        before = rss_mib(daemon.proc.pid)
        with client.budget(10):  # a bulk load: the operator gives it time
            client.edit(add=[(f'(note Thing{i} "{filler}")', ctx) for i in range(3000)])
        client.stats()  # delivered by now: events go out before the writer's reply
        return rss_mib(daemon.proc.pid) - before

    client.assert_('(note Seed "a seed note")', "CxA")
    client.watch()
    alone = growth_of_an_edit("CxA")  # the store's own growth, with one watcher
    tokens = [client.watch()["token"] for _ in range(150)]
    tokens += [client.watch("(note ?x ?text)", "CxB")["token"] for _ in range(49)]
    watched = growth_of_an_edit("CxB")  # 200 watchers: before, a copy each (~140 MiB)
    assert watched - alone < 25, (alone, watched)
    first, last = client.poll(tokens[0], 0), client.poll(tokens[-1], 0)
    assert len(first["events"][0].added) == len(last["events"][0].added) == 3000


def connect(daemon: Daemon, send: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", daemon.port), timeout=5)
    if send:
        sock.sendall(send)
    return sock


def answer(sock: socket.socket) -> bytes:
    """What the daemon sends before it closes the connection (b"" if it closes silently;
    a close with our data unread may reset the connection before its answer is read)."""
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    return got


STALLED_HEADERS = b"POST /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthoriz"


def test_300_connections_without_a_token_do_not_lock_out_a_client_with_one(on_sqlite):
    # 256 descriptors, as on a machine with a low `ulimit -n`: 300 connections that never
    # finish a request (half of them stuck in their headers) would take them all
    team = on_sqlite(principals=TEAM, fd_limit=256)
    stalled = []
    try:
        for i in range(300):
            stalled.append(connect(team, STALLED_HEADERS if i % 2 else b""))
        with team.client("AgentBoreas", timeout=5) as boreas:
            started = time.monotonic()
            assert boreas.assert_("(still Served)", "CxBoreas") > 0
            assert boreas.stats()["seq"] > 0
            assert time.monotonic() - started < 5
    finally:
        for sock in stalled:
            sock.close()


def test_a_client_that_stalls_in_its_headers_is_cut_off(on_sqlite):
    daemon = on_sqlite("--header-timeout", "0.5", principals=TEAM)
    silent, slow = connect(daemon), connect(daemon, STALLED_HEADERS)
    # answered at once (no token), it never sends the body it announced
    announced = connect(
        daemon, b"POST /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 999999\r\n\r\n{"
    )
    started = time.monotonic()
    assert answer(slow).startswith(b"HTTP/1.1 408")
    assert answer(silent).startswith(b"HTTP/1.1 408")
    assert answer(announced).startswith(b"HTTP/1.1 401")  # then closed, not kept
    assert time.monotonic() - started < 4
    endless = connect(daemon, b"POST /v1/stats HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 200_000)
    cut = answer(endless)  # closed: with a 431, or reset before it could be read
    assert cut == b"" or cut.startswith(b"HTTP/1.1 431")
    with daemon.client("AgentBoreas") as client:  # a client that sends its request is served
        assert client.stats()["seq"] >= 0


def test_a_client_that_stalls_in_its_body_is_refused_body_timeout(on_sqlite):
    team = on_sqlite("--body-timeout", "0.5", principals=TEAM)
    head = (
        b"POST /v1/assert HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b'Authorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{"sentence"'
    ) % team.tokens["AgentAtlas"].encode()
    sock = connect(team, head)
    started = time.monotonic()
    response = http.client.HTTPResponse(sock)
    response.begin()
    assert response.status == 408 and time.monotonic() - started < 4
    assert json.loads(response.read())["error"]["kind"] == "body-timeout"
    sock.close()
