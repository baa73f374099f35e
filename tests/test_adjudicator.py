"""Adjudication as a running service (koinii.client.adjudicator, `koinii adjudicate`): it settles
a 2-1 vote, holds on a tie, never rules twice — across kill -9 too — and the whole
conversation, played by three agent processes with agent tokens, reads as it stands."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from koinii import Refused
from koinii.channel import agent as channel
from koinii.channel.catchup import FileCursorStore
from koinii.client.adjudicator import Adjudicator, Policy
from koinii.disputes import adjudication
from koinii.operations import invoker
from tests import forks
from tests.agent_process import AgentProcess
from tests.conftest import forker, refused, wait_until

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

VERSION = "(postgresMajorVersion ProdCluster ?version)"
TEAM = ("AgentAtlas", "AgentBoreas", "AgentCyra")
PRINCIPALS = {**{a: "agent" for a in TEAM}, "Ops": "operator"}


def rulings(store) -> list[str]:
    """Every ruling sentex AgentMajority holds, believed or not."""
    return sorted(
        s.text
        for s in store.sentexes_matching("(postgresMajorVersion ?c ?v)", "CxEverything")
        + store.sentexes_matching("(not (postgresMajorVersion ?c ?v))", "CxEverything")
        if s.context == "CxMajority"
    )


def ruling_writes(store) -> int:
    """How many writes added something to CxMajority: each ruling is one."""
    log = store.changes(since=0, limit=10_000)["entries"]
    return sum(any(c["context"] == "CxMajority" for c in e["added"]) for e in log)


@pytest.fixture
def local_team(kb):
    medium = channel.local(kb)
    return {a[5:]: channel.join(medium, "CxTeam", a) for a in TEAM}


def disputed_answer(team) -> tuple[int, int]:
    """Atlas asks; Boreas answers 16; Cyra disputes the answer. (question, answer)"""
    q = team["Atlas"].pose_query(VERSION)
    a = team["Boreas"].answer("16", q)
    team["Cyra"].dispute(a)
    return q, a


# --- in process -----------------------------------------------------------------------------


def test_once_every_member_has_voted_a_2_1_count_rules(kb, local_team):
    q, a = disputed_answer(local_team)
    told: list[str] = []
    service = Adjudicator(kb, "CxTeam", say=told.append)
    local_team["Atlas"].vote("for", a)
    local_team["Boreas"].vote("for", a)
    assert service.settle() == []  # Cyra has not voted: not due
    assert any("opened" in line for line in told)
    local_team["Cyra"].vote("against", a)
    [outcome] = service.settle()
    assert (outcome["for"], outcome["against"], outcome["outcome"]) == (2, 1, "for")
    assert rulings(kb) == ["(postgresMajorVersion ProdCluster 16)"]
    assert local_team["Atlas"].thread(q)["state"] == "settled"
    assert service.settle() == [] and ruling_writes(kb) == 1  # never twice
    assert told[-1].endswith("upholds (postgresMajorVersion ProdCluster 16) (2-1)")


def test_a_tie_holds_and_a_changed_vote_rules(kb, local_team):
    _q, a = disputed_answer(local_team)
    service = Adjudicator(kb, "CxTeam", Policy(quorum=2))
    local_team["Atlas"].vote("for", a)
    local_team["Cyra"].vote("against", a)
    assert service.settle() == [] and rulings(kb) == []  # 1-1: a tie rules nothing
    local_team["Atlas"].vote("against", a)  # Atlas changes its mind: the ballot is replaced
    [outcome] = service.settle()
    assert outcome["outcome"] == "against"
    assert rulings(kb) == ["(not (postgresMajorVersion ProdCluster 16))"]


def test_a_deadline_counts_whatever_ballots_there_are(kb, local_team):
    _q, a = disputed_answer(local_team)
    local_team["Atlas"].vote("for", a)
    now = [adjudication.now_ms()]
    service = Adjudicator(kb, "CxTeam", Policy(deadline_s=60), clock=lambda: now[0])
    assert service.settle() == []
    now[0] += 61_000
    [outcome] = service.settle()
    assert (outcome["for"], outcome["against"]) == (1, 0)


def test_a_bad_policy_is_refused():
    for options in ({"quorum": 0}, {"quorum": "three"}, {"deadline_s": -1}):
        assert refused(lambda o=options: Policy(**o)).kind == "bad-option"


# --- the service, over the wire --------------------------------------------------------------


def adjudicate(daemon, cursor):
    """`koinii adjudicate` in a process of its own (forked from the zygote, so it is up
    and handles SIGTERM within moments of being started, on a busy machine too)."""
    return forker().popen(
        [
            "adjudicate",
            "--channel",
            "CxTeam",
            "--url",
            daemon.url,
            "--token",
            daemon.tokens["Ops"],
            "--cursor",
            str(cursor),
        ],
        stdout=forks.PIPE,
        stderr=forks.PIPE,
        text=True,
    )


@pytest.mark.backends("sqlite", "postgres")
def test_the_service_rules_resumes_after_kill_9_and_never_rules_twice(start_daemon, tmp_path):
    daemon = start_daemon(principals=PRINCIPALS)
    team = {a[5:]: channel.join(channel.wire(daemon.client(a)), "CxTeam", a) for a in TEAM}
    ops = daemon.client("Ops")
    cursor = tmp_path / "adjudicator.cursor"
    service = adjudicate(daemon, cursor)
    try:
        _q, a = disputed_answer(team)
        for name, stance in (("Atlas", "for"), ("Boreas", "for"), ("Cyra", "against")):
            team[name].vote(stance, a)
        assert wait_until(lambda: rulings(ops), timeout=20)
        # the pass that ruled writes its cursor next: kill -9 once it has
        assert wait_until(lambda: FileCursorStore(cursor).read_position() is not None, 20)
        service.send_signal(signal.SIGKILL)
        service.wait(10)
        writes = ruling_writes(ops)
        seq = ops.seq
        service = adjudicate(daemon, cursor)  # resumes from its cursor
        team["Atlas"].assert_("(anotherWrite WakesTheService)")
        assert wait_until(lambda: ops.seq > seq and service.poll() is None, timeout=10)
        wait_until(lambda: False, timeout=2)  # give it time to (wrongly) rule again
        assert ruling_writes(ops) == writes == 1
        assert rulings(ops) == ["(postgresMajorVersion ProdCluster 16)"]
    finally:
        service.send_signal(signal.SIGTERM)
        out, _err = service.communicate(timeout=15)
    assert service.returncode == 0
    assert "AgentMajority upholds" not in out  # the restarted service had nothing to tell


def test_the_service_needs_a_token_that_may_rule(start_daemon, tmp_path):
    daemon = start_daemon(principals={**PRINCIPALS, "Reader": "reader"})
    team = {a[5:]: channel.join(channel.wire(daemon.client(a)), "CxTeam", a) for a in TEAM}
    disputed_answer(team)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "koinii",
            "adjudicate",
            "--channel",
            "CxTeam",
            "--once",
            "--url",
            daemon.url,
            "--token",
            daemon.tokens["Reader"],
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1 and "forbidden" in result.stderr


# --- the whole conversation, three agent processes --------------------------------------------


def test_three_agent_processes_hold_the_conversation_and_the_thread_shows_what_stands(
    start_daemon, tmp_path
):
    daemon = start_daemon(principals=PRINCIPALS)
    agents = {a[5:]: AgentProcess(daemon.url, a, daemon.tokens[a], "CxTeam") for a in TEAM}
    atlas, boreas, cyra = agents["Atlas"], agents["Boreas"], agents["Cyra"]
    ops = daemon.client("Ops")
    service = adjudicate(daemon, tmp_path / "cursor")

    def stands(q):
        thread = atlas.do("thread", handle=q)
        return thread["state"], {
            a["speaker"]: (a["content"], a["claim"]["believed"]) for a in thread["answers"]
        }

    try:
        q = atlas.do("ask", question=VERSION)
        assert stands(q) == ("open", {})
        b = boreas.do("answer", question=q, content={"?version": "16"})
        c = cyra.do("answer", question=q, content="15")
        assert stands(q) == (
            "contested",
            {
                "AgentBoreas": ("(postgresMajorVersion ProdCluster 16)", True),
                "AgentCyra": ("(postgresMajorVersion ProdCluster 15)", True),
            },
        )
        cyra.do("dispute", target=b)
        with pytest.raises(Refused) as refusal:
            cyra.do("withdraw", handle=b)  # not hers
        assert refusal.value.kind == "koinii/foreign-sentex"
        atlas.do("vote", stance="against", target=b)
        atlas.do("vote", stance="for", target=b)  # a changed vote replaces the ballot
        boreas.do("vote", stance="for", target=b)
        cyra.do("vote", stance="against", target=b)
        values, dispute = atlas.do("disputes")  # 16 against 15 (values), and Cyra's dispute
        assert values["class"] == "values" and dispute["raised_by"]
        assert dispute["tally"] == {"for": 2, "against": 1}
        assert wait_until(lambda: atlas.do("disputes")[1]["ruling"], timeout=20)
        state, answers = stands(q)
        assert state == "settled" and answers["AgentBoreas"][1] is True
        assert atlas.do("thread", handle=q)["ruling"]["arbiter"] == "AgentMajority"
        atlas.do("accept", answer=b)
        assert atlas.do("thread", handle=q)["accepted"] == b
        cyra.do("withdraw", handle=c)
        assert stands(q) == (
            "settled",
            {"AgentBoreas": ("(postgresMajorVersion ProdCluster 16)", True)},
        )
        assert [x["handle"] for x in atlas.do("open_queries")] == []
        assert ops.query(VERSION, "CxTeam") == [{"?version": 16}]
    finally:
        service.send_signal(signal.SIGTERM)
        service.communicate(timeout=15)
        for agent in agents.values():
            agent.stop()


def test_the_client_refuses_like_the_engine_for_the_adjudicator_reads(start_daemon):
    daemon = start_daemon(principals=PRINCIPALS)
    ops = daemon.client("Ops")
    with pytest.raises(Refused) as refusal:
        invoker(ops)("conversation.disputes", channel="NotAContext")
    assert refusal.value.kind == "naming"
