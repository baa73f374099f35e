"""Every line of the feed says who made it and how (issue 40): a rule's conclusion names
the rule and whose it is, an operator's write its recorded principal, and a dispute's
rebuttal defeated by a ruling is told as that dispute (by its move's handle) losing — in
process and over a real daemon with tokens, through the one narrator (`koinii tail`,
the web view, `wait_for_changes`), and in `koinii tail` itself."""

from __future__ import annotations

import os

import pytest

import koinii
from koinii import disputes
from koinii.channel import agent as channel
from koinii.channel.narrator import Narrator
from koinii.disputes import majority
from tests.conftest import forker


@pytest.fixture(params=["local", "wire"])
def team(request, tmp_path):
    """(store as the reader sees it, atlas, boreas, operator store, daemon or None)."""
    if request.param == "local":
        kb = koinii.open_kb(str(tmp_path / "team.db"))
        way = channel.local(kb)
        yield (
            kb,
            channel.join(way, "CxTeam", "AgentAtlas"),
            channel.join(way, "CxTeam", "AgentBoreas"),
            kb,
            None,
        )
        kb.close()
        return
    from koinii.server.tokens import add_token
    from tests.conftest import Daemon

    table = str(tmp_path / "team.tokens")
    roles = {"AgentAtlas": "agent", "AgentBoreas": "agent", "Ops": "operator"}
    tokens = {who: add_token(table, who, role) for who, role in roles.items()}
    daemon = Daemon(str(tmp_path / "team.db"), ["--tokens", table], tokens).start()
    try:
        agents = [
            channel.join(channel.wire(daemon.client(who, timeout=10)), "CxTeam", who)
            for who in ("AgentAtlas", "AgentBoreas")
        ]
        with daemon.client("Ops", timeout=10) as ops:
            yield ops, *agents, ops, daemon
    finally:
        daemon.kill()


def told(store, since: int) -> list:
    narrator = Narrator(store)
    return [t for e in store.changes(since=since)["entries"] for t in narrator.entry(e)]


def test_a_rules_conclusion_names_the_rule_and_whose_it_is(team):
    store, atlas, _, _, _ = team
    since = store.seq
    rule = atlas.claim("(implies (usesDatabase ?c ?d) (hasDatabase ?c))")
    claim = atlas.claim("(usesDatabase ProdCluster Postgres)")
    [derived] = [t for t in told(store, since) if t.sentence == "(hasDatabase ProdCluster)"]
    assert derived.kind == "derivation" and derived.speaker == "AgentAtlas"
    assert derived.text == (
        f"(hasDatabase ProdCluster): derived by rule #{rule}, AgentAtlas's, from #{claim}"
    )


def test_an_operators_write_reads_as_its_recorded_principal(team):
    store, _, _, ops, daemon = team
    if daemon is None:
        pytest.skip("in process there is no token: the write has no principal")
    since = store.seq
    ops.assert_("(ready Release)", "CxTeam")
    [line] = told(store, since)
    assert (line.speaker, line.text) == ("Ops", "Ops wrote (ready Release) in CxTeam")
    env = {**os.environ, "KOINII_URL": daemon.url, "KOINII_TOKEN": daemon.tokens["Ops"]}
    env.pop("KOINII_DB", None)
    tail = forker().run(["tail", "--since", str(since), "--no-follow"], env=env, timeout=60)
    assert "Ops wrote (ready Release) in CxTeam" in tail.stdout, tail.stderr


def test_a_defeated_rebuttal_is_told_as_its_dispute_losing(team):
    store, atlas, boreas, ops, _ = team
    claim = boreas.claim("(usesCache ProdCluster Redis)")
    dispute = atlas.move("dispute", target=claim)
    since = store.seq
    for agent in (atlas, boreas):
        agent.vote(claim, "for")
    key = disputes.dispute_id([claim, dispute["rebuttal"]])
    majority.resolve_by_majority(ops, key, claim, "CxTeam")  # (a KB or an operator's client)
    [defeat] = [t for t in told(store, since) if t.kind == "defeat"]
    assert defeat.handle == dispute["rebuttal"] and defeat.speaker == "AgentAtlas"
    assert defeat.text == (
        f"AgentAtlas's dispute #{dispute['handle']} lost: its rebuttal #{dispute['rebuttal']} "
        "(not (usesCache ProdCluster Redis)) is defeated, no longer believed"
    )


def test_an_answers_claim_has_its_answerer_as_author_in_search(team):
    store, atlas, boreas, _, _ = team
    q = atlas.ask("(usesDatabase ProdCluster ?db)")
    boreas.answer(q, "Postgres")
    hits = store.search("uses database postgres", "CxTeam")
    # the answer and its claim are one hit, the answer (docs/search.md)
    [answer] = [h for h in hits if "(usesDatabase ProdCluster Postgres)" in h.sentex.text]
    assert answer.author == "AgentBoreas"
