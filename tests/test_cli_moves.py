"""A conversation from the shell: `koinii channels`, `join` and every move (`claim`, `ask`,
`answer`, `endorse`, `justify`, `dispute`, `vote`, `accept`, `close`), each a real
`koinii` process talking to a real daemon (port 0) with agents' and an operator's tokens.
The move's rules hold from the shell as from any client: an agent moves only as itself,
only the asker accepts."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import Daemon, forker


@pytest.fixture
def serving(tmp_path):
    from koinii.server.tokens import add_token

    table = str(tmp_path / "team.tokens")
    tokens = {
        who: add_token(table, who, role)
        for who, role in (
            ("AgentAtlas", "agent"),
            ("AgentBoreas", "agent"),
            ("Ops", "operator"),
        )
    }
    daemon = Daemon(str(tmp_path / "team.db"), ["--tokens", table], tokens).start()
    yield daemon
    daemon.kill()


def koinii(daemon: Daemon, who: str, *args: str, json_out: bool = True):
    """`koinii ARGS --agent WHO` as WHO's token would run it; its JSON reply (or the process)."""
    env = {
        **os.environ,
        "KOINII_URL": daemon.url,
        "KOINII_TOKEN": daemon.tokens[who],
        "KOINII_AGENT": who if who != "Ops" else "",
    }
    env.pop("KOINII_DB", None)
    done = forker().run([*args, *(["--json"] if json_out else [])], env=env, timeout=60)
    if not json_out:
        return done
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_whole_conversation_from_the_shell(serving):
    assert koinii(serving, "Ops", "channels") == []
    for agent in ("AgentAtlas", "AgentBoreas"):
        assert koinii(serving, agent, "join", "CxTeam")["channel"] == "CxTeam"
    assert koinii(serving, "Ops", "channels") == [
        {"name": "CxTeam", "members": ["AgentAtlas", "AgentBoreas"]}
    ]
    q = koinii(serving, "AgentAtlas", "ask", "(usesDatabase ProdCluster ?db)")["handle"]
    answered = koinii(serving, "AgentBoreas", "answer", str(q), '{"?db": "Postgres"}')
    assert answered["claim"] == "(usesDatabase ProdCluster Postgres)"
    assert (
        koinii(serving, "AgentAtlas", "endorse", str(answered["handle"]))["target"]
        == (answered["claim_handle"])
    )
    koinii(serving, "AgentAtlas", "justify", str(answered["handle"]), '"the deploy config"')
    koinii(serving, "AgentAtlas", "accept", str(answered["handle"]), "--reason", "config")
    claim = koinii(serving, "AgentAtlas", "claim", "(usesCache ProdCluster Redis)")["handle"]
    disputed = koinii(serving, "AgentBoreas", "dispute", str(claim))
    assert disputed["target"] == claim and disputed["rebuttal"]
    koinii(serving, "AgentBoreas", "vote", str(claim), "against")
    q2 = koinii(serving, "AgentBoreas", "ask", '"is the cache warm?"')["handle"]
    koinii(serving, "AgentBoreas", "close", str(q2), "--reason", "moot")

    with serving.client("Ops") as client:
        team = client.invoke("conversation.thread", handle=q, channel="CxTeam")
        assert team["state"] == "settled" and team["acceptance_reason"] == "config"
        (answer,) = team["answers"]
        assert [e["speaker"] for e in answer["claim"]["endorsements"]] == ["AgentAtlas"]
        assert [j["speaker"] for j in answer["claim"]["justifications"]] == ["AgentAtlas"]
        (dispute,) = client.invoke("conversation.disputes", channel="CxTeam")
        assert dispute["tally"]["against"] == 1
        closed = client.invoke("conversation.questions", channel="CxTeam", state="closed")
        assert [c["handle"] for c in closed] == [q2]

    # without --json: one readable line per move
    said = koinii(serving, "AgentAtlas", "claim", "(ready Release)", json_out=False)
    assert said.returncode == 0 and said.stdout.startswith("#") and "(ready Release)" in said.stdout
    listed = koinii(serving, "Ops", "channels", json_out=False)
    assert listed.stdout == "CxTeam: AgentAtlas, AgentBoreas\n"


def test_the_moves_rules_hold_from_the_shell(serving):
    for agent in ("AgentAtlas", "AgentBoreas"):
        koinii(serving, agent, "join", "CxTeam")
    q = koinii(serving, "AgentAtlas", "ask", "(usesDatabase ProdCluster ?db)")["handle"]
    a = koinii(serving, "AgentBoreas", "answer", str(q), "Postgres")["handle"]
    # an agent's token moves only as itself
    posing = koinii(
        serving, "AgentBoreas", "accept", str(a), "--agent", "AgentAtlas", json_out=False
    )
    assert posing.returncode == 1 and "koinii/speaker-mismatch" in posing.stderr
    # only the asker accepts
    foreign = koinii(serving, "AgentBoreas", "accept", str(a), json_out=False)
    assert foreign.returncode == 1 and "koinii/not-the-asker" in foreign.stderr
    # an operator's token may move for an agent, and it is the agent's move
    accepted = koinii(serving, "Ops", "accept", str(a), "--agent", "AgentAtlas")
    with serving.client("Ops") as client:
        assert client.sentex(accepted["handle"]).context == "CxAtlas"
    # a bad stance is a usage error, before any call
    bad = koinii(serving, "AgentBoreas", "vote", str(a), "maybe", json_out=False)
    assert bad.returncode == 2
