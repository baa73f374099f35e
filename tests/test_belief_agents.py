"""Agent belief: projection, convening, self-disregard (disputes.md §3; upstream-scenarios §5)."""

import pytest

from koinii import Sym
from koinii.channel import agent as channel
from koinii.channel import belief
from koinii.channel.belief import belief_context
from tests.conftest import refused

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

P = "(reliable ProdCluster)"
NOT_P = "(not (reliable ProdCluster))"


def own_claim(kb, agent, claim):
    return kb.assert_(claim, "Cx" + agent.removeprefix("Agent"), creator=agent)


def believes(kb, agent, claim):
    return kb.assert_(claim, belief_context(agent), creator=agent)


def test_the_belief_context_is_cx_agent_plus_the_id_and_maps_back():
    assert belief_context("AgentAtlas") == "CxAgentAgentAtlas"
    assert belief.agent_of_belief_context("CxAgentAgentAtlas") == "AgentAtlas"
    assert belief.agent_of_belief_context("CxDeploy") is None
    assert refused(lambda: belief_context("atlas")).kind == "naming"


def test_an_agent_believes_its_own_claims_only(kb):
    own_claim(kb, "AgentAtlas", P)
    assert not belief.would_believe(kb, "AgentAtlas", P)  # not linked yet
    assert belief.believe_own(kb, "AgentAtlas") == "CxAgentAgentAtlas"
    belief.believe_own(kb, "AgentBoreas")
    assert belief.would_believe(kb, "AgentAtlas", P)
    assert not belief.would_believe(kb, "AgentBoreas", P)
    assert kb.query(P, "CxUniverse") == []


def test_contradictory_agents_raise_no_contradiction(kb):
    for agent in ("AgentAtlas", "AgentBoreas"):
        belief.believe_own(kb, agent)
    own_claim(kb, "AgentAtlas", P)
    own_claim(kb, "AgentBoreas", NOT_P)
    assert belief.would_believe(kb, "AgentAtlas", P)
    assert not belief.would_believe(kb, "AgentAtlas", NOT_P)
    assert belief.would_believe(kb, "AgentBoreas", NOT_P)
    assert not belief.would_believe(kb, "AgentBoreas", P)
    assert kb.conflicts() == [] and kb.contradictions() == []


def test_projection_binds_the_variables(kb):
    belief.believe_own(kb, "AgentAtlas")
    own_claim(kb, "AgentAtlas", "(usesDatabase ProdCluster PostgreSQL14)")
    own_claim(kb, "AgentAtlas", "(usesDatabase ProdCluster RedisCache)")
    found = belief.project(kb, "AgentAtlas", "(usesDatabase ProdCluster ?db)")
    assert {b["?db"] for b in found} == {Sym("PostgreSQL14"), Sym("RedisCache")}


def test_an_agent_disregards_its_own_statement_reversibly(kb):
    medium = channel.local(kb)
    atlas = channel.join(medium, "CxDeploy", "AgentAtlas")
    belief.believe_own(kb, "AgentAtlas")
    p = atlas.assert_(P)
    assert kb.query(P, "CxDeploy") == [{}] and belief.would_believe(kb, "AgentAtlas", P)
    mask = belief.disregard(kb, "AgentAtlas", p)
    assert kb.query(P, "CxDeploy") == [] and not belief.would_believe(kb, "AgentAtlas", P)
    assert kb.sentex(p) is not None  # still stored
    belief.restore(kb, mask)
    assert kb.query(P, "CxDeploy") == [{}] and belief.would_believe(kb, "AgentAtlas", P)


def test_an_agent_cannot_disregard_another_agents_statement(kb):
    belief.believe_own(kb, "AgentAtlas")
    p = own_claim(kb, "AgentAtlas", P)
    refusal = refused(lambda: belief.disregard(kb, "AgentBoreas", p))
    assert refusal.kind == "koinii/not-own-statement"
    assert refusal.data == {"agent": "AgentBoreas", "creator": "AgentAtlas", "handle": p}
    assert belief.disregards(kb, "AgentBoreas") == []
    assert belief.would_believe(kb, "AgentAtlas", P)


def test_disregarding_or_restoring_what_is_not_there_is_refused(kb):
    p = own_claim(kb, "AgentAtlas", P)
    assert refused(lambda: belief.disregard(kb, "AgentAtlas", 999_999)).kind == (
        "koinii/no-such-handle"
    )
    refusal = refused(lambda: belief.restore(kb, p))  # a claim, not a mask
    assert refusal.kind == "koinii/not-a-disregard" and kb.sentex(p) is not None


def test_disregards_are_queryable_and_do_not_follow_their_target(kb):
    p = own_claim(kb, "AgentAtlas", P)
    mask = belief.disregard(kb, "AgentAtlas", p)
    assert [s.handle for s in belief.disregards(kb, "AgentAtlas")] == [mask]
    assert belief.disregards(kb, "AgentBoreas") == []
    kb.retract(p)
    assert kb.query(P, "CxAtlas") == []
    assert [s.handle for s in belief.disregards(kb, "AgentAtlas")] == [mask]  # an orphan


def test_convening_surfaces_a_disagreement_kept_apart_until_then(kb):
    believes(kb, "AgentAtlas", P)
    believes(kb, "AgentBoreas", NOT_P)
    assert kb.contradictions() == []
    assert belief.convene(kb, "CxArbiter", ["AgentAtlas", "AgentBoreas"]) == "CxArbiter"
    [disagreement] = belief.disagreements(kb, "CxArbiter")
    assert disagreement["between"] == ["AgentAtlas", "AgentBoreas"]
    assert len(disagreement["sides"]) == 2
    by_agent = {side["agent"]: side for side in disagreement["sides"]}
    assert by_agent["AgentAtlas"]["sentence"] == P
    assert kb.sentex(by_agent["AgentBoreas"]["handle"]).text == NOT_P


def test_convening_gathers_only_the_agents_named(kb):
    believes(kb, "AgentAtlas", P)
    believes(kb, "AgentBoreas", NOT_P)
    believes(kb, "AgentCiel", "(fast ProdCluster)")
    belief.convene(kb, "CxArbiter", ["AgentAtlas", "AgentBoreas"])
    assert belief.convened_agents(kb, "CxArbiter") == ["AgentAtlas", "AgentBoreas"]
    [disagreement] = belief.disagreements(kb, "CxArbiter")
    assert "AgentCiel" not in disagreement["between"]


def test_convening_works_on_what_agents_said_through_believe_own(kb):
    for agent in ("AgentAtlas", "AgentBoreas"):
        belief.believe_own(kb, agent)
    own_claim(kb, "AgentAtlas", P)
    own_claim(kb, "AgentBoreas", NOT_P)
    assert kb.contradictions() == []
    belief.convene(kb, "CxArbiter", ["AgentAtlas", "AgentBoreas"])
    [disagreement] = belief.disagreements(kb, "CxArbiter")
    assert disagreement["between"] == ["AgentAtlas", "AgentBoreas"]


def test_dismissing_an_agent_dissolves_the_disagreement(kb):
    believes(kb, "AgentAtlas", P)
    believes(kb, "AgentBoreas", NOT_P)
    belief.convene(kb, "CxArbiter", ["AgentAtlas", "AgentBoreas"])
    [edge] = kb.sentexes_matching(
        f"(genlCx CxArbiter {belief_context('AgentAtlas')})", "CxUniverse"
    )
    kb.retract(edge.handle)
    assert kb.contradictions() == [] and belief.disagreements(kb, "CxArbiter") == []
    assert belief.convened_agents(kb, "CxArbiter") == ["AgentBoreas"]


def test_belief_reads_run_the_same_through_a_daemon(client):
    belief.believe_own(client, "AgentAtlas")
    own_claim(client, "AgentAtlas", P)
    believes(client, "AgentBoreas", NOT_P)
    assert belief.would_believe(client, "AgentAtlas", P)
    belief.convene(client, "CxArbiter", ["AgentAtlas", "AgentBoreas"])
    [disagreement] = belief.disagreements(client, "CxArbiter")
    assert disagreement["between"] == ["AgentAtlas", "AgentBoreas"]
