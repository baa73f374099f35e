"""The coordination channel (channel.md): every method and every refusal, over local(kb).

A move is one operation, which answers alike over the wire (tests/test_wire_contract.py)
and is one exchange from either agent (tests/test_moves.py); the tests marked
`EVERY_MEDIUM` run again over wire(client) against a real daemon and over
achannel.wire(AsyncClient) (the asyncio agent behind a blocking face, tests/blocking.py),
for what the clients themselves do."""

import pytest

import koinii
from koinii import Sym
from koinii.channel import agent as channel
from tests.blocking import Loop, Medium
from tests.conftest import refused

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

P = "(usesDatabase ProdCluster PostgreSQL14)"


EVERY_MEDIUM = pytest.mark.parametrize("medium", ["local", "wire", "async-wire"], indirect=True)


@pytest.fixture
def medium(request, start_daemon, new_location):
    """medium(agent_id) -> the medium that agent joins through (its own connection on the wire)."""
    if getattr(request, "param", "local") == "local":
        kb = koinii.open_kb(new_location())
        shared = channel.local(kb)
        yield lambda agent=None: shared
        kb.close()
    elif request.param == "wire":
        daemon = start_daemon()
        yield lambda agent=None: channel.wire(daemon.client())
    else:
        daemon = start_daemon()
        loop = Loop()
        yield lambda agent=None: Medium(koinii.aconnect(daemon.url), loop)
        loop.close()


def join(medium, channel_name: str, agent_id: str, **kwargs):
    """`channel.join`, or `achannel.join` for the asyncio medium (behind its blocking face)."""
    if isinstance(medium, Medium):
        return medium.join(channel_name, agent_id, **kwargs)
    return channel.join(medium, channel_name, agent_id, **kwargs)


@pytest.fixture
def team(medium):
    """Atlas, Boreas and Ciel joined to CxDeploy."""
    return {
        name: join(medium(name), "CxDeploy", f"Agent{name}") for name in ("Atlas", "Boreas", "Ciel")
    }


# --- join ------------------------------------------------------------------------------------


@EVERY_MEDIUM
def test_join_places_the_agent_context_under_the_channel(medium):
    atlas = join(medium("Atlas"), "CxDeploy", "AgentAtlas")
    assert (atlas.agent, atlas.context, atlas.channel) == ("AgentAtlas", "CxAtlas", "CxDeploy")
    store = atlas.store
    assert "CxAtlas" in store.context_up("CxDeploy")
    assert "CxSpeechActs" in store.context_up("CxAtlas")
    assert store.query("(agentContext CxAtlas ?who)", "CxAtlas") == [{"?who": Sym("AgentAtlas")}]
    h = atlas.assert_(P)
    sentex = store.sentex(h)
    assert sentex.context == "CxAtlas" and sentex.provenance["creator"] == "AgentAtlas"


def test_rejoining_is_idempotent(medium):
    first = join(medium("Atlas"), "CxDeploy", "AgentAtlas")
    seq = first.store.seq
    again = join(medium("Atlas"), "CxDeploy", "AgentAtlas")
    assert again.context == first.context and again.store.seq == seq


def test_join_speaks_another_vocabulary_when_asked(medium):
    atlas = join(medium("Atlas"), "CxDeploy", "AgentAtlas", speaks="CxCore")
    assert "CxCore" in atlas.store.context_up("CxAtlas")


@EVERY_MEDIUM
def test_not_a_channel_the_registry_the_own_context_or_another_agents(team, medium):
    store = team["Atlas"].store
    for parent, owners in (("CxRegistry", []), ("CxMallory", []), ("CxAtlas", ["AgentAtlas"])):
        refusal = refused(lambda p=parent: join(medium("Mallory"), p, "AgentMallory"))
        assert refusal.kind == "koinii/not-a-channel"
        assert refusal.data == {"agent": "AgentMallory", "parent": parent, "owners": owners}
        assert store.context_down("CxMallory") == {"CxMallory"}  # no edge was written
        assert store.context_up("CxMallory") == {"CxMallory", "CxUniverse"}


def test_joining_as_the_registry_is_forbidden(medium):
    assert refused(lambda: join(medium(), "CxDeploy", "AgentRegistry")).kind == (
        "koinii/registry-forbidden"
    )


@EVERY_MEDIUM
def test_a_forged_handle_still_writes_only_the_agents_own_context(team):
    """The move runs on the writer, which takes the context from the agent's id: a handle
    whose context was forged (here, the registry) changes nothing."""
    boreas = team["Boreas"]
    if isinstance(boreas.medium, Medium):
        forged = boreas.forged("CxRegistry")
    else:
        forged = channel.Agent(boreas.medium, "AgentBoreas", "CxRegistry", "CxDeploy")
    h = forged.claim("(trustLevel AgentBoreas 99)")
    assert boreas.store.sentex(h).context == "CxBoreas"
    forged.reply_many(["(trustLevel AgentBoreas 98)"])
    assert boreas.store.sentexes_matching("(trustLevel ?a ?v)", "CxRegistry") == []


# --- the write checks ------------------------------------------------------------------------


def test_creator_mismatch_is_refused_and_the_own_id_allowed(team):
    atlas = team["Atlas"]
    refusal = refused(lambda: atlas.assert_(P, creator="AgentBoreas"))
    assert refusal.kind == "koinii/creator-mismatch" and "cannot assert as" in refusal.message
    assert refusal.data == {"agent": "AgentAtlas", "creator": "AgentBoreas"}
    assert atlas.store.sentexes_matching(P, "?ctx") == []
    h = atlas.assert_(P, creator="AgentAtlas")
    sentex = atlas.store.sentex(h)
    assert sentex.strength == "default" and sentex.provenance["creator"] == "AgentAtlas"


def test_speaker_mismatch_in_a_single_assert(team):
    atlas = team["Atlas"]
    claim = atlas.assert_(P)
    for act in ("endorses", "votesFor"):
        refusal = refused(lambda a=act: atlas.assert_(f"({a} AgentBoreas (sentexHandle {claim}))"))
        assert refusal.kind == "koinii/speaker-mismatch" and "cannot speak as" in refusal.message
        assert refusal.data == {"agent": "AgentAtlas", "named": "AgentBoreas", "act": act}
    own = f"(endorses AgentAtlas (sentexHandle {claim}))"  # the move's to write: endorse()
    assert refused(lambda: atlas.claim(own)).kind == "koinii/use-the-move"


def test_speaker_mismatch_in_a_batch_is_checked_before_the_first_write(team):
    claim = team["Atlas"].assert_(P)
    boreas = team["Boreas"]
    refusal = refused(
        lambda: boreas.reply_many(
            [
                f"(votesFor AgentAtlas (sentexHandle {claim}))",
                f"(votesFor AgentBoreas (sentexHandle {claim}))",
            ]
        )
    )
    assert refusal.kind == "koinii/speaker-mismatch" and refusal.data["named"] == "AgentAtlas"
    assert boreas.store.sentexes_matching(f"(votesFor ?a (sentexHandle {claim}))", "?ctx") == []
    own_ballot = f"(votesFor AgentBoreas (sentexHandle {claim}))"  # vote()'s to write
    refusal = refused(lambda: boreas.reply_many([own_ballot, "(usesCache ProdCluster Redis)"]))
    assert refusal.kind == "koinii/use-the-move" and refusal.data["move"] == "vote"
    result = boreas.reply_many(["(usesCache ProdCluster Redis)", "(usesQueue ProdCluster Sqs)"])
    assert len(result.handles) == 2


def test_an_inadmissible_reply_writes_nothing(team):
    boreas = team["Boreas"]
    refusal = refused(
        lambda: boreas.reply_many(["(usesCache ProdCluster Redis)", "(Not a sentence"])
    )
    assert refusal.kind == "koinii/reply-inadmissible"
    assert refusal.data["problems"] and refusal.data["problems"][0]["index"] == 1
    assert boreas.store.sentexes_matching("(usesCache ?c ?x)", "?ctx") == []


def test_an_admissible_reply_commits_whole(team):
    q = team["Atlas"].pose_query("WhichStack")
    result = team["Boreas"].reply_many([P, f"(answerTo (sentexHandle {q}) PostgreSQL14)"])
    assert len(result.handles) == 2
    assert all(team["Boreas"].store.sentex(h).context == "CxBoreas" for h in result.handles)


# --- replies ---------------------------------------------------------------------------------


def test_a_query_and_its_answer(team):
    atlas, boreas = team["Atlas"], team["Boreas"]
    q = atlas.pose_query("WhichDbProdClusterUses")
    assert atlas.store.sentex(q).text == "(queries AgentAtlas WhichDbProdClusterUses)"
    a = boreas.answer("PostgreSQL14", q)
    [answer] = atlas.answers_to(q)
    assert answer.handle == a and answer.context == "CxBoreas"
    claim = f"(answerTo (sentexHandle {q}) PostgreSQL14)"
    assert answer.text == f"(answers AgentBoreas (quote {claim}) (sentexHandle {q}))"
    assert channel.speaker_of(answer) == "AgentBoreas"
    assert channel.answer_content(answer) == Sym("PostgreSQL14")
    assert [s["speaker"] for s in boreas.open_queries()] == ["AgentAtlas"]


def test_a_re_answer_with_the_same_content_is_the_same_handle(team):
    q = team["Atlas"].pose_query("WhichDb")
    assert team["Boreas"].answer("PostgreSQL14", q) == team["Boreas"].answer("PostgreSQL14", q)
    assert len(team["Atlas"].answers_to(q)) == 1


def test_two_endorsers_are_two_sentexes(team):
    claim = team["Atlas"].assert_(P)
    b, c = team["Boreas"].endorse(claim), team["Ciel"].endorse(claim)
    assert b != c
    endorsements = team["Atlas"].endorsements_of(claim)
    assert {channel.speaker_of(s) for s in endorsements} == {"AgentBoreas", "AgentCiel"}
    assert {s.context for s in endorsements} == {"CxBoreas", "CxCiel"}


def test_a_dispute_puts_the_pair_in_contradictions(team):
    claim = team["Atlas"].assert_(P)
    edge = team["Boreas"].dispute(claim)
    store = team["Boreas"].store
    assert store.sentex(edge).text == f"(disputes AgentBoreas (sentexHandle {claim}))"
    assert store.sentex(edge).context == "CxBoreas"
    [clash] = store.contradictions("CxDeploy")
    assert claim in clash["handles"]
    assert [
        s.context for s in store.sentexes_matching(f"(contested (sentexHandle {claim}))", "?c")
    ] == ["CxBoreas"]


def test_disputing_nothing_is_refused_and_writes_nothing(team):
    boreas = team["Boreas"]
    missing = 1_000_000 + boreas.store.stats()["sentexes"]
    refusal = refused(lambda: boreas.dispute(missing))
    assert refusal.kind == "koinii/no-such-handle" and refusal.data == {"handle": missing}
    assert boreas.store.sentexes_matching("(not (usesDatabase ?c ?d))", "CxBoreas") == []


def test_votes_and_the_stances_that_exist(team):
    claim = team["Atlas"].assert_(P)
    against = team["Boreas"].vote("against", claim)
    assert team["Boreas"].vote("against", claim) == against
    assert (
        team["Boreas"].store.sentex(against).text
        == f"(votesAgainst AgentBoreas (sentexHandle {claim}))"
    )
    vote_for = team["Atlas"].vote("for", claim)
    assert (
        team["Atlas"].store.sentex(vote_for).text == f"(votesFor AgentAtlas (sentexHandle {claim}))"
    )
    refusal = refused(lambda: team["Atlas"].vote("abstain", claim))
    assert refusal.kind == "koinii/no-such-stance"
    assert refusal.data == {"stance": "abstain", "known": ["for", "against"]}


def test_justify(team):
    claim = team["Atlas"].assert_(P)
    h = team["Boreas"].justify("MigratedInQ2", claim)
    assert team["Boreas"].store.sentex(h).text == (
        f"(justifies AgentBoreas MigratedInQ2 (sentexHandle {claim}))"
    )


def test_retracting_a_target_tears_down_its_replies_but_error_acts_survive(team):
    atlas, boreas, ciel = team["Atlas"], team["Boreas"], team["Ciel"]
    claim = atlas.assert_(P)
    replies = [
        boreas.endorse(claim),
        boreas.justify("MigratedInQ2", claim),
        ciel.dispute(claim),
        boreas.vote("for", claim),
        ciel.vote("against", claim),
    ]
    q = atlas.pose_query("WhichDb")
    answer = boreas.answer("PostgreSQL14", q)
    endorsement = ciel.endorse(answer)
    survivors = [boreas.not_understood(q), ciel.refuse(q)]
    store = atlas.store
    store.retract(claim)
    store.retract(q)
    assert [store.sentex(h) for h in [*replies, answer, endorsement]] == [None] * 7
    assert all(store.sentex(h) is not None for h in survivors)
    assert store.contradictions() == []


@EVERY_MEDIUM
def test_the_conversation_is_in_the_kb_not_in_the_agents(team, medium):
    q = team["Atlas"].pose_query("WhichDbProdClusterUses")
    late = join(medium("Dune"), "CxDeploy", "AgentDune")  # decoupled in time
    assert [s["handle"] for s in late.open_queries()] == [q]
    late.answer("PostgreSQL14", q)
    [answer] = team["Atlas"].answers_to(q)
    assert answer.provenance["creator"] == "AgentDune"
    assert team["Atlas"].query("(queries ?who ?what)", "CxDeploy") == [
        {"?who": Sym("AgentAtlas"), "?what": Sym("WhichDbProdClusterUses")}
    ]


def test_the_writer_order_is_documented():
    assert channel.WRITER_ORDER == "single-writer-total-order"
