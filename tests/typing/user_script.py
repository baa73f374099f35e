"""What a user writes against Koinii, checked by mypy --strict (tests/test_typing.py):
every name below is typed by the package, not inferred as Any."""

from __future__ import annotations

import asyncio

import koinii
from koinii import Client, Edited, Event, Refused, Retracted, Sentex, Sym
from koinii.channel import agent as channel
from koinii.client import aio_agent as achannel


def sync_client(client: Client) -> list[str]:
    handle = client.assert_("(usesDatabase ProdCluster Postgres)", "CxAtlas", creator="AgentAtlas")
    handles: list[int] = handle if isinstance(handle, list) else [handle]
    found: Sentex | None = client.sentex(handles[0])
    names = [found.text] if found is not None else []
    for binding in client.query("(usesDatabase ?c ?db)", Sym("CxDeploy"), limit=10):
        names.append(koinii.show(binding["?db"]))
    edited: Edited = client.edit(add=[("(p A)", "CxAtlas", {"strength": "monotonic"})])
    first = edited.handles[0]  # a list only where a rule was split
    retracted: Retracted = client.retract(first if isinstance(first, int) else first[0])
    up: frozenset[str] = client.context_up("CxDeploy")
    sub = client.watch("(p ?x)", "CxAtlas")
    events: list[Event] = client.poll(sub["token"], sub["cursor"], wait_ms=10)["events"]
    with client.budget(0.5):
        seq: int = client.seq
    return names + sorted(up) + [str(retracted.seq), str(len(events)), str(seq)]


def in_process() -> int:
    with koinii.open_kb() as kb:
        medium = channel.local(kb)
        atlas = channel.join(medium, "CxDeploy", "AgentAtlas")
        question: int = atlas.pose_query("(usesDatabase ProdCluster ?db)")
        try:
            atlas.assert_("(Bad x)")
        except Refused as refusal:
            kind: str = refusal.kind
            assert kind == "naming"
        return question


def reading_the_conversation(atlas: channel.Agent, client: Client) -> list[str]:
    """The read results are typed (koinii.results): keys and values alike."""
    thread = atlas.thread(1)
    said = [a["content"] for a in thread.get("answers", [])]
    for dispute in atlas.disputes("open"):
        votes: int = dispute["tally"]["for"] + dispute["tally"]["against"]
        said += [m["speaker"] or "" for m in dispute["raised_by"]] + [str(votes)]
    states = [q["state"] for q in atlas.questions()]
    tree = client.why(1)
    if tree is not None and not tree["premise"]:
        said += [step["rule_sentence"] for step in tree["justifications"]]
    return said + states


def over_the_wire() -> None:
    with koinii.connect() as client:  # KOINII_URL, KOINII_TOKEN
        agent: channel.Agent = channel.join(channel.wire(client), "CxDeploy", "AgentAtlas")
        agent.assert_("(ready Release)")


async def async_client() -> list[str]:
    async with koinii.aconnect() as client:  # KOINII_URL, KOINII_TOKEN
        handle = await client.assert_("(p A)", "CxAtlas")
        assert not isinstance(handle, list)
        found: Sentex | None = await client.sentex(handle)
        seq: int = await client.seq
        seen = [str(seq)] + ([found.text] if found is not None else [])
        with client.budget(0.5):
            bindings = await client.query("(p ?x)", "CxAtlas")
        seen += [koinii.show(b["?x"]) for b in bindings]
        async with client.subscribe("(p ?x)", "CxAtlas") as events:
            async for event in events:
                seen += [str(change["sentence"]) for change in event.added]
                break
        return seen


async def async_channel() -> list[str]:
    async with koinii.aconnect() as client:
        atlas = await achannel.join(achannel.wire(client), "CxDeploy", "AgentAtlas")
        question: int = await atlas.pose_query("(usesDatabase ProdCluster ?db)")
        seen = [str(question)]
        async with atlas.subscribe("(answers ?who ?what ?q)", "CxDeploy") as events:
            async for event in events:
                seen += [str(change["sentence"]) for change in event.added]
                break
        withdrawn: Edited = await atlas.withdraw(question)
        return seen + [str(withdrawn.seq)]


if __name__ == "__main__":
    asyncio.run(async_client())
