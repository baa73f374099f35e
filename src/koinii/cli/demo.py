"""`koinii demo`: a real team in separate processes, live, at a pace a person can follow.

It starts a daemon on a temporary SQLite store with a token per agent, then runs a
coordinator, three worker agents and the adjudication service (`koinii adjudicate`) as
separate processes. They join a channel; Atlas asks which database production uses — a
pattern question, `(usesDatabase ProdCluster ?db)`; Boreas answers PostgreSQL16 and
justifies it; Ciel answers SQLite; Atlas endorses Boreas's answer; Ciel disputes it;
the three vote, and once three have voted the adjudicator settles the dispute by
majority; Atlas accepts the upheld answer, Ciel withdraws hers; each worker wraps its
session and the coordinator permeates the wraps. The terminal tells the conversation
from the change feed as it happens (`koinii.channel.narrator`), then a summary. Nothing is left
running afterwards — unless `keep`: then the daemon and its store stay, in their own
session (a Ctrl-C in the shell does not stop them), and the demo prints the web view's
address, a reader token to sign in with, an operator token for the CLI, and how to stop
it, so a newcomer can explore what the team did (`koinii demo --keep`).

Each role is one function (`coordinator`, `atlas`, `boreas`, `ciel`) run in its own
process by `python -m koinii.cli.demo ROLE PACE URL TOKEN…`; they synchronise only through
the knowledge base, like real agents. `--pace` is the pause before each move (0 in CI).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from koinii import wraps
from koinii.channel import agent as channel
from koinii.channel import follow
from koinii.channel.narrator import Narrator
from koinii.client.sync import connect
from koinii.operations import invoker
from koinii.server.tokens import add_token

CHANNEL = "CxTeam"
QUESTION = "(usesDatabase ProdCluster ?db)"
SESSION = "session:demo:lead"
PROJECT = "demo"
TEAM = ("AgentAtlas", "AgentBoreas", "AgentCiel")
PRINCIPALS = {
    "AgentLead": "agent",
    "Ops": "operator",
    "Viewer": "reader",
    **{a: "agent" for a in TEAM},
}
TIMEOUT_S = 40.0
DEFAULT_PACE_S = 0.6


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


def _join(url: str, token: str, agent: str) -> channel.Agent:
    return channel.join(channel.wire(connect(url, token=token)), CHANNEL, agent)


def _question(me: channel.Agent) -> int:
    return _until("a question", me.open_queries)[0]["handle"]


def _answer_by(me: channel.Agent, question: int, speaker: str) -> dict[str, Any] | None:
    return next((a for a in me.thread(question)["answers"] if a["speaker"] == speaker), None)


def _disputed(me: channel.Agent, question: int, speaker: str) -> bool:
    answer = _answer_by(me, question, speaker)
    return bool(answer and answer["claim"] and answer["claim"]["disputes"])


def _ruled(me: channel.Agent) -> bool:
    return any(d["ruling"] for d in me.disputes())


def atlas(pace: float, url: str, token: str) -> None:
    me = _join(url, token, "AgentAtlas")
    time.sleep(pace)
    question = me.ask(QUESTION)
    boreas_answer = _until("Boreas's answer", lambda: _answer_by(me, question, "AgentBoreas"))
    _until("Ciel's answer", lambda: _answer_by(me, question, "AgentCiel"))
    time.sleep(pace)
    me.endorse(boreas_answer["handle"])
    _until("Ciel's dispute", lambda: _disputed(me, question, "AgentBoreas"))
    time.sleep(pace)
    me.vote(boreas_answer["handle"], "for")
    _until("the ruling", lambda: _ruled(me))
    time.sleep(pace)
    me.accept(boreas_answer["handle"])
    _wrap(me, notes=["Production uses PostgreSQL 16"], decisions=["Keep ProdCluster on it"])


def boreas(pace: float, url: str, token: str) -> None:
    me = _join(url, token, "AgentBoreas")
    question = _question(me)
    time.sleep(pace)
    answer = me.answer(question, {"?db": "PostgreSQL16"})
    time.sleep(pace)
    me.justify(answer, "MatureReplication")
    _until("Ciel's dispute", lambda: _disputed(me, question, "AgentBoreas"))
    time.sleep(pace)
    me.vote(answer, "for")
    _wrap(me, notes=["Answered the database question"], conventions=["Justify every claim"])


def ciel(pace: float, url: str, token: str) -> None:
    me = _join(url, token, "AgentCiel")
    question = _question(me)
    boreas_answer = _until("Boreas's answer", lambda: _answer_by(me, question, "AgentBoreas"))
    time.sleep(pace)
    mine = me.answer(question, "SQLite")
    _until("Atlas's endorsement", lambda: me.endorsements_of(boreas_answer["claim"]["handle"]))
    time.sleep(pace)
    me.dispute(boreas_answer["handle"])
    time.sleep(pace)
    me.vote(boreas_answer["handle"], "against")
    _until("the ruling", lambda: _ruled(me))
    time.sleep(pace)
    me.withdraw(mine)  # the house has spoken: Ciel takes her answer back
    _wrap(me, notes=["Argued SQLite would do for now"])


def _wrap(me: channel.Agent, **entries: Any) -> None:
    wraps.wrap_session(
        me,
        session_id=f"session:demo:{me.agent}",
        parent_session_id=SESSION,
        project_id=PROJECT,
        **entries,
    )


def coordinator(pace: float, url: str, token: str) -> None:
    lead = _join(url, token, "AgentLead")
    wraps.Coordinators(lead.store).register("AgentLead", project_id=PROJECT, session_id=SESSION)
    _until(
        "three wraps",
        lambda: (
            len(wraps.WrapQueue(lead.store).get_unprocessed_wraps_for_session(SESSION) or []) >= 3
        ),
    )
    time.sleep(pace)
    wraps.permeate(lead, session_id=SESSION)


ROLES: dict[str, Callable[..., None]] = {
    "atlas": atlas,
    "boreas": boreas,
    "ciel": ciel,
    "coordinator": coordinator,
}


# --- the show (the parent process) ------------------------------------------------------


def _port_of(daemon: subprocess.Popen, port_file: str) -> int | None:
    """The port the daemon listens on, from its --port-file once it answers; None before.
    It takes port 0, a port the system chooses: one picked here and handed to it could be
    taken by another process first."""
    if daemon.poll() is not None:
        raise SystemExit(f"demo: the daemon exited with {daemon.returncode}")
    try:
        with open(port_file) as f:
            return int(f.read())
    except FileNotFoundError:
        return None


_STYLE = {
    "question": "bold",
    "answer": "bold",
    "ruling": "bold magenta",
    "withdrawal": "yellow",
    "defeat": "dim",
}


def _shown(told: Any) -> Any:
    """A move's line as rich Text: the agents' words are text, never markup."""
    from rich.text import Text

    style = _STYLE.get(told.kind) or ""
    speaker = told.speaker or ""
    text = told.text
    if speaker and text.startswith(speaker) and told.kind not in ("ruling", "defeat"):
        line = Text.assemble((speaker, "bold"), text[len(speaker) :])
    else:
        line = Text(text, style=style)
    return line.append(f"  #{told.handle}", style="dim") if told.handle else line


def run_demo(pace: float = DEFAULT_PACE_S, *, keep: bool = False, port: int = 0) -> dict[str, Any]:
    """Run the whole demo, narrating to the terminal; returns the summary. Everything it
    started is stopped, whatever happens — but with `keep`, once the team is done, the
    daemon (listening on `port`; 0: a free one) and its folder stay for exploring; the
    summary then says where (`kept`: url, folder, pid, tokens)."""
    from rich.text import Text

    from koinii.cli.terminal import terminal

    console = terminal()
    say = console.print
    started = time.monotonic()
    folder = tempfile.mkdtemp(prefix="koinii-demo-")
    table = os.path.join(folder, "tokens.json")
    tokens = {
        principal: add_token(table, principal, role) for principal, role in PRINCIPALS.items()
    }
    port_file = os.path.join(folder, "port")
    processes: list[subprocess.Popen] = []
    koinii_command = [sys.executable, "-m", "koinii"]
    kept: dict[str, Any] | None = None
    try:
        daemon = subprocess.Popen(
            [
                *koinii_command,
                "serve",
                "--db",
                os.path.join(folder, "demo.db"),
                "--port",
                str(port),
                "--port-file",
                port_file,
                "--tokens",
                table,
            ],
            stdout=subprocess.DEVNULL,
            # kept, it outlives this process: its own session, its own log
            stderr=open(os.path.join(folder, "daemon.log"), "ab") if keep else None,  # noqa: SIM115
            start_new_session=keep,
        )
        processes.append(daemon)
        url = f"http://127.0.0.1:{_until('the daemon', lambda: _port_of(daemon, port_file))}"
        watcher = connect(url, token=tokens["AgentLead"])
        say(
            Text.assemble(
                ("koinii demo", "bold"),
                f": daemon on {url}; a coordinator, three agents and the adjudicator on "
                f"channel {CHANNEL}\n",
            )
        )
        since = watcher.seq
        narrator = Narrator(watcher)
        moves = 0
        done = threading.Event()

        def tail() -> None:
            nonlocal moves
            core = follow.Core(follow.log(since, wait_ms=200))
            for entry in follow.run(core, watcher, stopped=done.is_set):
                for told in narrator.entry(entry):
                    moves += told.added and told.kind not in ("ruling", "defeat")
                    say(_shown(told))

        teller = threading.Thread(target=tail, daemon=True)
        teller.start()
        adjudicator = subprocess.Popen(
            [
                *koinii_command,
                "adjudicate",
                "--channel",
                CHANNEL,
                "--quorum",
                "3",
                "--url",
                url,
                "--token",
                tokens["Ops"],
            ],
            stdout=subprocess.DEVNULL,
        )
        processes.append(adjudicator)

        def start(role: str, principal: str) -> subprocess.Popen:
            command = [sys.executable, "-m", "koinii.cli.demo", role, str(pace), url]
            process = subprocess.Popen([*command, tokens[principal]])
            processes.append(process)
            return process

        # The lead registers its session before any worker can wrap into it: a session
        # some other agent's wraps already name is no longer free to claim (koinii/
        # foreign-session), so on a busy machine a late lead would be locked out.
        agents = [start("coordinator", "AgentLead")]
        lead = wraps.Coordinators(watcher)
        _until("the coordinator", lambda: lead.get("AgentLead") or agents[0].poll() is not None)
        agents += [start(name[5:].lower(), name) for name in TEAM]
        codes = [p.wait(TIMEOUT_S + 5) for p in agents]
        time.sleep(0.3)  # let the tail catch the last writes
        done.set()
        teller.join(5)
        summary = _summary(watcher, moves, time.monotonic() - started, codes)
        _print_summary(console, summary)
        if keep:
            processes.remove(daemon)
            kept = {"url": url, "folder": folder, "pid": daemon.pid, "tokens": tokens}
            summary["kept"] = kept
            _print_kept(console, kept)
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
        if kept is None:
            shutil.rmtree(folder, ignore_errors=True)


def _summary(store: Any, moves: int, seconds: float, codes: list[int]) -> dict[str, Any]:
    read = invoker(store)
    [question] = read("conversation.questions", channel=CHANNEL) or [None]
    found = read("conversation.disputes", channel=CHANNEL)
    ruled = [d for d in found if d["ruling"]]
    queue = wraps.WrapQueue(store)
    return {
        "moves": moves,
        "question": question["state"] if question else None,
        "disputes": len(found),
        "ballots": ruled[0]["tally"] if ruled else {},
        "ruling": ruled[0]["ruling"]["sentence"] if ruled else None,
        "open_disputes": sum(d["state"] != "resolved" for d in found),
        "wraps": len(queue.get_unprocessed_wraps_for_project(PROJECT) or []),
        "seconds": round(seconds, 1),
        "exit_codes": codes,
    }


def _print_summary(console: Any, summary: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="\nsummary", show_header=False)
    table.add_row("moves on the channel", str(summary["moves"]))
    table.add_row("the question", summary["question"] or "none")
    table.add_row("disputes", str(summary["disputes"]))
    ballots = summary["ballots"]
    table.add_row("ballots", f"{ballots.get('for', 0)} for, {ballots.get('against', 0)} against")
    table.add_row("ruling (AgentMajority)", summary["ruling"] or "none")
    table.add_row("disputes still open", str(summary["open_disputes"]))
    table.add_row("wraps left unprocessed", str(summary["wraps"]))
    table.add_row("seconds", f"{summary['seconds']:.1f}")
    console.print(table)


def _print_kept(console: Any, kept: dict[str, Any]) -> None:
    """Where the kept daemon is and how to look, connect and stop it."""
    from rich.text import Text

    url, folder, tokens = kept["url"], kept["folder"], kept["tokens"]
    lines = [
        ("\nThe demo's daemon is still running", "bold"),
        f" (pid {kept['pid']}), its store and tokens in {folder}:\n",
        f"  the web view   {url}/  (sign in with the reader token)\n",
        f"  reader token   {tokens['Viewer']}\n",
        f"  from a shell   export KOINII_URL={url} KOINII_TOKEN={tokens['Ops']}  (an operator)\n",
        f"                 koinii questions -c {CHANNEL}; koinii disputes -c {CHANNEL}; "
        "koinii tail --since 0\n",
        f"  stop it        kill {kept['pid']}; rm -r {folder}",
    ]
    console.print(Text.assemble(*lines))


if __name__ == "__main__":
    role, pace, url, *secrets = sys.argv[1:]
    ROLES[role](float(pace), url, *secrets)
