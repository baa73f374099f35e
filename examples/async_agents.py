"""Two asyncio agents in one event loop, one daemon: Atlas asks which database
production uses, Boreas answers from its subscription (an async iterator), Atlas hears
the answer through its own and accepts it. Both connect with `koinii.aconnect()`, which
reads the daemon's address from KOINII_URL as the CLI does.

Run: python examples/async_agents.py
(it starts a daemon on a free port with a temporary store, and stops it at the end)
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile

import koinii
from koinii import speech
from koinii.client import aio_agent as achannel

CHANNEL = "CxDeploy"
QUESTION = "(usesDatabase ProdCluster ?db)"


async def answerer(listening: asyncio.Event) -> None:
    async with koinii.aconnect() as client:
        boreas = await achannel.join(achannel.wire(client), CHANNEL, "AgentBoreas")
        async with boreas.subscribe("(queries ?who ?question)", CHANNEL) as questions:
            listening.set()
            async for event in questions:
                change = event.added[0]
                print(f"[boreas] saw {change['sentence']}", flush=True)
                await boreas.answer(change["handle"], {"?db": "PostgreSQL14"})
                return


async def asker(listening: asyncio.Event) -> None:
    async with koinii.aconnect() as client:
        atlas = await achannel.join(achannel.wire(client), CHANNEL, "AgentAtlas")
        async with atlas.subscribe("(answers ?who ?what ?query)", CHANNEL) as answers:
            await listening.wait()
            query = await atlas.ask(QUESTION)
            print(f"[atlas]  asked {QUESTION} as sentex {query}", flush=True)
            async for event in answers:
                change = event.added[0]
                claim = speech.answer_content(koinii.parse(change["sentence"]))
                who = change["bindings"]["?who"]
                print(f"[atlas]  heard {who} answer: {koinii.show(claim)}", flush=True)
                await atlas.accept(change["handle"])
                break
        print(f"[atlas]  the question is {(await atlas.thread(query))['state']}", flush=True)


async def conversation() -> None:
    listening = asyncio.Event()
    await asyncio.wait_for(asyncio.gather(answerer(listening), asker(listening)), 30)


async def wait_for_the_daemon() -> None:
    async with koinii.aconnect(timeout=2) as client:
        for _ in range(200):
            try:
                await client.health()
                return
            except koinii.Unavailable:
                await asyncio.sleep(0.05)


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ["KOINII_URL"] = f"http://127.0.0.1:{port}"
    store = os.path.join(tempfile.mkdtemp(), "async-agents.db")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "koinii", "serve", "--db", store, "--port", str(port)]
    )
    try:
        asyncio.run(wait_for_the_daemon())
        asyncio.run(conversation())
    finally:
        daemon.terminate()
        daemon.wait(20)


if __name__ == "__main__":
    main()
