"""`koinii mcp`: the official SDK's own client, over stdio, against real `koinii mcp`
subprocesses backed by a real daemon with agent tokens — the tools an LLM team works
with, the waits that replace polling, the refusals that teach, and the agent's session."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from koinii import Refused
from koinii.errors import DEFAULT_FIX
from koinii.kb import semantic
from koinii.mcp import REFUSAL_FIXES
from tests.conftest import forker

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

TOOLS = {
    "claim",
    "ask",
    "answer",
    "endorse",
    "justify",
    "dispute",
    "vote",
    "withdraw",
    "accept",
    "close",
    "thread",
    "questions",
    "disputes",
    "channels",
    "why_not",
    "query",
    "search",
    "vocabulary",
    "recent_changes",
    "wait_for_changes",
    "wrap_session",
    "permeate",
}
SESSION_TOOLS = {"read_session", "get_session", "list_sessions"}
VERSION = "(postgresMajorVersion ProdCluster ?version)"
READY = "(readyToShip BillingRelease)"
PRINCIPALS = {
    "AgentLead": "agent",
    "AgentBoreas": "agent",
    "AgentCyra": "agent",
    "Ops": "operator",
}


class Tools:
    """One agent's MCP session: `await tools.claim(sentence=…)` calls a tool and returns
    its JSON object (failing the test on an error); `await tools.refused(…)` expects one."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, name: str, **arguments):
        reply = await self.session.call_tool(name, arguments)
        texts = [c.text for c in reply.content]
        assert len(texts) == 1, texts  # one JSON document, never a stream of them
        return reply, texts[0]

    def __getattr__(self, name: str):
        async def tool(**arguments):
            reply, text = await self.call(name, **arguments)
            assert not reply.isError, f"{name}{arguments}: {text}"
            assert reply.structuredContent == json.loads(text)
            return reply.structuredContent

        return tool

    async def refused(self, name: str, **arguments) -> str:
        reply, text = await self.call(name, **arguments)
        assert reply.isError, f"{name}{arguments} was not refused: {text}"
        return text


def server_environment() -> dict[str, str]:
    """The SDK starts a server with a few safe variables only; PYTHONPATH is kept, so the
    server runs the code under test (a worktree's), not whichever copy is installed."""
    from mcp.client.stdio import get_default_environment

    kept = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    return {**get_default_environment(), **kept}


def koinii_mcp(*args: str, cwd=None) -> StdioServerParameters:
    """`koinii mcp <args>` as the SDK's client starts it: forked from the zygote by its
    launcher (tests/forks.py), with the SDK's environment."""
    command, arguments, extra = forker().command(["mcp", *args])
    return StdioServerParameters(
        cwd=cwd, env={**server_environment(), **extra}, command=command, args=arguments
    )


@contextlib.asynccontextmanager
async def mcp_agent(daemon, agent: str, *extra: str, cwd=None) -> AsyncIterator[Tools]:
    params = koinii_mcp(
        "--agent",
        agent,
        "--channel",
        "CxTeam",
        "--url",
        daemon.url,
        "--token",
        daemon.tokens[agent],
        *extra,
        cwd=cwd,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield Tools(session)


def play(script, timeout: float = 120):
    return asyncio.run(asyncio.wait_for(script(), timeout))


@pytest.fixture
def daemon(start_daemon):
    return start_daemon(principals=PRINCIPALS)


# --- the surface ----------------------------------------------------------------------------


def test_the_tools_are_written_for_a_model(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            return (await lead.session.list_tools()).tools

    tools = play(script)
    by_name = {t.name: t for t in tools}
    assert set(by_name) >= TOOLS and not SESSION_TOOLS & set(by_name)
    for tool in tools:
        text = tool.description
        assert "  " not in text, tool.name  # dedented: no runs of spaces
        assert f"{tool.name}(" in text, tool.name  # one example call
        assert "Returns" in text or "returns" in text, tool.name
        assert tool.outputSchema is not None, tool.name  # structured content
    assert by_name["vote"].inputSchema["properties"]["stance"]["enum"] == ["for", "against"]
    about = by_name["wait_for_changes"].inputSchema["properties"]["about"]
    assert about["enum"] == ["mine", "channel", "questions"]
    assert "parent_session_id" not in by_name["wrap_session"].inputSchema.get("required", [])


def test_the_instructions_explain_the_conversation_and_the_session_tools(daemon):
    async def instructions(*extra):
        params = koinii_mcp(
            "--agent",
            "AgentLead",
            "--channel",
            "CxTeam",
            "--url",
            daemon.url,
            "--token",
            daemon.tokens["AgentLead"],
            *extra,
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            return (await s.initialize()).instructions

    plain = play(lambda: instructions())
    for word in (
        "ask",
        "answer",
        "claim",
        "dispute",
        "vote",
        "wait_for_changes",
        "handle",
        "yes/no",
        "AgentLead",
    ):
        assert word in plain, word
    assert "read_session" not in plain
    assert "read_session" in play(lambda: instructions("--introspection"))


def test_every_read_is_one_object_and_an_empty_one_says_so(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            return (
                await lead.questions(),
                await lead.disputes(),
                await lead.query(goal="(usesDatabase ?c ?db)"),
            )

    questions, disputes, query = play(script)
    assert questions["count"] == 0 and "no unsettled questions" in questions["note"]
    assert disputes["count"] == 0 and "no" in disputes["note"]
    assert query == {"solutions": [], "count": 0, "note": query["note"]} and query["note"]


def test_an_agent_sees_the_channels_and_learns_what_defeats_a_claim(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead, mcp_agent(daemon, "AgentCyra") as cyra:
            claim = (await lead.claim(sentence="(usesDatabase Billing PostgreSQL16)"))["handle"]
            believed = await cyra.why_not(handle=claim)
            bad = await cyra.refused("why_not", handle=claim, context="cx bad")
            with daemon.client("Ops") as ops:
                ruling = ops.assert_(
                    "(not (usesDatabase Billing PostgreSQL16))", "CxTeam", strength="monotonic"
                )
            return (
                claim,
                ruling,
                believed,
                await cyra.why_not(handle=claim, context="CxTeam"),
                await cyra.why_not(handle=999_999),
                await cyra.channels(),
                bad,
            )

    claim, ruling, believed, defeated, unknown, channels, bad = play(script)
    assert believed == {
        "handle": claim,
        "context": None,
        "believed": True,
        "reason": None,
        "defeated_by": [],
    }
    assert (defeated["believed"], defeated["reason"]) == (False, "defeated")
    assert defeated["context"] == "CxTeam"
    assert defeated["defeated_by"] == [
        {
            "handle": ruling,
            "sentence": "(not (usesDatabase Billing PostgreSQL16))",
            "context": "CxTeam",
            "strength": "monotonic",
            "author": "Ops",
        }
    ]
    assert unknown["reason"] == "not-stored"
    assert channels["count"] == 1
    [team] = channels["channels"]
    assert team["name"] == "CxTeam" and {"AgentLead", "AgentCyra"} <= set(team["members"])
    assert bad.startswith("naming:") and "Fix:" in bad


def test_questions_come_in_windows_and_say_where_the_older_ones_start(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            asked = [
                (await lead.ask(question=f"(usesDatabase Svc{i} ?db)"))["handle"] for i in range(5)
            ]
            first = await lead.questions(limit=2)
            second = await lead.questions(limit=2, before=first["older"])
            third = await lead.questions(limit=2, before=second["older"])
            return asked, first, second, third, await lead.questions()

    asked, first, second, third, everything = play(script)
    assert [q["handle"] for q in first["questions"]] == asked[3:]
    assert [q["handle"] for q in second["questions"]] == asked[1:3]
    assert [q["handle"] for q in third["questions"]] == asked[:1] and "older" not in third
    assert [q["handle"] for q in everything["questions"]] == asked and "older" not in everything


def test_disputes_come_in_windows_and_say_where_the_older_ones_start(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead, mcp_agent(daemon, "AgentCyra") as cyra:
            claims = [
                (await lead.claim(sentence=f"(usesDatabase Svc{i} PostgreSQL16)"))["handle"]
                for i in range(5)
            ]
            for claim in claims:
                await cyra.dispute(target=claim)
            first = await lead.disputes(limit=2)
            second = await lead.disputes(limit=2, before=first["older"])
            third = await lead.disputes(limit=2, before=second["older"])
            return claims, first, second, third, await lead.disputes()

    claims, first, second, third, everything = play(script)

    def targets(reply):
        return [d["target"]["handle"] for d in reply["disputes"]]

    assert targets(first) == claims[3:] and targets(second) == claims[1:3]
    assert targets(third) == claims[:1] and "older" not in third
    assert targets(everything) == claims and "older" not in everything


def test_a_ground_query_that_holds_says_true(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            await lead.claim(sentence="(usesDatabase ProdCluster PostgreSQL16)")
            return await lead.query(goal="(usesDatabase ProdCluster PostgreSQL16)")

    found = play(script)
    assert found["solutions"] == [{}] and found["note"].startswith("true")


def test_a_query_with_many_solutions_shows_the_first_and_says_there_are_more(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            for i in range(5):
                await lead.claim(sentence=f"(usesDatabase Svc{i} PostgreSQL16)")
            goal = "(usesDatabase ?service ?db)"
            return await lead.query(goal=goal, limit=2), await lead.query(goal=goal)

    few, every = play(script)
    assert few["count"] == 2 and few["more"] is True and "bind more" in few["note"]
    assert {s["?service"] for s in few["solutions"]} < {f"Svc{i}" for i in range(5)}
    assert every["count"] == 5 and "more" not in every and "note" not in every


def test_an_agent_finds_what_the_team_said_by_its_words_and_the_vocabulary_in_use(daemon):
    from koinii.channel import agent as channel

    boreas = channel.join(channel.wire(daemon.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    claim = boreas.assert_("(postgresMajorVersion ProdCluster 16)")
    rival = channel.join(channel.wire(daemon.client("AgentCyra")), "CxRivals", "AgentCyra")
    rival.assert_("(postgresMajorVersion RivalCluster 14)")

    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            return (
                await lead.search(text="which postgres version does prod run"),
                await lead.search(text="kubernetes"),
                await lead.vocabulary(),
            )

    found, nothing, vocabulary = play(script)
    assert found["count"] == 1
    [hit] = found["hits"]
    assert hit == {
        "handle": claim,
        "sentence": "(postgresMajorVersion ProdCluster 16)",
        "context": "CxBoreas",
        "author": "AgentBoreas",
        "snippet": hit["snippet"],
        "matched": "words+meaning" if semantic.installed() else "words",
    }
    assert "[postgres]" in hit["snippet"] and "[prod]" in hit["snippet"]
    assert nothing["count"] == 0 and "vocabulary()" in nothing["note"]
    predicates = {p["predicate"]: p for p in vocabulary["predicates"]}
    assert predicates["postgresMajorVersion"]["count"] == 1  # not the rival channel's
    assert vocabulary["count"] == len(vocabulary["predicates"])


def test_a_search_finds_an_answer_and_its_claim_as_one_hit_with_the_answerers_name(daemon):
    """Issue 38: hits on an answer's claim showed `author: null` over MCP, and the answer
    and its claim were two hits."""
    from koinii.channel import agent as channel

    boreas = channel.join(channel.wire(daemon.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    atlas = channel.join(channel.wire(daemon.client("AgentCyra")), "CxTeam", "AgentCyra")
    question = boreas.ask("(rollbackSafeFor InvoiceRelease ?answer)")
    answer = atlas.answer(question, {"?answer": "RedeployPrevious"})

    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            return await lead.search(text="redeploy previous", limit=10)

    found = play(script)
    assert [(h["handle"], h["author"]) for h in found["hits"]] == [(answer, "AgentCyra")]


def test_the_vocabulary_and_the_sessions_come_in_windows_and_say_there_are_more(daemon):
    from koinii.sessions import SessionStore

    store = SessionStore(daemon.client("AgentLead"))
    started = [store.start_session(title=f"Release {i}") for i in range(3)]

    async def script():
        async with mcp_agent(daemon, "AgentLead", "--introspection") as lead:
            for i in range(4):
                await lead.claim(sentence=f"(owner{i} BillingRelease AgentLead)")
            return (
                await lead.vocabulary(limit=3),
                await lead.vocabulary(),
                await lead.list_sessions(limit=2),
                await lead.list_sessions(),
            )

    few, every, recent, sessions = play(script)
    assert few["count"] == 3 and few["more"] == every["count"] - 3 and "more" not in every
    said = {p["predicate"] for p in every["predicates"]}
    assert said == {f"owner{i}" for i in range(4)}  # not the joins' genlCx and agentContext
    assert few["predicates"] == every["predicates"][:3]
    assert [s["id"] for s in recent["sessions"]] == started[:0:-1] and recent["more"] is True
    assert [s["id"] for s in sessions["sessions"]] == started[::-1] and "more" not in sessions


@pytest.mark.skipif(not semantic.installed(), reason="koinii[semantic] is not installed")
def test_an_agent_finds_what_was_said_in_other_words_where_the_daemon_ranks_by_meaning(daemon):
    from koinii.channel import agent as channel

    boreas = channel.join(channel.wire(daemon.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    claim = boreas.assert_("(authMethod PublicApi OAuth2)")

    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            return await lead.search(text="how do clients authenticate")

    [hit] = play(script)["hits"]
    assert (hit["handle"], hit["matched"], hit["author"]) == (claim, "meaning", "AgentBoreas")


# --- a release decision, played by three LLM-shaped agents ---------------------------------


def adjudicator(daemon) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "koinii",
            "adjudicate",
            "--channel",
            "CxTeam",
            "--quorum",
            "3",
            "--url",
            daemon.url,
            "--token",
            daemon.tokens["Ops"],
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def until(tools: Tools, found, about: str, tries: int = 20):
    """wait_for_changes until `found(changes)` is true: the agents never sleep."""
    for _ in range(tries):
        waited = await tools.wait_for_changes(about=about, timeout_s=10)
        if found(waited["changes"]):
            return waited["changes"]
    raise AssertionError(f"nothing about {about} arrived")


@pytest.mark.backends("sqlite", "postgres")
def test_a_team_makes_a_release_decision_through_mcp(daemon):
    from koinii.wraps import Coordinators

    Coordinators(daemon.client("AgentLead")).register(
        "AgentLead", project_id="billing", session_id="s-lead"
    )
    service = adjudicator(daemon)

    async def script():
        async with (
            mcp_agent(daemon, "AgentLead") as lead,
            mcp_agent(daemon, "AgentBoreas") as boreas,
            mcp_agent(daemon, "AgentCyra") as cyra,
        ):
            for worker in (boreas, cyra):  # each starts following the channel now
                await worker.wait_for_changes(timeout_s=0)
            await lead.wait_for_changes(timeout_s=0)
            version = (await lead.ask(question=VERSION))["handle"]
            ready = (await lead.ask(question=READY))["handle"]

            # the workers hear the questions and answer them — differently
            heard = await until(boreas, lambda c: len(c) >= 2, "questions")
            assert {c["handle"] for c in heard} == {version, ready}
            b = await boreas.answer(question=version, bindings={"?version": "16"})
            assert b["claim"] == "(postgresMajorVersion ProdCluster 16)"
            await boreas.answer(question=ready, content="true")
            await until(cyra, lambda c: len(c) >= 2, "questions")
            c = await cyra.answer(question=version, content="15")
            await cyra.answer(question=ready, content="(not (readyToShip BillingRelease))")

            told = await until(lead, lambda c: len(c) >= 4, "mine")
            assert any("answered your question" in t["text"] for t in told)
            assert (await lead.thread(handle=version))["state"] == "contested"
            newest = await lead.thread(handle=version, limit=1)  # a window of the answers
            assert [a["handle"] for a in newest["answers"]] == [c["handle"]]
            assert newest["older"] == c["handle"] and newest["answer_count"] == 2
            older = await lead.thread(handle=version, limit=1, before=newest["older"])
            assert [a["handle"] for a in older["answers"]] == [b["handle"]]
            none = await lead.thread(handle=version, before=version)
            assert none["answers"] == [] and none["note"] == (
                f"no answers before #{version}: leave before out for the newest, or pass "
                "the `older` a thread gave"
            )

            # a dispute of an answer, and the mistakes a model makes, each taught a fix
            await cyra.dispute(target=b["handle"])
            mistakes = {
                "not-ground": await cyra.refused("claim", sentence="(readyToShip ?what)"),
                "koinii/speaker-mismatch": await boreas.refused(
                    "claim", sentence=f"(votesFor AgentCyra (sentexHandle {b['handle']}))"
                ),
                "stance": await boreas.refused("vote", target=b["handle"], stance="maybe"),
                "bad-wrap": await lead.refused(
                    "wrap_session", session_id="s-lead", parent_session_id="s-lead"
                ),
            }
            for kind, text in mistakes.items():
                if kind == "stance":
                    assert "'for'" in text and "'against'" in text  # the accepted values
                else:
                    assert text.startswith(f"{kind}: ") and f"Fix: {REFUSAL_FIXES[kind]}" in text

            # votes: Cyra first votes for, then changes her mind
            await lead.vote(target=b["handle"], stance="for")
            await boreas.vote(target=b["handle"], stance="for")
            first = await cyra.vote(target=b["handle"], stance="for")
            changed = await cyra.vote(target=b["handle"], stance="against")
            assert changed["handle"] != first["handle"]

            # the adjudicator rules 2-1; the lead hears it on the channel
            await until(lead, lambda c: any(t["kind"] == "ruling" for t in c), "channel")
            found = (await lead.disputes())["disputes"]
            # Cyra's dispute, the clash of the yes/no answers, and 16 against 15 (values)
            assert len(found) == 3 and [d["class"] for d in found].count("values") == 1
            [dispute] = [d for d in found if d["raised_by"]]
            assert dispute["target"]["sentence"] == b["claim"]
            assert dispute["tally"] == {"for": 2, "against": 1}
            assert dispute["ruling"]["arbiter"] == "AgentMajority"
            assert (await lead.thread(handle=version))["state"] == "settled"

            await lead.accept(answer=b["handle"])
            ready_answers = (await lead.thread(handle=ready))["answers"]
            yes = next(a for a in ready_answers if a["speaker"] == "AgentBoreas")
            await lead.accept(answer=yes["handle"])
            await cyra.withdraw(handle=c["handle"])
            versions = (await lead.thread(handle=version))["answers"]
            assert [a["speaker"] for a in versions] == ["AgentBoreas"]
            assert (await lead.questions())["count"] == 0

            # the wraps: the workers file theirs, the lead permeates and wraps its own
            for worker, note in ((boreas, "Prod runs PostgreSQL 16"), (cyra, "I said 15")):
                await worker.wrap_session(
                    session_id=f"s-{note[:4]}", parent_session_id="s-lead", notes=[note]
                )
            permeated = await lead.permeate(session_id="s-lead")
            assert permeated["processed"] == 2
            own = await lead.wrap_session(session_id="s-lead", notes=["Shipped on PG16"])
            assert own["parent_session_id"] is None and own["depth"] == 0

    try:
        play(script, timeout=180)
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(15)
    ops = daemon.client("Ops")
    assert ops.query(VERSION, "CxTeam") == [{"?version": 16}]


# --- the project ------------------------------------------------------------------------------


def test_a_wrap_is_filed_under_the_servers_project_unless_it_names_one(daemon, tmp_path):
    service = tmp_path / "shop" / "services" / "checkout"
    service.mkdir(parents=True)
    (tmp_path / "shop" / ".git").mkdir()

    async def script():
        async with mcp_agent(daemon, "AgentBoreas", cwd=service) as boreas:
            derived = await boreas.wrap_session(session_id="s-derived", notes=["a"])
            named = await boreas.wrap_session(
                session_id="s-named", notes=["b"], project_id="hive:web"
            )
        async with mcp_agent(daemon, "AgentCyra", "--project", "hive:api", cwd=service) as cyra:
            given = await cyra.wrap_session(session_id="s-given", notes=["c"])
        return derived, named, given

    derived, named, given = play(script)
    assert derived["project_id"] == "shop:services:checkout"
    assert (named["project_id"], given["project_id"]) == ("hive:web", "hive:api")


# --- the cursor --------------------------------------------------------------------------------


def test_following_the_cursor_misses_nothing_and_repeats_nothing(daemon):
    writer = daemon.client("AgentBoreas")
    from koinii.channel import agent as channel

    boreas = channel.join(channel.wire(writer), "CxTeam", "AgentBoreas")

    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            start = (await lead.recent_changes(since=0, limit=100))["cursor"]
            while True:  # catch up with the joins first
                page = await lead.recent_changes(since=start, limit=100)
                if not page["count"]:
                    break
                start = page["cursor"]
            for i in range(250):
                boreas.assert_(f"(fact Thing{i})")
            seen_recent, cursor = [], start
            while True:
                page = await lead.recent_changes(since=cursor, limit=100)
                if not page["count"]:
                    break
                seen_recent += [c["handle"] for c in page["changes"]]
                cursor = page["cursor"]
            seen_waited, cursor = [], start
            while True:
                page = await lead.wait_for_changes(since=cursor, timeout_s=0.2, about="channel")
                if not page["count"]:
                    break
                seen_waited += [c["handle"] for c in page["changes"]]
                cursor = page["cursor"]
            return seen_recent, seen_waited

    seen_recent, seen_waited = play(script)
    written = [s.handle for s in writer.sentexes_matching("(fact ?x)", "CxBoreas")]
    for seen in (seen_recent, seen_waited):
        assert len(seen) == len(set(seen)) == 250  # 0 repeated
        assert sorted(seen) == sorted(written)  # 0 missed


def test_replies_torn_down_with_a_withdrawn_move_are_told_so_and_their_speakers_hear_it(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentBoreas") as b, mcp_agent(daemon, "AgentCyra") as c:
            claim = (await b.claim(sentence="(usesCache ProdCluster Redis)"))["handle"]
            await c.wait_for_changes(timeout_s=0)  # Cyra follows from here
            ballot = (await c.vote(target=claim, stance="against"))["handle"]
            await b.withdraw(handle=claim)
            heard = await c.wait_for_changes(timeout_s=10, about="mine")
            return claim, ballot, heard

    claim, ballot, heard = play(script)
    [told] = [t for t in heard["changes"] if t["handle"] == ballot]
    assert told["text"] == (
        f"AgentCyra's ballot #{ballot} went with #{claim}, which AgentBoreas withdrew: "
        f"(votesAgainst AgentCyra (sentexHandle {claim}))"
    )
    assert told["reason"] == "torn-down"  # (Cyra withdrew nothing: she is told it went)


def test_permeating_a_session_makes_it_yours_and_no_other_agent_takes_its_wraps(daemon):
    async def script():
        async with (
            mcp_agent(daemon, "AgentLead") as lead,
            mcp_agent(daemon, "AgentBoreas") as boreas,
            mcp_agent(daemon, "AgentCyra") as cyra,
        ):
            first = await lead.permeate(session_id="s-lead")  # nothing yet: it is the lead's
            await boreas.wrap_session(
                session_id="s-boreas", parent_session_id="s-lead", notes=["Prod runs PG 16"]
            )
            taken = await cyra.permeate(session_id="s-lead")
            bare = await cyra.refused("permeate")
            moved = await lead.refused("permeate", session_id="s-other")  # the hold stays
            also = await cyra.permeate(session_id="s-lead")
            mine = await lead.permeate()  # (the session it holds)
            return first, taken, bare, moved, also, mine

    first, taken, bare, moved, also, mine = play(script)
    assert first["note"] == "no unprocessed wraps"
    assert taken["processed"] == 0 and len(taken["skipped"]) == 1
    assert (
        taken["note"]
        == "session s-lead belongs to coordinator AgentLead: its wraps are left for it"
    )
    assert bare.startswith("bad-option: permeate needs your coordinator session")
    assert moved.startswith("koinii/not-your-session: you coordinate session 's-lead'")
    assert also["processed"] == 0
    assert mine["processed"] == 1
    [entry] = mine["entries"]
    assert entry["sentence"] == '(memoryNote AgentBoreas "Prod runs PG 16")'


def test_arguments_that_do_not_fit_a_tool_are_refused_like_any_other_call(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            replies = {}
            for name, arguments in (
                ("endorse", {"target": "abc"}),
                ("dispute", {"target": True}),  # (not #1, the first sentex)
                ("vote", {"target": 3, "stance": "yes"}),
                ("answer", {"question": 3, "bindings": {"?version": 16}}),
                ("claim", {}),
                ("wait_for_changes", {"timeout_s": "nan"}),
            ):
                replies[name] = await lead.call(name, **arguments)
            return replies

    replies = play(script)
    for name, (reply, text) in replies.items():
        assert reply.isError, name
        error = reply.structuredContent["error"]
        assert text == error["message"] and text.endswith(f"Fix: {error['fix']}"), text
        assert "pydantic" not in text and "Error executing tool" not in text, text
    kinds = {name: reply.structuredContent["error"]["kind"] for name, (reply, _) in replies.items()}
    assert kinds == {
        "endorse": "bad-handle",
        "dispute": "bad-handle",
        "vote": "bad-option",
        "answer": "bad-option",
        "claim": "bad-option",
        "wait_for_changes": "bad-option",
    }
    assert replies["vote"][1].startswith("bad-option: vote: stance: should be 'for' or 'against'")
    assert replies["endorse"][1].startswith("bad-handle: endorse: target: should be a valid int")
    assert replies["claim"][1].startswith("bad-option: claim: sentence: Field required")
    assert replies["dispute"][1].startswith(
        "bad-handle: dispute: target: a handle is the integer a move returned, not true. Fix"
    )


def test_a_wait_for_changes_does_not_hold_the_agents_other_calls(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead, mcp_agent(daemon, "AgentBoreas") as b:
            await lead.wait_for_changes(timeout_s=0)
            waiting = asyncio.create_task(lead.wait_for_changes(timeout_s=60, about="channel"))
            await asyncio.sleep(0.5)  # (the wait is parked in the server by now)
            recent = await lead.recent_changes(since=0)
            mine = await lead.claim(sentence="(ownedBy Runbook AgentLead)")
            still_waiting = not waiting.done()  # the two calls above went on meanwhile
            await b.claim(sentence="(usesCache ProdCluster Redis)")
            heard = await asyncio.wait_for(waiting, 30)
            return recent, mine, still_waiting, heard

    recent, mine, still_waiting, heard = play(script)
    assert recent["cursor"] > 0 and mine["handle"] and still_waiting
    assert [c["sentence"] for c in heard["changes"]] == ["(usesCache ProdCluster Redis)"]


# --- refusals that teach -------------------------------------------------------------------------


def test_every_refusal_a_tool_can_return_names_a_fix(daemon):
    ops = daemon.client("Ops")
    from koinii.channel import agent as channel

    boreas = channel.join(channel.wire(daemon.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    theirs = boreas.assert_("(usesCache ProdCluster Redis)")
    their_question = boreas.pose_query(VERSION)
    closed = boreas.pose_query(READY)
    boreas.close(closed)
    endorsement = channel.join(
        channel.wire(daemon.client("AgentCyra")), "CxTeam", "AgentCyra"
    ).endorse(theirs)

    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            mine = (await lead.claim(sentence="(ownedBy Runbook AgentLead)"))["handle"]
            await lead.permeate(session_id="s-mine")
            [mark] = ops.sentexes_matching("(agentContext CxLead AgentLead)", "CxLead")
            cases = {
                "parse": ("claim", {"sentence": "(unclosed"}),
                "shape": ("claim", {"sentence": "JustAWord"}),
                "naming": ("claim", {"sentence": "(UsesDatabase ProdCluster Pg)"}),
                "not-ground": ("claim", {"sentence": "(usesDatabase ProdCluster ?db)"}),
                "not-well-formed": ("claim", {"sentence": "(not (not))"}),
                "arity": ("claim", {"sentence": "(comment Deploys)"}),
                "unknown-handle": ("claim", {"sentence": "(about (sentexHandle 999999))"}),
                "bad-handle": ("thread", {"handle": 0}),
                "koinii/no-such-handle": ("thread", {"handle": 999_999}),
                "koinii/speaker-mismatch": (
                    "claim",
                    {"sentence": f"(endorses AgentCyra (sentexHandle {theirs}))"},
                ),
                "koinii/answer-mismatch": (
                    "answer",
                    {"question": their_question, "content": "(otherThing X)"},
                ),
                "koinii/not-a-question": ("answer", {"question": theirs, "content": "X"}),
                "koinii/bad-question": ("ask", {"question": "(and (p ?x) (q ?x))"}),
                "koinii/not-disputable": ("dispute", {"target": endorsement}),
                "koinii/not-votable": ("vote", {"target": their_question, "stance": "for"}),
                "koinii/not-a-claim": ("endorse", {"target": endorsement}),
                "koinii/not-an-answer": ("accept", {"answer": theirs}),
                "koinii/not-the-asker": ("close", {"question": their_question}),
                "koinii/foreign-sentex": ("withdraw", {"handle": theirs}),
                "koinii/not-a-move": ("withdraw", {"handle": mark.handle}),
                "bad-option": ("answer", {"question": their_question}),
                "bad-search": ("search", {"text": "  "}),
                "bad-wrap": ("wrap_session", {"session_id": "s", "parent_session_id": ""}),
                "bad-cursor": ("recent_changes", {"since": 10**12}),
                "unsupported-connective": ("claim", {"sentence": "(or (ready A) (ready B))"}),
                "koinii/foreign-mask": ("claim", {"sentence": f"(except (sentexHandle {theirs}))"}),
                "koinii/foreign-mark": ("claim", {"sentence": "(agentContext CxLead AgentCyra)"}),
                "koinii/question-closed": ("answer", {"question": closed, "content": "true"}),
                "koinii/not-your-session": ("permeate", {"session_id": "s-else"}),
                "koinii/use-the-move": (
                    "claim",
                    {"sentence": f"(votesFor AgentLead (sentexHandle {theirs}))"},
                ),
            }
            texts = {}
            for kind, (name, arguments) in cases.items():
                texts[kind] = await lead.refused(name, **arguments)
            assert mine
            return texts

    texts = play(script)
    for kind, text in texts.items():
        assert text.startswith(f"{kind}: "), (kind, text)
        assert f"Fix: {REFUSAL_FIXES[kind]}" in text, (kind, text)
    # every kind the tools produced above has its own fix, not the default (the fixes are
    # the refusal catalogue's, which has no orphans: tests/test_kinds.py)
    assert all(REFUSAL_FIXES[kind] != DEFAULT_FIX for kind in texts)


# --- the agent's own session ----------------------------------------------------------------------


def test_the_agents_own_session_is_read_by_default_and_records_its_tool_calls(daemon):
    from koinii.sessions import SessionStore

    store = SessionStore(daemon.client("AgentLead"))
    own = store.start_session(title="Lead the billing release")

    async def script():
        async with mcp_agent(
            daemon, "AgentLead", "--introspection", "--session", own, "--record"
        ) as lead:
            await lead.claim(sentence="(releaseOwner BillingRelease AgentLead)")
            await lead.refused("claim", sentence="(bad ?x)")
            read = await lead.read_session()
            got = await lead.get_session()
            listed = await lead.list_sessions(search="billing")
            return read, got, listed

    read, got, listed = play(script)
    assert read["session"]["id"] == own and got["session"]["id"] == own
    assert [s["id"] for s in listed["sessions"]] == [own]
    requests = [t["user_request"] for t in read["transcript"]["turns"]]
    assert requests[0].startswith("claim(") and requests[1].startswith("claim(")
    statuses = [t["status"] for t in read["transcript"]["turns"]]
    assert statuses[:2] == ["done", "error"]
    # recorded in batches: the calls after the last read were written when the server ended
    from koinii.sessions import Introspection

    after = Introspection(daemon.client("AgentLead")).read_session(own)
    tools = [t["user_request"].split("(")[0] for t in after["transcript"]["turns"]]
    assert tools == ["claim", "claim", "read_session", "get_session", "list_sessions"]


def test_free_text_is_asked_answered_and_given_as_a_ground_as_the_tools_say(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead, mcp_agent(daemon, "AgentBoreas") as b:
            asked = await lead.ask(question="Who owns the deploy runbook?")
            quoted = await lead.ask(question='"Who"')  # quoted: text, not the symbol Who
            await b.answer(question=asked["handle"], content="Dana owns it")
            word = await b.answer(question=quoted["handle"], content='"sixteen"')
            [answer] = (await lead.thread(handle=asked["handle"]))["answers"]
            ground = await lead.justify(target=answer["handle"], ground="the runbook says so")
            broken = await lead.refused("ask", question="(readyToShip BillingRelease")
            thread = await lead.thread(handle=asked["handle"])
            return asked, quoted, word, ground, broken, thread

    asked, quoted, word, ground, broken, thread = play(script)
    assert asked["sentence"] == '(queries AgentLead "Who owns the deploy runbook?")'
    assert quoted["sentence"] == '(queries AgentLead "Who")'
    assert thread["question_kind"] == "free-text"
    assert [a["content"] for a in thread["answers"]] == ['"Dana owns it"']
    assert '"sixteen")' in word["sentence"]  # a string, not the symbol sixteen
    assert '"the runbook says so"' in ground["sentence"]
    assert broken.startswith("parse: ")  # meant as a sentence: refused as one, not free text


def test_a_long_session_is_read_a_window_of_turns_at_a_time_with_long_texts_cut(daemon):
    from koinii.operations import invoker
    from koinii.sessions import SessionStore

    store = SessionStore(daemon.client("AgentLead"))
    own = store.start_session(title="A long one")
    for n in range(25):
        turn = store.start_turn(own, f"request {n}" + ("." * 5_000 if n == 24 else ""))
        store.finish_turn(turn, "done", "complete", answer=f"answer {n}" + "!" * 9_000)

    async def script():
        async with mcp_agent(daemon, "AgentLead", "--introspection", "--session", own) as lead:
            last = await lead.read_session(turns=3)
            before = await lead.read_session(turns=3, before=last["older"])
            most = await lead.read_session(turns=100)
            refused = await lead.refused("read_session", before=0)
            nobody = await lead.read_session(target="no-such-session")
            return last, before, most, refused, nobody

    last, before, most, refused, nobody = play(script)
    shown = [t["user_request"][:10] for t in last["transcript"]["turns"]]
    assert shown == ["request 22", "request 23", "request 24"] and last["older"] == 23
    assert last["session"]["turn_count"] == 25 and "turns" not in last["session"]  # shown once
    assert "dialog" not in last["transcript"] and "turns" not in last["session_forks"][0]
    cut = last["transcript"]["turns"][-1]["user_request"]
    assert cut.endswith("… [3,010 more characters]") and len(cut) < 2_100
    assert [t["user_request"] for t in before["transcript"]["turns"]] == [
        f"request {n}" for n in (19, 20, 21)
    ]
    # however many turns are asked for, a reply fits in 40,000 characters, `older` saying
    # where the ones it left out end
    assert len(json.dumps(most)) <= 40_000 and 1 < len(most["transcript"]["turns"]) < 25
    assert most["older"] == most["transcript"]["turns"][0]["position"]
    assert refused.startswith("bad-option: before is a turn's position")
    assert nobody["session"] is None and nobody["note"].startswith("no session matches")
    # the window's options are refused over the wire as in-process
    with pytest.raises(Refused) as wrong:
        invoker(daemon.client("AgentLead"))("sessions.read_session", target=own, before=2)
    assert wrong.value.kind == "bad-option" and wrong.value.data["option"] == "before"


def test_a_named_session_starts_when_named_and_records_under_that_name(daemon):
    """Issue 39: a lead names its session before it starts (`--session NAME --record`),
    so its workers can file wraps into it; the name then finds it, and a second server
    given the name records into the same session."""
    import uuid

    from koinii.sessions import Introspection

    runtime_id = str(uuid.uuid4())  # a runtime's own session id: the session takes it

    async def script():
        named = ("--introspection", "--session", "lead-billing", "--record")
        async with mcp_agent(daemon, "AgentLead", *named) as lead:
            await lead.claim(sentence="(releaseOwner BillingRelease AgentLead)")
            first = await lead.get_session()
        async with mcp_agent(daemon, "AgentLead", *named) as again:
            await again.questions()
            second = await again.get_session()
        by_id = ("--introspection", "--session", runtime_id, "--record")
        async with mcp_agent(daemon, "AgentLead", *by_id) as lead:
            third = await lead.get_session()
        return first, second, third

    first, second, third = play(script)
    assert first["session"]["title"] == "lead-billing"
    assert second["session"]["id"] == first["session"]["id"]
    assert third["session"]["id"] == runtime_id
    read = Introspection(daemon.client("AgentLead")).read_session("lead-billing")
    assert read["session"]["id"] == first["session"]["id"]
    tools = [t["user_request"].split("(")[0] for t in read["transcript"]["turns"]]
    assert tools == ["claim", "get_session", "questions", "get_session"]


def test_an_unknown_session_is_refused_at_start(daemon):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "koinii",
            "mcp",
            "--agent",
            "AgentLead",
            "--channel",
            "CxTeam",
            "--url",
            daemon.url,
            "--token",
            daemon.tokens["AgentLead"],
            "--introspection",
            "--session",
            "no-such-session",
        ],
        input="",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1 and "koinii/no-session" in result.stderr


def test_the_tools_say_how_decisions_carry_reasons_and_how_long_a_wait_lasts(daemon):
    async def script():
        async with mcp_agent(daemon, "AgentLead") as lead:
            return {t.name: t for t in (await lead.session.list_tools()).tools}

    tools = play(script)
    for name in ("accept", "close"):
        assert "reason" in tools[name].inputSchema["properties"]
        assert "say why" in tools[name].description
    assert "at most 120 seconds" in tools["wait_for_changes"].description
