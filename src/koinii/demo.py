"""`koinii demo`: a real team in separate processes, live, in under 30 seconds.

It starts a daemon on a temporary SQLite store with a token per agent, then runs a
coordinator and three worker agents as separate processes. They join a channel; Atlas
asks which database production should use; Boreas answers and makes the claim, with a
justification; Atlas endorses it; Ciel disputes it; the three vote, and the dispute is
settled by a majority vote over the wire (the ballots carry the principals the daemon
recorded, so they count as attested); each worker wraps its session; the coordinator
permeates the wraps. The terminal shows the conversation from the change feed as it
happens, then a summary. Nothing is left running afterwards.

Each role is one function (`coordinator`, `atlas`, `boreas`, `ciel`) run in its own
process by `python -m koinii.demo ROLE URL TOKEN…`; they synchronise only through the
knowledge base, like real agents.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import koinii
from koinii import adjudication, channel, wraps
from koinii.server.tokens import add_token
from koinii.terms import Sym, parse, show

CHANNEL = "CxTeam"
QUESTION = "WhichDatabaseForProd"
CLAIM = "(usesDatabase ProdCluster PostgreSQL16)"
SESSION = "session:demo:lead"
PROJECT = "demo"
TEAM = ("AgentAtlas", "AgentBoreas", "AgentCiel")
PRINCIPALS = {"AgentLead": "agent", "AgentMajority": "agent", **{a: "agent" for a in TEAM}}
TIMEOUT_S = 25.0


# --- the roles (each in its own process) -------------------------------------------------


def _until(what: str, found: Callable[[], Any]) -> Any:
    """Wait until the KB shows something (agents synchronise through the store only)."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"demo: gave up waiting for {what}")


def _claim_handle(agent: channel.Agent) -> int:
    found = agent.store.sentexes_matching(CLAIM, "CxBoreas")
    return found[0].handle if found else 0


def _ballots(store: Any, target: int) -> int:
    return sum(adjudication.tally(store, target).values())


def atlas(url: str, token: str) -> None:
    me = channel.join(channel.wire(koinii.connect(url, token=token)), CHANNEL, "AgentAtlas")
    query = me.pose_query(QUESTION)
    _until("an answer", lambda: me.answers_to(query))
    claim = _until("Boreas's claim", lambda: _claim_handle(me))
    me.endorse(claim)
    _until(
        "Ciel's dispute",
        lambda: me.store.sentexes_matching(f"(disputes ?a (sentexHandle {claim}))", "?c"),
    )
    me.vote("for", claim)
    _wrap(
        me, notes=["Production uses PostgreSQL 16"], decisions=["Keep ProdCluster on PostgreSQL16"]
    )


def boreas(url: str, token: str) -> None:
    me = channel.join(channel.wire(koinii.connect(url, token=token)), CHANNEL, "AgentBoreas")
    [query] = _until("a question", me.open_queries)
    me.answer("PostgreSQL16", query.handle)
    claim = me.assert_(CLAIM)
    me.justify("MatureReplication", claim)
    _until(
        "Ciel's dispute",
        lambda: me.store.sentexes_matching(f"(disputes ?a (sentexHandle {claim}))", "?c"),
    )
    me.vote("for", claim)
    _wrap(me, notes=["Answered the database question"], conventions=["Justify every claim"])


def ciel(url: str, token: str) -> None:
    me = channel.join(channel.wire(koinii.connect(url, token=token)), CHANNEL, "AgentCiel")
    claim = _until("Boreas's claim", lambda: _claim_handle(me))
    _until("Atlas's endorsement", lambda: me.endorsements_of(claim))
    me.dispute(claim)
    me.vote("against", claim)
    _wrap(me, notes=["Argued SQLite would do for now"])


def _wrap(me: channel.Agent, **entries: Any) -> None:
    wraps.wrap_session(
        me,
        session_id=f"session:demo:{me.agent}",
        parent_session_id=SESSION,
        project_id=PROJECT,
        **entries,
    )


def coordinator(url: str, token: str, majority_token: str) -> None:
    lead = channel.join(channel.wire(koinii.connect(url, token=token)), CHANNEL, "AgentLead")
    wraps.Coordinators(lead.store).register("AgentLead", project_id=PROJECT, session_id=SESSION)
    majority = koinii.connect(url, token=majority_token)  # rules as AgentMajority
    claim = _until("a claim", lambda: _claim_handle(lead))
    _until("three ballots", lambda: _ballots(lead.store, claim) >= 3)
    [clash] = _until("the dispute", lambda: lead.store.contradictions(CHANNEL))
    adjudication.resolve_by_majority(majority, clash["handles"], claim, CHANNEL)
    _until(
        "three wraps",
        lambda: (
            len(wraps.WrapQueue(lead.store).get_unprocessed_wraps_for_session(SESSION) or []) >= 3
        ),
    )
    wraps.permeate(lead, session_id=SESSION)


ROLES: dict[str, Callable[..., None]] = {
    "atlas": atlas,
    "boreas": boreas,
    "ciel": ciel,
    "coordinator": coordinator,
}


# --- the show (the parent process) ------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ACTS = {
    "queries": "asks",
    "answers": "answers",
    "endorses": "endorses",
    "justifies": "justifies",
    "disputes": "disputes",
    "votesFor": "votes for",
    "votesAgainst": "votes against",
}


class Narrator:
    """Turns change-log entries into the conversation, replies attached to their targets."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.sentences: dict[int, str] = {}
        self.moves = 0

    def entry(self, entry: dict[str, Any]) -> None:
        if entry["op"] == "wraps.mark_processed":
            wrap = (entry.get("records") or {}).get("wrap_id", "a wrap")
            self.say(f"[bold cyan]AgentLead permeates[/bold cyan] {wrap}")
        for change in entry["added"]:
            self.sentences[change["handle"]] = change["sentence"]
            line = self.describe(change)
            if line:
                self.say(line)
        for change in entry["removed"]:
            if change.get("reason") == "defeated":
                self.say(f"   [dim]✗ no longer believed: {change['sentence']} (defeated)[/dim]")

    def describe(self, change: dict[str, Any]) -> str | None:
        term = parse(change["sentence"])
        functor = term[0].name if type(term[0]) is Sym else ""
        context = change["context"]
        if functor in ACTS:
            self.moves += 1
            speaker, rest = term[1].name, list(term[2:])
            target = next(
                (x for x in rest if type(x) is tuple and x[0] == Sym("sentexHandle")), None
            )
            said = " ".join(show(x) for x in rest if x is not target)
            line = f"[bold]{speaker}[/bold] {ACTS[functor]} {said}".rstrip()
            if target is not None:
                line += f"  [dim]↳ re #{target[1]} {self.sentences.get(target[1], '')}[/dim]"
            return line
        if functor in ("memoryNote", "memoryDecision", "memoryConvention"):
            return f"[bold]{term[1].name}[/bold] wraps: {functor[6:].lower()} {show(term[2])}"
        if context == "CxMajority" and functor != "agentContext":
            return f"[bold magenta]AgentMajority rules[/bold magenta] {change['sentence']}"
        if functor == "not" and context in ("CxAtlas", "CxBoreas", "CxCiel"):
            return f"[bold]Agent{context[2:]}[/bold] rebuts with {change['sentence']}"
        if context in ("CxAtlas", "CxBoreas", "CxCiel") and functor not in (
            "agentContext",
            "contested",
        ):
            self.moves += 1
            handle = change["handle"]
            return (
                f"[bold]Agent{context[2:]}[/bold] claims {change['sentence']}  [dim]#{handle}[/dim]"
            )
        return None


def run_demo() -> dict[str, Any]:
    """Run the whole demo, narrating to the terminal; returns the summary. Everything it
    started is stopped, whatever happens."""
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    say = console.print
    started = time.monotonic()
    folder = tempfile.mkdtemp(prefix="koinii-demo-")
    table = os.path.join(folder, "tokens.json")
    tokens = {
        principal: add_token(table, principal, role) for principal, role in PRINCIPALS.items()
    }
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []
    try:
        daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "koinii",
                "serve",
                "--db",
                os.path.join(folder, "demo.db"),
                "--port",
                str(port),
                "--tokens",
                table,
            ],
            stdout=subprocess.DEVNULL,
        )
        processes.append(daemon)
        watcher = koinii.connect(url, token=tokens["AgentLead"])
        _until("the daemon", lambda: _healthy(watcher))
        say(
            f"[bold]koinii demo[/bold]: daemon on {url}, "
            f"a coordinator and three agents, channel {CHANNEL}\n"
        )
        since = watcher.seq
        narrator = Narrator(say)
        done = threading.Event()

        def tail() -> None:
            nonlocal since
            while not done.is_set():
                reply = watcher.changes(since=since, limit=500, wait_ms=200)
                for entry in reply["entries"]:
                    narrator.entry(entry)
                    since = entry["seq"]

        teller = threading.Thread(target=tail, daemon=True)
        teller.start()
        agents = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "koinii.demo",
                    "coordinator",
                    url,
                    tokens["AgentLead"],
                    tokens["AgentMajority"],
                ]
            ),
            *(
                subprocess.Popen(
                    [sys.executable, "-m", "koinii.demo", name[5:].lower(), url, tokens[name]]
                )
                for name in TEAM
            ),
        ]
        processes.extend(agents)
        codes = [p.wait(TIMEOUT_S + 5) for p in agents]
        time.sleep(0.3)  # let the tail catch the last writes
        done.set()
        teller.join(5)
        summary = _summary(watcher, narrator, time.monotonic() - started, codes)
        _print_summary(console, summary)
        return summary
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        shutil.rmtree(folder, ignore_errors=True)


def _healthy(client: koinii.Client) -> bool:
    try:
        return client.health()["ok"]
    except koinii.Unavailable:
        return False


def _summary(store: Any, narrator: Narrator, seconds: float, codes: list[int]) -> dict[str, Any]:
    claim = store.sentexes_matching(CLAIM, "CxBoreas")
    rulings = store.sentexes_matching(CLAIM, "CxMajority")
    queue = wraps.WrapQueue(store)
    return {
        "moves": narrator.moves,
        "disputes": len(store.sentexes_matching("(disputes ?a ?t)", "?c")),
        "ballots": adjudication.tally(store, claim[0].handle) if claim else {},
        "ruling": rulings[0].text if rulings else None,
        "open_disputes": len(store.contradictions(CHANNEL)),
        "wraps": len(queue.get_unprocessed_wraps_for_project(PROJECT) or []),
        "seconds": round(seconds, 1),
        "exit_codes": codes,
    }


def _print_summary(console: Any, summary: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="\nsummary", show_header=False)
    table.add_row("moves on the channel", str(summary["moves"]))
    table.add_row("disputes", str(summary["disputes"]))
    ballots = summary["ballots"]
    table.add_row("ballots", f"{ballots.get('for', 0)} for, {ballots.get('against', 0)} against")
    table.add_row("ruling (AgentMajority)", summary["ruling"] or "none")
    table.add_row("disputes still open", str(summary["open_disputes"]))
    table.add_row("wraps left unprocessed", str(summary["wraps"]))
    table.add_row("seconds", f"{summary['seconds']:.1f}")
    console.print(table)


if __name__ == "__main__":
    role, url, *secrets = sys.argv[1:]
    ROLES[role](url, *secrets)
