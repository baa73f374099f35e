"""Two agents in two processes, one daemon: one asks which database production uses (a
pattern question), the other answers it, and the first sees the answer — and the claim
it carries — arrive through its subscription, then accepts it.

Run: python examples/two_agents.py
(it starts a daemon on a free port with a temporary store, runs both agents as separate
processes, and stops everything when the conversation is over)
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

import koinii
from koinii import channel, speech

CHANNEL = "CxDeploy"
QUESTION = "(usesDatabase ProdCluster ?db)"


def asker(url: str) -> None:
    atlas = channel.join(channel.wire(koinii.connect(url)), CHANNEL, "AgentAtlas")
    answered = threading.Event()

    def on_answer(event: koinii.Event) -> None:
        for change in event.added:
            who = change["bindings"]["?who"]
            claim = speech.answer_content(koinii.parse(change["sentence"]))
            print(f"[atlas]  heard {who} answer: {koinii.show(claim)}", flush=True)
            atlas.accept(change["handle"])
            answered.set()

    sub = atlas.subscribe("(answers ?who ?what ?query)", CHANNEL, on_answer)
    query = atlas.ask(QUESTION)
    print(f"[atlas]  asked {QUESTION} as sentex {query}", flush=True)
    if not answered.wait(20):
        sys.exit("[atlas]  no answer within 20 s")
    sub.stop()
    print(f"[atlas]  the question is {atlas.thread(query)['state']}", flush=True)


def answerer(url: str) -> None:
    boreas = channel.join(channel.wire(koinii.connect(url)), CHANNEL, "AgentBoreas")
    done = threading.Event()

    def on_query(event: koinii.Event) -> None:
        for change in event.added:
            print(f"[boreas] saw {change['sentence']}", flush=True)
            boreas.answer(change["handle"], {"?db": "PostgreSQL14"})
            done.set()

    sub = boreas.subscribe("(queries ?who ?question)", CHANNEL, on_query)
    print("[boreas] listening on", CHANNEL, flush=True)
    for query in boreas.open_queries():  # a question asked before we joined: read the KB
        on_query(koinii.Event(0, [{"sentence": query["sentence"], "handle": query["handle"]}]))
    if not done.wait(20):
        sys.exit("[boreas] no query within 20 s")
    sub.stop()


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    store = os.path.join(tempfile.mkdtemp(), "two-agents.db")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "koinii", "serve", "--db", store, "--port", str(port)]
    )
    try:
        client = koinii.connect(url, timeout=2)
        for _ in range(200):  # wait for the daemon to answer /health
            try:
                client.health()
                break
            except koinii.Unavailable:
                time.sleep(0.05)
        agents = [
            subprocess.Popen([sys.executable, __file__, "answerer", url]),
            subprocess.Popen([sys.executable, __file__, "asker", url]),
        ]
        codes = [agent.wait(60) for agent in agents]
        print("conversation over; exit codes", codes)
        sys.exit(max(codes))
    finally:
        daemon.terminate()
        daemon.wait(20)


if __name__ == "__main__":
    if len(sys.argv) == 3:
        {"asker": asker, "answerer": answerer}[sys.argv[1]](sys.argv[2])
    else:
        main()
