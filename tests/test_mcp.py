"""`koinii mcp`: the official SDK's own client, over stdio, against a real `koinii mcp`
subprocess backed by a real daemon."""

import asyncio
import json
import sys

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

CHANNEL_TOOLS = {
    "claim",
    "pose_query",
    "answer",
    "endorse",
    "justify",
    "dispute",
    "vote",
    "open_queries",
    "answers_to",
    "endorsements_of",
    "query",
    "recent_changes",
    "wrap_session",
    "permeate",
}
SESSION_TOOLS = {"read_session", "get_session", "list_sessions"}


def run_session(daemon, agent: str, script, *extra: str):
    """Start `koinii mcp` for `agent` against the daemon and run `script(session)`."""

    async def main():
        params = StdioServerParameters(
            command=sys.executable,
            args=[
                "-m",
                "koinii",
                "mcp",
                "--agent",
                agent,
                "--channel",
                "CxDeploy",
                "--url",
                daemon.url,
                "--token",
                daemon.tokens[agent],
                *extra,
            ],
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await script(session)

    return asyncio.run(asyncio.wait_for(main(), 60))


def result_of(reply):
    assert not reply.isError, reply.content[0].text
    structured = reply.structuredContent
    if structured is None:
        return json.loads(reply.content[0].text)
    return structured["result"] if set(structured) == {"result"} else structured


@pytest.fixture
def team(start_daemon):
    return start_daemon(principals={"AgentAtlas": "agent", "AgentBoreas": "agent"})


def test_the_tools_without_introspection(team):
    async def script(session):
        return {t.name for t in (await session.list_tools()).tools}

    names = run_session(team, "AgentAtlas", script)
    assert names >= CHANNEL_TOOLS and not (SESSION_TOOLS & names)


def test_the_session_tools_appear_with_introspection(team):
    async def script(session):
        return {t.name for t in (await session.list_tools()).tools}

    assert run_session(team, "AgentAtlas", script, "--introspection") >= SESSION_TOOLS


def test_every_move_and_read_through_mcp(team):
    async def atlas(session):
        claim = result_of(
            await session.call_tool("claim", {"sentence": "(usesDatabase ProdCluster Postgres)"})
        )
        query = result_of(await session.call_tool("pose_query", {"question": "WhichCache"}))
        return claim, query

    claim, query = run_session(team, "AgentAtlas", atlas)

    async def boreas(session):
        out = {}
        out["answer"] = result_of(
            await session.call_tool("answer", {"content": "Redis", "target": query})
        )
        out["endorse"] = result_of(await session.call_tool("endorse", {"target": claim}))
        out["justify"] = result_of(
            await session.call_tool("justify", {"ground": "ItIsFast", "target": claim})
        )
        out["vote"] = result_of(await session.call_tool("vote", {"stance": "for", "target": claim}))
        out["dispute"] = result_of(await session.call_tool("dispute", {"target": claim}))
        out["open"] = result_of(await session.call_tool("open_queries", {}))
        out["answers"] = result_of(await session.call_tool("answers_to", {"query": query}))
        out["endorsements"] = result_of(
            await session.call_tool("endorsements_of", {"target": claim})
        )
        out["query"] = result_of(
            await session.call_tool("query", {"goal": "(usesDatabase ?c ?db)"})
        )
        out["changes"] = result_of(
            await session.call_tool("recent_changes", {"since": 0, "limit": 5})
        )
        return out

    out = run_session(team, "AgentBoreas", boreas)
    assert all(isinstance(out[k], int) for k in ("answer", "endorse", "justify", "vote", "dispute"))
    assert [q["question"] for q in out["open"]] == ["WhichCache"]
    assert out["answers"][0]["speaker"] == "AgentBoreas" and out["answers"][0]["content"] == "Redis"
    assert [e["speaker"] for e in out["endorsements"]] == ["AgentBoreas"]
    assert out["query"] == [{"?c": "ProdCluster", "?db": "Postgres"}]
    assert len(out["changes"]["entries"]) == 5
    client = team.client("AgentAtlas")
    assert client.sentex(out["dispute"]).provenance["principal"] == "AgentBoreas"
    assert client.contradictions("CxDeploy")


def test_a_refusal_comes_back_as_a_tool_error_with_its_kind(team):
    async def script(session):
        bad_name = await session.call_tool("claim", {"sentence": "(UsesDatabase x)"})
        bad_speaker = await session.call_tool("claim", {"sentence": "(queries AgentBoreas Q)"})
        bad_stance = await session.call_tool("vote", {"stance": "maybe", "target": 1})
        return bad_name, bad_speaker, bad_stance

    for reply, kind in zip(
        run_session(team, "AgentAtlas", script),
        ("naming", "koinii/speaker-mismatch", "koinii/no-such-stance"),
    ):
        assert reply.isError
        assert f"{kind}: " in reply.content[0].text


def test_wrap_and_permeate_through_mcp(start_daemon):
    team = start_daemon(principals={"AgentLead": "agent", "AgentAtlas": "agent"})
    lead = team.client("AgentLead")
    from koinii.wraps import Coordinators

    Coordinators(lead).register("AgentLead", project_id="demo", session_id="s-lead")

    async def atlas(session):
        return result_of(
            await session.call_tool(
                "wrap_session",
                {
                    "session_id": "s-atlas",
                    "parent_session_id": "s-lead",
                    "notes": ["Prod runs PostgreSQL16"],
                    "decisions": ["Keep it"],
                },
            )
        )

    wrap = run_session(team, "AgentAtlas", atlas)
    assert wrap["agent_id"] == "AgentAtlas" and wrap["stats"]["notes"] == 1

    async def coordinator(session):
        first = result_of(await session.call_tool("permeate", {"session_id": "s-lead"}))
        again = result_of(await session.call_tool("permeate", {"session_id": "s-lead"}))
        return first, again

    first, again = run_session(team, "AgentLead", coordinator)
    assert first["processed"] == 1
    assert [e["sentence"] for e in first["entries"]] == [
        '(memoryNote AgentAtlas "Prod runs PostgreSQL16")',
        '(memoryDecision AgentAtlas "Keep it")',
    ]
    assert again["processed"] == 0


def test_the_session_tools_read_recorded_sessions(team):
    from koinii.sessions import SessionStore

    store = SessionStore(team.client("AgentAtlas"))
    session = store.start_session(title="Fix the flaky test")
    turn = store.start_turn(session, "why does test_feed flake?")
    store.finish_turn(turn, "done", "complete", answer="a race in the poll loop")

    async def script(session_):
        listed = result_of(await session_.call_tool("list_sessions", {"search": "flaky"}))
        one = result_of(await session_.call_tool("get_session", {"target": session[:8]}))
        full = result_of(await session_.call_tool("read_session", {"target": session}))
        return listed, one, full

    listed, one, full = run_session(team, "AgentAtlas", script, "--introspection")
    assert [row["id"] for row in listed] == [session] and listed[0]["rank"] == 0
    assert one["title"] == "Fix the flaky test"
    assert full["session"]["turn_count"] == 1
