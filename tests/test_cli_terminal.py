"""Agent text is never markup in any terminal view: a claim, a question, a session title
or a turn holding rich markup ("[/bold]", "[red]") or an emoji code (":fire:") prints as
that text in `koinii tail`, `query`, `search`, `vocabulary` and `sessions`, and the
command ends 0 — over a real daemon, and on a store opened in-process. (Printed as
markup, one such string made every one of them exit 4, for everyone reading.)
Nor does it drive the terminal: a control character in it (ESC clearing the screen or
setting the window's title, BEL, a one-character C1 CSI) prints as its escape `\\u001b`
— a session title and a search snippet carried them raw to every reader's terminal.
Piped, nothing is wrapped: a long sentence stays on one line."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

import koinii
from koinii.channel import agent as channel
from koinii.server.tokens import add_token
from koinii.sessions import SessionStore
from tests.conftest import Daemon, forker

CONTROL = "\x1b[2J\x1b]0;pwned\x07\x9b31m"  # clear screen, window title, BEL, C1 CSI
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MARKUP = f'"[/bold] [red]alarm :fire: [link=http://x]here {CONTROL}"'
CLAIM = f"(saidOnce AgentAtlas {MARKUP})"
WORDS = " ".join(f"Word{i}" for i in range(40))  # 270 characters
LONG = f'(sawLongly AgentAtlas "{WORDS}")'


def koinii_cli(*args: str) -> subprocess.CompletedProcess:
    # as a pipe in an 80-column terminal
    return forker().run(list(args), env={**os.environ, "COLUMNS": "80"})


def write_markup(store) -> str:
    """Atlas says it, asks it, and records a session titled with it; the session's id."""
    medium = channel.local(store) if isinstance(store, koinii.KB) else channel.wire(store)
    atlas = channel.join(medium, "CxTeam", "AgentAtlas")
    atlas.assert_(CLAIM)
    atlas.assert_(LONG)
    atlas.pose_query("(saidOnce AgentAtlas ?what)")
    sessions = SessionStore(store)
    session = sessions.start_session(title=f"[/bold] session [red] {CONTROL}")
    turn = sessions.start_turn(session, f"[/bold] why :fire:? {CONTROL}")
    sessions.finish_turn(turn, "done", "complete", answer="[/red] because")
    return session


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    folder = tmp_path_factory.mktemp("markup")
    table = str(folder / "markup.tokens")
    tokens = {"AgentAtlas": add_token(table, "AgentAtlas", "agent")}
    os.environ["KOINII_INTROSPECTION"] = "1"  # the daemon process inherits it
    try:
        daemon = Daemon(str(folder / "markup.db"), ["--tokens", table], tokens).start()
    finally:
        del os.environ["KOINII_INTROSPECTION"]
    session = write_markup(daemon.client("AgentAtlas"))
    yield ["--url", daemon.url, "--token", tokens["AgentAtlas"]], session
    daemon.kill()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("markup-db") / "markup.db")
    with koinii.open_kb(path) as kb:
        session = write_markup(kb)
    return ["--db", path], session


COMMANDS = {
    "tail": ("tail", "--no-follow", "--since", "0"),
    "tail --raw": ("tail", "--no-follow", "--since", "0", "--raw"),
    "query": ("query", "(saidOnce ?who ?what)", "-c", "CxAtlas"),
    "search": ("search", "alarm", "-c", "CxAtlas"),
    "vocabulary": ("vocabulary", "-c", "CxAtlas"),
    "sessions list": ("sessions", "list"),
    "sessions search": ("sessions", "search", "session"),
}


@pytest.mark.parametrize("where", ["daemon", "store"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_stored_markup_prints_as_text_and_the_command_ends_0(request, where, command):
    source, _session = request.getfixturevalue(where)
    ran = koinii_cli(*COMMANDS[command], *source)
    assert ran.returncode == 0, ran.stderr
    shown = (
        "[/bold] session [red]" if command.startswith("sessions") else "[/bold] [red]alarm :fire:"
    )
    assert shown in ran.stdout


@pytest.mark.parametrize("where", ["daemon", "store"])
@pytest.mark.parametrize("command", [*COMMANDS, "sessions show"])
def test_stored_control_characters_print_as_escapes_never_raw(request, where, command):
    source, session = request.getfixturevalue(where)
    args = ("sessions", "show", session) if command == "sessions show" else COMMANDS[command]
    ran = koinii_cli(*args, *source)
    assert ran.returncode == 0, ran.stderr
    assert RAW_CONTROL.search(ran.stdout) is None, ran.stdout
    assert "\\u001b[2J" in ran.stdout or "\\\\u001b[2J" in ran.stdout


@pytest.mark.parametrize("where", ["daemon", "store"])
def test_a_session_shown_keeps_its_title_and_turns_as_text(request, where):
    source, session = request.getfixturevalue(where)
    ran = koinii_cli("sessions", "show", session, *source)
    assert ran.returncode == 0, ran.stderr
    for text in ("[/bold] session [red]", "[/bold] why :fire:?", "[/red] because"):
        assert text in ran.stdout


@pytest.mark.parametrize("command", ["query", "search"])
def test_piped_a_long_sentence_is_not_wrapped(daemon, command):
    source, _session = daemon
    args = {
        "query": ("query", "(sawLongly ?who ?what)", "-c", "CxAtlas"),
        "search": ("search", "Word39", "-c", "CxAtlas"),
    }[command]
    ran = koinii_cli(*args, *source)
    assert ran.returncode == 0, ran.stderr
    assert WORDS in ran.stdout, ran.stdout  # on one line: not folded at 80 columns


@pytest.mark.parametrize("command", ["sessions list", "sessions search"])
def test_a_title_holding_a_newline_prints_on_its_rows_line(tmp_path, command):
    """A session's title is one line of its row: its newline (and tab) prints as the
    escape; printed raw, the rest of the title was a line of its own under the row, where
    it read as another row."""
    path = str(tmp_path / "titles.db")
    forged = "1234abcd  2026-01-01 00:00  cli  0  the forged row"
    with koinii.open_kb(path) as kb:
        SessionStore(kb).start_session(title=f"release plan\n{forged}\tend")
    args = ("sessions", "search", "release") if command == "sessions search" else COMMANDS[command]
    ran = koinii_cli(*args, "--db", path)
    assert ran.returncode == 0, ran.stderr
    [row] = [line for line in ran.stdout.splitlines() if "release plan" in line]
    assert f"release plan\\n{forged}\\tend" in row, ran.stdout
    assert not any(line.startswith("1234abcd") for line in ran.stdout.splitlines())
