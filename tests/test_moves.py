"""The moves run on the single writer (koinii.channel.moves): one HTTP exchange per move from
every client, and the conversation's rules hold for a client that skips the library —
raw HTTP with an agent's own token, two clients of one agent at once, hand-written
speech acts, a ruling's tag, a dispute without its rebuttal."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import httpx
import pytest

import koinii
from koinii.channel import agent as channel
from koinii.client import aio_agent as achannel
from tests.counting_proxy import CountingProxy
from tests.test_mcp import mcp_agent

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

TEAM = ("AgentAtlas", "AgentBoreas", "AgentCyra")
PRINCIPALS = {**{a: "agent" for a in TEAM}, "AgentLead": "agent", "Viewer": "reader"}
VERSION = "(postgresMajorVersion ProdCluster ?v)"
CLAIM = "(usesDatabase ProdCluster PostgreSQL16)"


@pytest.fixture
def daemon(start_daemon):
    return start_daemon(principals=PRINCIPALS)


def raw(daemon, principal: str, operation: str, **body) -> httpx.Response:
    """One POST of `body` to the daemon with `principal`'s token, as any HTTP client."""
    return httpx.post(
        f"{daemon.url}/v1/{operation}",
        json=body,
        headers={"Authorization": f"Bearer {daemon.tokens[principal]}"},
        timeout=30,
    )


def moved(daemon, principal: str, move: str, **fields) -> dict:
    reply = raw(daemon, principal, f"moves/{move}", agent=principal, **fields)
    assert reply.status_code == 200, reply.text
    return reply.json()["result"]


def refusal(reply: httpx.Response) -> str:
    body = reply.json()
    assert body["ok"] is False, body
    return body["error"]["kind"]


def joined(daemon, *agents: str) -> None:
    for agent in agents:
        moved(daemon, agent, "join", channel="CxTeam")


# --- one exchange per move ---------------------------------------------------------------------

MOVES = (
    "ask",
    "answer",
    "claim",
    "endorse",
    "justify",
    "dispute",
    "vote",
    "accept",
    "close",
    "withdraw",
)


def _each_move(atlas, boreas, proxy) -> dict[str, list[str]]:
    """Every move once, by `atlas` and `boreas` (a sync or async-behind-blocking agent),
    with the operations each one asked the daemon for."""
    seen: dict[str, list[str]] = {}

    def count(name, call):
        proxy.paths.clear()
        result = call()
        seen[name] = proxy.operations()
        return result

    q = count("ask", lambda: atlas.ask(VERSION))
    a = count("answer", lambda: boreas.answer(q, "16"))
    c = count("claim", lambda: atlas.claim(CLAIM))
    count("endorse", lambda: atlas.endorse(a))
    count("justify", lambda: boreas.justify(c, "ReleaseNotes"))
    count("dispute", lambda: boreas.dispute(c))
    count("vote", lambda: atlas.vote(a, "for"))
    count("accept", lambda: atlas.accept(a))
    q2 = atlas.ask("(readyToShip BillingRelease)")
    count("close", lambda: atlas.close(q2))
    count("withdraw", lambda: atlas.withdraw(c))
    return seen


def test_every_move_of_the_blocking_agent_is_one_exchange(daemon):
    with CountingProxy(daemon.url) as proxy:
        atlas, boreas = (
            channel.join(
                channel.wire(koinii.connect(proxy.url, token=daemon.tokens[a])), "CxTeam", a
            )
            for a in ("AgentAtlas", "AgentBoreas")
        )
        seen = _each_move(atlas, boreas, proxy)
    assert seen == {move: [f"moves/{move}"] for move in MOVES}


class Awaited:
    """An `achannel.Agent` whose every method is awaited on `loop` when called."""

    def __init__(self, agent, loop) -> None:
        self._agent, self._loop = agent, loop

    def __getattr__(self, name):
        return lambda *args, **kw: self._loop.run(getattr(self._agent, name)(*args, **kw))


def test_every_move_of_the_async_agent_is_one_exchange(daemon):
    from tests.blocking import Loop

    loop = Loop()
    try:
        with CountingProxy(daemon.url) as proxy:

            def member(agent: str) -> Awaited:
                client = koinii.aconnect(proxy.url, token=daemon.tokens[agent])
                joined_ = loop.run(achannel.join(achannel.wire(client), "CxTeam", agent))
                return Awaited(joined_, loop)

            seen = _each_move(member("AgentAtlas"), member("AgentBoreas"), proxy)
    finally:
        loop.close()
    assert seen == {move: [f"moves/{move}"] for move in MOVES}


def test_joining_is_one_exchange(daemon):
    with CountingProxy(daemon.url) as proxy:
        channel.join(
            channel.wire(koinii.connect(proxy.url, token=daemon.tokens["AgentAtlas"])),
            "CxTeam",
            "AgentAtlas",
        )
        assert proxy.operations() == ["moves/join"]


def test_every_move_of_an_mcp_tool_is_one_exchange(daemon):
    joined(daemon, "AgentBoreas")
    q_boreas = moved(daemon, "AgentBoreas", "ask", question=VERSION)["handle"]

    async def script(proxy):
        seen = {}
        async with mcp_agent(
            SimpleNamespace(url=proxy.url, tokens=daemon.tokens), "AgentAtlas"
        ) as atlas:

            async def count(name, **arguments):
                proxy.paths.clear()
                result = await getattr(atlas, name)(**arguments)
                seen[name] = proxy.operations()
                return result

            q = (await count("ask", question=VERSION))["handle"]
            a = (await count("answer", question=q_boreas, content="16"))["handle"]
            c = (await count("claim", sentence=CLAIM))["handle"]
            other = moved(daemon, "AgentBoreas", "claim", sentence="(usesCache ProdCluster Redis)")
            b = moved(daemon, "AgentBoreas", "answer", question=q, content="15")["handle"]
            await count("endorse", target=other["handle"])
            await count("justify", target=c, ground="ReleaseNotes")
            await count("dispute", target=other["handle"])
            await count("vote", target=other["handle"], stance="against")
            await count("accept", answer=b)
            q2 = (await atlas.ask(question="(readyToShip BillingRelease)"))["handle"]
            await count("close", question=q2)
            await count("withdraw", handle=a)
        return seen

    with CountingProxy(daemon.url) as proxy:
        seen = asyncio.run(asyncio.wait_for(script(proxy), 120))
    assert seen == {move: [f"moves/{move}"] for move in MOVES}


# --- the rules hold for every client ------------------------------------------------------------


@pytest.mark.backends("sqlite", "postgres")
def test_two_clients_of_one_agent_answering_at_once_leave_one_standing_answer(daemon):
    joined(daemon, "AgentAtlas", "AgentBoreas")
    q = moved(daemon, "AgentAtlas", "ask", question=VERSION)["handle"]
    clients = [koinii.connect(daemon.url, token=daemon.tokens["AgentBoreas"]) for _ in range(2)]
    start = threading.Barrier(2)

    def answer_many(client, values):
        start.wait(10)
        for value in values:
            client.invoke("moves.answer", agent="AgentBoreas", question=q, content=value)

    workers = [
        threading.Thread(target=answer_many, args=(c, [str(v) for v in range(i, 40, 2)]))
        for i, c in enumerate(clients)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    ops = koinii.connect(daemon.url, token=daemon.tokens["AgentAtlas"])
    standing = ops.sentexes_matching(f"(answers AgentBoreas ?c (sentexHandle {q}))", "CxBoreas")
    assert len(standing) == 1
    [thread_answer] = ops.invoke("conversation.thread", handle=q, channel="CxTeam")["answers"]
    assert thread_answer["handle"] == standing[0].handle


@pytest.mark.parametrize(
    "sentence",
    [
        "(answers AgentBoreas (quote (postgresMajorVersion ProdCluster 9)) (sentexHandle {q}))",
        "(votesFor AgentBoreas (sentexHandle {c}))",
        "(disputes AgentBoreas (sentexHandle {c}))",
        "(closes AgentBoreas (sentexHandle {q}))",
        "(accepts AgentBoreas (sentexHandle {c}))",
        "(endorses AgentBoreas (sentexHandle {c}))",
        "(queries AgentBoreas (quote (p ?x)))",
    ],
    ids=["answer", "ballot", "dispute", "closing", "acceptance", "endorsement", "question"],
)
def test_a_hand_written_speech_act_is_refused_to_a_raw_client(daemon, sentence):
    joined(daemon, "AgentAtlas", "AgentBoreas")
    q = moved(daemon, "AgentAtlas", "ask", question=VERSION)["handle"]
    c = moved(daemon, "AgentAtlas", "claim", sentence=CLAIM)["handle"]
    act = sentence.format(q=q, c=c)
    seq = koinii.connect(daemon.url).health()["seq"]
    assert refusal(raw(daemon, "AgentBoreas", "assert", sentence=act, context="CxBoreas")) == (
        "koinii/use-the-move"
    )
    edit = {
        "add": [
            {"sentence": "(usesCache ProdCluster Redis)", "context": "CxBoreas"},
            {"sentence": act, "context": "CxBoreas"},
        ]
    }
    reply = raw(daemon, "AgentBoreas", "edit", **edit)
    assert refusal(reply) == "koinii/use-the-move" and reply.status_code == 400
    assert reply.json()["error"]["data"]["move"] in {
        m.split("(")[0] for m in ("answer", "vote", "dispute", "close", "accept", "endorse", "ask")
    }
    assert koinii.connect(daemon.url).health()["seq"] == seq  # nothing written
    assert (
        refusal(raw(daemon, "AgentBoreas", "moves/claim", agent="AgentBoreas", sentence=act))
        == "koinii/use-the-move"
    )


def test_a_ruling_tag_in_an_agents_provenance_is_refused(daemon):
    joined(daemon, "AgentAtlas")
    reply = raw(
        daemon,
        "AgentAtlas",
        "assert",
        sentence=CLAIM,
        context="CxAtlas",
        provenance={"adjudication": {"dispute": [1, 2], "at": 0}},
    )
    assert refusal(reply) == "reserved-provenance"
    reply = raw(
        daemon,
        "AgentAtlas",
        "moves/claim",
        agent="AgentAtlas",
        sentence=CLAIM,
        provenance={"adjudication#2": {"dispute": [1, 2], "at": 0}},
    )
    assert refusal(reply) == "reserved-provenance"


def test_a_dispute_never_stands_without_its_rebuttal(daemon):
    joined(daemon, "AgentAtlas", "AgentBoreas")
    c = moved(daemon, "AgentAtlas", "claim", sentence=CLAIM)["handle"]
    dispute = moved(daemon, "AgentBoreas", "dispute", target=c)
    rebuttal = dispute["rebuttal"]
    client = koinii.connect(daemon.url, token=daemon.tokens["AgentBoreas"])
    assert client.sentex(rebuttal).text == f"(not {CLAIM})"
    for attempt in (
        lambda: raw(daemon, "AgentBoreas", "retract", handle=rebuttal),
        lambda: raw(daemon, "AgentBoreas", "edit", remove=[rebuttal]),
        lambda: raw(daemon, "AgentBoreas", "retract", handle=dispute["handle"]),
    ):
        assert refusal(attempt()) == "koinii/use-the-move"
    # the move takes both: withdrawing the rebuttal withdraws the dispute on it
    gone = moved(daemon, "AgentBoreas", "withdraw", handle=rebuttal)
    assert sorted(gone["removed"]) == sorted([rebuttal, dispute["handle"]])
    assert client.sentex(dispute["handle"]) is None


def test_a_move_is_made_only_as_the_tokens_own_agent(daemon):
    joined(daemon, "AgentAtlas", "AgentBoreas")
    c = moved(daemon, "AgentAtlas", "claim", sentence=CLAIM)["handle"]
    for move, fields in (
        ("claim", {"sentence": "(usesCache ProdCluster Redis)"}),
        ("withdraw", {"handle": c}),
        ("join", {"channel": "CxTeam"}),
    ):
        reply = raw(daemon, "AgentBoreas", f"moves/{move}", agent="AgentAtlas", **fields)
        assert refusal(reply) == "koinii/speaker-mismatch"
    reply = raw(daemon, "Viewer", "moves/claim", agent="Viewer", sentence=CLAIM)
    assert refusal(reply) == "forbidden" and reply.status_code == 403
    assert koinii.connect(daemon.url, token=daemon.tokens["AgentAtlas"]).sentex(c) is not None


def test_a_move_refused_over_the_wire_is_refused_alike_in_process(daemon, tmp_path):
    """The same operation in both places: the same kinds for the same bad calls."""
    kb = koinii.open_kb(str(tmp_path / "local.db"))
    local = {a: channel.join(channel.local(kb), "CxTeam", a) for a in ("AgentAtlas", "AgentBoreas")}
    wire = {
        a: channel.join(
            channel.wire(koinii.connect(daemon.url, token=daemon.tokens[a])), "CxTeam", a
        )
        for a in ("AgentAtlas", "AgentBoreas")
    }
    for team in (local, wire):
        assert _refusals(team["AgentAtlas"], team["AgentBoreas"]) == [
            "koinii/answer-mismatch",
            "koinii/not-a-question",
            "koinii/no-such-stance",
            "bad-handle",
            "koinii/not-the-asker",
            "koinii/not-disputable",
            "koinii/foreign-sentex",
            "koinii/use-the-move",
        ]
    kb.close()


def _refusals(atlas, boreas) -> list[str]:
    q = atlas.ask(VERSION)
    c = atlas.claim(CLAIM)
    kinds = []
    for call in (
        lambda: boreas.answer(q, "(otherThing X)"),
        lambda: boreas.answer(c, "16"),
        lambda: boreas.vote(c, "sideways"),
        lambda: boreas.vote(0, "for"),
        lambda: boreas.close(q),
        lambda: atlas.dispute(c),
        lambda: boreas.withdraw(c),
        lambda: boreas.claim(f"(votesFor AgentBoreas (sentexHandle {c}))"),
    ):
        with pytest.raises(koinii.Refused) as refused:
            call()
        kinds.append(refused.value.kind)
    return kinds


def test_the_old_argument_orders_still_work_with_a_warning(tmp_path):
    kb = koinii.open_kb(str(tmp_path / "kb.db"))
    atlas = channel.join(channel.local(kb), "CxTeam", "AgentAtlas")
    boreas = channel.join(channel.local(kb), "CxTeam", "AgentBoreas")
    with pytest.warns(DeprecationWarning, match="pose_query"):
        q = atlas.pose_query(VERSION)
    with pytest.warns(DeprecationWarning, match="answer\\(question, content\\)"):
        a = boreas.answer({"?v": "16"}, q)
    with pytest.warns(DeprecationWarning, match="vote\\(target, stance\\)"):
        atlas.vote("for", a)
    with pytest.warns(DeprecationWarning, match="justify\\(target, ground\\)"):
        atlas.justify("ReleaseNotes", a)
    assert atlas.thread(q)["answers"][0]["handle"] == a
    kb.close()
