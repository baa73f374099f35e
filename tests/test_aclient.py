"""What only the asyncio client has: subscriptions as async iterators (that survive a
daemon restart), budgets per task, and no httpx for who never uses it. Everything it
shares with the blocking client runs in the shared suites (the `connect` fixture)."""

import asyncio
import signal
import subprocess
import sys

import pytest

import koinii

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_a_subscription_is_an_async_iterator_of_the_writes_after_it_opened(daemon):
    async def scenario():
        async with koinii.aconnect(daemon.url) as client:
            await client.assert_("(item Before)", "CxA")
            async with client.subscribe("(item ?x)", "CxA", wait_ms=5_000) as events:
                for name in ("One", "Two", "Three"):
                    await client.assert_(f"(item {name})", "CxA")
                seen = []
                async for event in events:
                    seen.append(event.added[0]["bindings"]["?x"])
                    if len(seen) == 3:
                        break
                token = events.token
            assert [s.name for s in seen] == ["One", "Two", "Three"]
            assert events.last_seq == await client.seq and not events.running
            assert [w["token"] for w in await client.watchers()] == []  # closed on the daemon
            return token

    assert run(scenario())


def test_a_subscription_survives_a_daemon_restart_without_loss_or_repeat(daemon):
    async def scenario():
        async with koinii.aconnect(daemon.url, timeout=5) as client:
            outages = []
            events = await client.subscribe(
                "(item ?x)", "CxA", wait_ms=2_000, on_error=outages.append
            )
            await client.assert_("(item One)", "CxA")
            first = await anext(events)
            await asyncio.to_thread(daemon.restart_by, signal.SIGTERM)
            await client.assert_("(item Two)", "CxA")
            second = await anext(events)
            await events.aclose()
            return first, second, events.outages, outages

    first, second, outages, told = run(scenario())
    assert [e.added[0]["sentence"] for e in (first, second)] == ["(item One)", "(item Two)"]
    assert outages == 1 and len(told) == 1


def test_closing_wakes_a_poll_parked_in_another_task(daemon):
    async def scenario():
        async with koinii.aconnect(daemon.url) as client:
            events = await client.subscribe(wait_ms=20_000)
            parked = asyncio.create_task(anext(events, None))
            await asyncio.sleep(0.3)
            started = asyncio.get_running_loop().time()
            await events.aclose()
            assert await parked is None  # the iteration ended
            return asyncio.get_running_loop().time() - started

    assert run(scenario()) < 1.0


def test_a_goal_that_cannot_be_watched_is_refused_when_it_opens(daemon):
    async def scenario():
        async with koinii.aconnect(daemon.url) as client:
            with pytest.raises(koinii.Refused) as refusal:
                await client.subscribe(["(p ?x)", "(q ?x)"], "CxA")
            return refusal.value.kind

    assert run(scenario()) == "not-watchable"


def test_a_budget_holds_for_the_task_inside_the_block_only(start_daemon):
    daemon = start_daemon(principals={"AgentAtlas": "agent"})

    async def scenario():
        async with koinii.aconnect(daemon.url, token=daemon.tokens["AgentAtlas"]) as client:

            async def outside():
                return await client.query("(r ?a ?b)", "CxA")

            with client.budget(5.0):  # higher than the default: an agent is refused
                other = asyncio.create_task(outside())  # created inside: it inherits
                with pytest.raises(koinii.Refused) as refusal:
                    await client.query("(r ?a ?b)", "CxA")
            after = await outside()  # the block is over
            with pytest.raises(koinii.Refused):
                await other
            return refusal.value.kind, after

    assert run(scenario()) == ("forbidden", [])


def test_importing_koinii_does_not_import_httpx():
    code = "import sys, koinii; assert 'httpx' not in sys.modules; koinii.aconnect; "
    code += "assert 'httpx' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_two_asyncio_agents_converse_in_one_event_loop(daemon):
    from koinii.client import aio_agent as achannel

    async def scenario():
        async with koinii.aconnect(daemon.url) as a, koinii.aconnect(daemon.url) as b:
            atlas = await achannel.join(achannel.wire(a), "CxDeploy", "AgentAtlas")
            boreas = await achannel.join(achannel.wire(b), "CxDeploy", "AgentBoreas")
            questions = await boreas.subscribe("(queries ?who ?q)", "CxDeploy", wait_ms=5_000)
            answers = await atlas.subscribe("(answers ?who ?what ?q)", "CxDeploy", wait_ms=5_000)

            async def answer_the_first_question():
                event = await anext(questions)
                return await boreas.answer("PostgreSQL14", event.added[0]["handle"])

            answering = asyncio.create_task(answer_the_first_question())
            asked = await atlas.pose_query("(usesDatabase ProdCluster ?db)")
            heard = await anext(answers)
            answered = await answering
            many = await asyncio.gather(*(atlas.assert_(f"(ready Part{i})") for i in range(8)))
            await questions.aclose()
            await answers.aclose()
            return asked, answered, heard, many, await atlas.thread(asked)

    asked, answered, heard, many, thread = run(scenario())
    assert heard.added[0]["handle"] == answered
    assert [a["handle"] for a in thread["answers"]] == [answered]
    assert len(set(many)) == 8 and asked not in many


def test_an_asyncio_agent_searches_and_reads_the_vocabulary_like_a_blocking_one(daemon):
    from koinii.channel import agent as channel
    from koinii.client import aio_agent as achannel

    blocking = channel.join(channel.wire(daemon.client()), "CxDeploy", "AgentBoreas")
    claim = blocking.assert_("(postgresMajorVersion ProdCluster 16)")

    async def scenario():
        async with koinii.aconnect(daemon.url) as client:
            atlas = await achannel.join(achannel.wire(client), "CxDeploy", "AgentAtlas")
            return (
                await atlas.search("postgres version", ranking="lexical"),
                await atlas.vocabulary(),
            )

    hits, vocabulary = run(scenario())
    assert [(h.sentex.handle, h.matched) for h in hits] == [(claim, "words")]
    assert hits == blocking.search("postgres version", ranking="lexical")
    in_use = {entry["predicate"]: entry["count"] for entry in vocabulary}
    assert in_use["postgresMajorVersion"] == 1
