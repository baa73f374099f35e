"""One agent in a process of its own, driven from a test.

Run as a script, this file joins a channel over a daemon with the agent's own token and
then calls, for each JSON line read from stdin (`{"move": name, "args": {...}}`), the
`channel.Agent` method of that name; it answers each on stdout with `{"ok": true,
"result": ...}` or `{"ok": false, "error": {kind, message, data}}`. `AgentProcess` is the
test's side: start it, `do` moves, stop it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, is_dataclass
from typing import Any

import koinii
from koinii import Refused
from koinii.channel import agent as channel


class AgentProcess:
    """An agent process (see the module docstring)."""

    def __init__(self, url: str, agent: str, token: str, channel_name: str) -> None:
        self.agent = agent
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.agent_process", url, agent, token, channel_name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        ready = json.loads(self.proc.stdout.readline())
        assert ready == {"ready": agent}, ready

    def do(self, move: str, **args: Any) -> Any:
        """Make a move; returns its result, or raises the refusal it met."""
        self.proc.stdin.write(json.dumps({"move": move, "args": args}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        if not reply["ok"]:
            error = reply["error"]
            raise Refused(error["kind"], error["message"], error["data"])
        return reply["result"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(10)


def _plain(value: Any) -> Any:
    if is_dataclass(value):
        return asdict(value)
    return value


def main(url: str, agent: str, token: str, channel_name: str) -> None:
    me = channel.join(channel.wire(koinii.connect(url, token=token)), channel_name, agent)
    print(json.dumps({"ready": agent}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            result = getattr(me, request["move"])(**request["args"])
            reply = {"ok": True, "result": _plain(result)}
        except Refused as refusal:
            reply = {"ok": False, "error": refusal.to_dict()}
        print(json.dumps(reply, default=str), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
