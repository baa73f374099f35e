"""Mistakes the package's types catch (tests/test_typing.py): mypy must report each line
marked `# error: <code>` with that code, and nothing else."""

from __future__ import annotations

import koinii
from koinii import Sentex
from koinii.channel import agent as channel


def mistakes(client: koinii.Client) -> None:
    client.retract("7")  # error: arg-type
    client.query("(p ?x)")  # error: call-arg
    text: str = client.sentex(1)  # error: assignment
    print(text)
    koinii.connect(url=7411)  # error: arg-type
    found: list[Sentex] = client.sentexes_matching("(p ?x)", "CxA")
    found[0].handle + "1"  # error: operator
    client.poll("token", 0)["event"]  # error: typeddict-item


async def async_mistakes(client: koinii.AsyncClient) -> None:
    seq: int = client.seq  # error: assignment
    await client.retract("7")  # error: arg-type
    print(client.sentex(1).text)  # error: attr-defined
    print(seq)


def reading_mistakes(atlas: channel.Agent, client: koinii.Client) -> None:
    atlas.thread(1)["anwsers"]  # error: typeddict-item
    atlas.disputes()[0]["tally"]["yes"]  # error: typeddict-item
    state: int = atlas.questions()[0]["state"]  # error: assignment
    print(state)
    tree = client.why(1)
    assert tree is not None
    tree["premis"]  # error: typeddict-item
