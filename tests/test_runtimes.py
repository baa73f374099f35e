"""Koinii inside Claude Code and Codex CLI (docs/runtimes.md): `koinii hooks install`
merges and takes out byte for byte, and the hook commands — real subprocesses, fed the
runtimes' documented payloads — make the runtime's session a Koinii session under its
id, import its transcript as it grows (the same as one import of the whole), attach
sub-agents to their parents, file wraps the coordinator permeates, hand news back at
Stop when asked to, and leave the agent unharmed when the daemon is down.

The transcripts are the repository's samples, ones written here, and — when the
workspace has them — the real ones in ../shared/data/transcripts (skipped, saying so,
when not)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import koinii
from koinii.channel import agent as channel
from koinii.runtimes import settings
from koinii.runtimes.hooks import koinii_id
from koinii.sessions import Introspection, SessionStore
from koinii.sessions.importing import import_paths
from koinii.wraps import WrapQueue, permeate
from tests.conftest import RECORDED_CWD, forker

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

SAMPLES = pathlib.Path(__file__).parent / "data" / "sessions"
TOOLS = SAMPLES / "claude-code_v2.1.38_sample_tools.jsonl"
TOOLS_SESSION = "8c2f4a91-3e5d-4b7c-a0f2-6d19e8b7c354"
ROLLOUT = next(SAMPLES.glob("codex_rollout-*.jsonl"))
THREAD = "019c8bfe-6d7a-7f00-9a1b-2c3d4e5f6a7b"
SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
THEIRS = sorted(SHARED.glob("claude-code_*.jsonl"))
NO_SHARED = (
    "the real Claude Code transcripts are not here (../shared/data/transcripts beside the "
    "repository): the hooks ran on the repository's own samples only"
)
HOOK_TIMEOUT_S = 60


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A state directory, a HOME and a CODEX_HOME of the test's own, for this process
    and the hook subprocesses it starts."""
    for name, folder in (
        ("KOINII_STATE_DIR", "state"),
        ("HOME", "home"),
        ("CODEX_HOME", "codex"),
    ):
        (tmp_path / folder).mkdir()
        monkeypatch.setenv(name, str(tmp_path / folder))
    for name in ("KOINII_URL", "KOINII_TOKEN", "KOINII_DB", "KOINII_AGENT", "KOINII_CHANNEL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def hook(*args: str, stdin: str = "", env: dict[str, str] | None = None):
    """Run `koinii hook …` as the runtime would: a process of its own (forked from the
    zygote, tests/forks.py), the payload on stdin."""
    return forker().run(
        ["hook", *args], input=stdin, timeout=HOOK_TIMEOUT_S, env={**os.environ, **(env or {})}
    )


def claude(event: str, payload: dict, daemon, *flags: str, env=None):
    """A Claude Code command hook: the documented stdin of `event`."""
    body = {"hook_event_name": event, "permission_mode": "default", **payload}
    done = hook("claude", event, "--url", daemon.url, *flags, stdin=json.dumps(body), env=env)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def turns_of(client, session_id):
    read = Introspection(client).read_session(session_id)
    assert read["session"] is not None, f"no session {session_id}"
    return [
        (t["user_request"], t["answer"], t["outcome"], t["iteration_count"])
        for t in read["session"]["turns"]
    ]


def write_lines(path: pathlib.Path, lines: list[str]) -> None:
    path.write_text("".join(lines))


def record(kind, uuid, parent, content, session="s-1", **extra):
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message.update({"id": extra.pop("message_id"), "model": "m", "usage": {"output_tokens": 1}})
    return (
        json.dumps(
            {
                "type": kind,
                "uuid": uuid,
                "parentUuid": parent,
                "sessionId": session,
                "cwd": RECORDED_CWD,
                "timestamp": f"2026-01-01T00:00:{int(uuid.split('-')[-1]):02d}Z",
                "message": message,
                **extra,
            }
        )
        + "\n"
    )


# --- install, uninstall, status --------------------------------------------------------------


ODD = (  # a settings file of the user's, formatted as no JSON library writes it
    b'{"permissions":{"allow":["Bash(ls)"]},\n "hooks": {"Stop": '
    b'[{"hooks": [{"type": "command", "command": "echo mine"}]}]}}'
)


@pytest.mark.parametrize("existing", [None, ODD], ids=["no-file", "a-file-of-its-own"])
def test_claude_install_twice_is_once_and_uninstall_restores_byte_for_byte(home, existing):
    project = home / "project"
    project.mkdir()
    settings_file = project / ".claude" / "settings.json"
    if existing is not None:
        settings_file.parent.mkdir()
        settings_file.write_bytes(existing)
    options = settings.Options(channel="CxDeploy", command="koinii")
    first = settings.install_claude(options, "project", project)
    assert first["installed"] and sorted(first["hooks"]) == sorted(settings.CLAUDE_EVENTS)
    once = settings_file.read_bytes(), (project / ".mcp.json").read_bytes()
    second = settings.install_claude(options, "project", project)
    assert second["wrote"] == []
    assert (settings_file.read_bytes(), (project / ".mcp.json").read_bytes()) == once
    data = json.loads(once[0])
    if existing is not None:  # what was there stays, first
        assert data["permissions"] == {"allow": ["Bash(ls)"]}
        assert data["hooks"]["Stop"][0]["hooks"][0]["command"] == "echo mine"
    assert data["hooks"]["Stop"][-1]["hooks"][0] == {
        "type": "command",
        "command": "koinii hook claude Stop --channel CxDeploy",
        "timeout": settings.HOOK_TIMEOUT_S,
    }
    server = json.loads(once[1])["mcpServers"]["koinii"]
    assert server["args"] == ["mcp", "--channel", "CxDeploy"]
    assert "KOINII_TOKEN" not in json.dumps(json.loads(once[1]))
    settings.uninstall_claude("project", project)
    if existing is None:
        assert sorted(p.name for p in project.iterdir()) == []
    else:
        assert settings_file.read_bytes() == existing
        assert not (project / ".mcp.json").exists()
    assert not settings.status_claude("project", project)["installed"]


def test_claude_user_scope_and_an_edit_after_install_keeps_the_edit(home):
    user = home / "home" / ".claude" / "settings.json"
    user.parent.mkdir()
    user.write_text('{"model": "opus"}\n')
    settings.install_claude(settings.Options(command="koinii"), "user")
    assert settings.status_claude("user")["installed"]
    edited = json.loads(user.read_text())
    edited["theme"] = "dark"  # the user changes the file after install
    user.write_text(json.dumps(edited, indent=2) + "\n")
    settings.uninstall_claude("user")
    assert json.loads(user.read_text()) == {"model": "opus", "theme": "dark"}


def test_claude_install_refuses_a_settings_file_it_cannot_read_and_leaves_it(home):
    project = home / "project"
    (project / ".claude").mkdir(parents=True)
    broken = project / ".claude" / "settings.json"
    broken.write_text('{"hooks": [')
    with pytest.raises(koinii.Refused) as refused:
        settings.install_claude(settings.Options(), "project", project)
    assert refused.value.kind == "runtime-settings" and "not valid JSON" in refused.value.message
    assert broken.read_text() == '{"hooks": ['


CONFIG = b'model = "o3"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"'  # no final newline


@pytest.mark.parametrize("existing", [None, CONFIG], ids=["no-file", "a-file-of-its-own"])
def test_codex_install_twice_is_once_and_uninstall_restores_byte_for_byte(home, existing):
    config = home / "codex" / "config.toml"
    if existing is not None:
        config.write_bytes(existing)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "koinii",
            "hooks",
            "install",
            "codex",
            "--channel",
            "CxDeploy",
            "--command",
            "koinii",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=HOOK_TIMEOUT_S,
        check=True,
    )
    assert json.loads(result.stdout)["installed"]
    once = config.read_bytes()
    settings.install_codex(settings.Options(channel="CxDeploy", command="koinii"))
    assert config.read_bytes() == once
    import tomllib

    parsed = tomllib.loads(once.decode())
    assert parsed["notify"] == ["koinii", "hook", "codex", "--channel", "CxDeploy"]
    assert parsed["mcp_servers"]["koinii"]["args"] == ["mcp", "--channel", "CxDeploy"]
    if existing is not None:
        assert parsed["model"] == "o3" and parsed["mcp_servers"]["docs"]["command"] == "docs-mcp"
    status = subprocess.run(
        [sys.executable, "-m", "koinii", "hooks", "status", "codex"],
        capture_output=True,
        text=True,
        timeout=HOOK_TIMEOUT_S,
        check=True,
    )
    assert "installed: yes" in status.stdout
    settings.uninstall_codex()
    assert (config.read_bytes() if config.exists() else None) == existing


def test_codex_install_refuses_a_notify_of_its_own_and_an_edit_keeps_its_edit(home):
    config = home / "codex" / "config.toml"
    config.write_text('notify = ["notify-send", "done"]\n')
    with pytest.raises(koinii.Refused) as refused:
        settings.install_codex(settings.Options())
    assert refused.value.kind == "runtime-settings" and "notify" in refused.value.message
    assert config.read_text() == 'notify = ["notify-send", "done"]\n'
    config.write_text('model = "o3"\n')
    settings.install_codex(settings.Options(channel="CxDeploy", command="koinii"))
    config.write_text(config.read_text() + 'approval_policy = "never"\n')
    settings.uninstall_codex()
    assert config.read_text() == 'model = "o3"\napproval_policy = "never"\n'


# --- the hooks, against a real daemon ---------------------------------------------------------


def test_a_claude_session_is_a_koinii_session_under_its_id_imported_as_it_grows(home, start_daemon):
    daemon = start_daemon()
    folder = home / "home" / ".claude" / "projects" / "-home-dev-shop"
    folder.mkdir(parents=True)
    transcript = folder / f"{TOOLS_SESSION}.jsonl"
    lines = TOOLS.read_text().splitlines(keepends=True)
    base = {"session_id": TOOLS_SESSION, "transcript_path": str(transcript), "cwd": str(home)}
    write_lines(transcript, [])
    said = json.loads(
        claude("SessionStart", {**base, "source": "startup"}, daemon, "--channel", "CxShop")
    )
    context = said["hookSpecificOutput"]["additionalContext"]
    assert said["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert TOOLS_SESSION in context and "CxShop" in context
    with daemon.client() as client:
        assert Introspection(client).get_session(TOOLS_SESSION)["id"] == TOOLS_SESSION
        # the transcript grows turn by turn; each Stop imports what is there
        for cut in (len(lines) // 3, 2 * len(lines) // 3, len(lines)):
            write_lines(transcript, lines[:cut])
            assert claude("Stop", {**base, "stop_hook_active": False}, daemon) == ""
        assert claude("Stop", {**base, "stop_hook_active": False}, daemon) == ""  # no growth
        grown = turns_of(client, TOOLS_SESSION)
    with koinii.open_kb() as kb:  # one import of the whole file, elsewhere
        (report,) = import_paths(SessionStore(kb), [TOOLS])
        assert turns_of(kb, report["session_id"]) == grown
    assert len(grown) == 3


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, id=p.name[:40]) for p in THEIRS]
    or [pytest.param(None, marks=pytest.mark.skip(NO_SHARED), id="shared")],
)
def test_real_transcripts_imported_by_stop_equal_a_one_shot_import(home, start_daemon, path):
    daemon = start_daemon()
    lines = path.read_text().splitlines(keepends=True)
    ids = [json.loads(line).get("sessionId") for line in lines if '"sessionId"' in line]
    session = max(set(ids), key=ids.count)
    transcript = home / f"{session}.jsonl"
    base = {"session_id": session, "transcript_path": str(transcript), "cwd": str(home)}
    for cut in (len(lines) // 2, len(lines)):
        write_lines(transcript, lines[:cut])
        claude("Stop", {**base, "stop_hook_active": False}, daemon)
    with daemon.client() as client:
        grown = turns_of(client, session)
        assert Introspection(client).list_sessions()[0]["id"] == session
    with koinii.open_kb() as kb:
        (report,) = import_paths(SessionStore(kb), [path])
        assert turns_of(kb, report["session_id"]) == grown and grown


def agent_transcript(path: pathlib.Path, parent: str, agent: str) -> None:
    write_lines(
        path,
        [
            record(
                "user", "0-1", None, "find the flaky test", parent, isSidechain=True, agentId=agent
            ),
            record(
                "assistant",
                "0-2",
                "0-1",
                [{"type": "text", "text": "test_retry is flaky"}],
                parent,
                message_id="m1",
                isSidechain=True,
                agentId=agent,
            ),
        ],
    )


def test_a_sub_agent_is_a_child_session_and_its_wrap_reaches_the_coordinator(home, start_daemon):
    daemon = start_daemon()
    lead = "7d0c2b1e-0a4f-4c9e-9d3a-5b6f7e8d9c01"
    transcript = home / f"{lead}.jsonl"
    write_lines(
        transcript,
        [
            record("user", "1-1", None, "fix the flaky tests", lead),
            record(
                "assistant",
                "1-2",
                "1-1",
                [{"type": "text", "text": "asking a helper"}],
                lead,
                message_id="m1",
            ),
        ],
    )
    sub = home / lead / "subagents" / "agent-a1b2c3.jsonl"
    sub.parent.mkdir(parents=True)
    agent_transcript(sub, lead, "a1b2c3")
    base = {"session_id": lead, "transcript_path": str(transcript), "cwd": str(home)}
    flags = ("--channel", "CxShop", "--agent", "AgentLead", "--project", "shop")
    claude("SessionStart", {**base, "source": "startup"}, daemon, *flags)
    with daemon.client() as client:
        me = channel.join(channel.wire(client), "CxShop", "AgentLead")
        claimed = me.claim("(flaky TestRetry)")  # the sub-agent's work, on the change log
        said = claude(
            "SubagentStop",
            {
                **base,
                "stop_hook_active": False,
                "agent_id": "a1b2c3",
                "agent_type": "general-purpose",
                "agent_transcript_path": str(sub),
                "last_assistant_message": "test_retry is flaky\nDecision: quarantine test_retry",
            },
            daemon,
            *flags,
        )
        assert said == ""
        read = Introspection(client).read_session(lead)
        (child,) = read["children"]
        assert (
            Introspection(client).read_session(child["id"])["session"]["parent_session_id"] == lead
        )
        assert turns_of(client, child["id"])[0][0] == "find the flaky test"
        absorbed = permeate(me, session_id=lead)
        (wrap,) = absorbed["wraps"]
        assert (wrap["session_id"], wrap["parent_session_id"]) == (child["id"], lead)
        assert wrap["project_id"] == "shop" and claimed in wrap["created_ids"]
        texts = [e.text for e in absorbed["entries"]]
        assert '(memoryNote AgentLead "test_retry is flaky")' in texts
        assert '(memoryDecision AgentLead "quarantine test_retry")' in texts
        # a SubagentStop said twice files nothing twice
        claude(
            "SubagentStop",
            {**base, "agent_id": "a1b2c3", "agent_transcript_path": str(sub)},
            daemon,
            *flags,
        )
        assert permeate(me, session_id=lead)["processed"] == 0


def test_a_worker_in_its_own_process_wraps_into_its_coordinators_session(home, start_daemon):
    daemon = start_daemon()
    lead, worker = "11111111-2222-4333-8444-555555555555", "66666666-7777-4888-9999-aaaaaaaaaaaa"
    claude(
        "SessionStart",
        {"session_id": lead, "transcript_path": "", "cwd": str(home)},
        daemon,
        "--channel",
        "CxShop",
        "--agent",
        "AgentLead",
    )
    transcript = home / f"{worker}.jsonl"
    write_lines(transcript, [record("user", "2-1", None, "port the retry code", worker)])
    base = {"session_id": worker, "transcript_path": str(transcript), "cwd": str(home)}
    env = {"KOINII_AGENT": "AgentWorker", "KOINII_PARENT_SESSION": lead, "KOINII_CHANNEL": "CxShop"}
    context = claude("SessionStart", {**base, "source": "startup"}, daemon, env=env)
    assert lead in json.loads(context)["hookSpecificOutput"]["additionalContext"]
    with daemon.client() as client:
        worker_agent = channel.join(channel.wire(client), "CxShop", "AgentWorker")
        done = worker_agent.claim("(ported RetryCode)")
        claude(
            "Stop",
            {**base, "stop_hook_active": False, "last_assistant_message": "Ported the retry code."},
            daemon,
            env=env,
        )
        claude("SessionEnd", {**base, "reason": "prompt_input_exit"}, daemon, env=env)
        coordinator = channel.join(channel.wire(client), "CxShop", "AgentLead")
        absorbed = permeate(coordinator, session_id=lead)
        (wrap,) = absorbed["wraps"]
        assert (wrap["agent_id"], wrap["session_id"]) == ("AgentWorker", worker)
        assert done in wrap["created_ids"]
        note = absorbed["entries"][0].text
        assert note == '(memoryNote AgentWorker "Ported the retry code.")'
        assert turns_of(client, worker)[0][0] == "port the retry code"


def test_stop_hands_back_what_concerns_the_agent_when_asked_and_never_loops(home, start_daemon):
    daemon = start_daemon()
    me_id = "abcdef01-2345-4678-89ab-cdef01234567"
    base = {"session_id": me_id, "transcript_path": "", "cwd": str(home)}
    flags = ("--channel", "CxShop", "--agent", "AgentAsker")
    claude("SessionStart", {**base, "source": "startup"}, daemon, *flags)
    with daemon.client() as client:
        asker = channel.join(channel.wire(client), "CxShop", "AgentAsker")
        other = channel.join(channel.wire(client), "CxShop", "AgentOther")
        question = asker.ask("(usesDatabase ProdCluster ?db)")
        claim = asker.claim("(ready BillingRelease)")
        # off by default: nothing is handed back
        assert claude("Stop", {**base, "stop_hook_active": False}, daemon, *flags) == ""
        other.answer(question, {"?db": "PostgreSQL16"})
        other.dispute(claim)
        said = claude("Stop", {**base, "stop_hook_active": False}, daemon, *flags, "--handback")
        block = json.loads(said)
        assert block["decision"] == "block"
        assert "AgentOther" in block["reason"] and "PostgreSQL16" in block["reason"]
        # the agent goes on because of it: the next Stop lets it stop, news or not
        other.vote(claim, "against")
        handback = (*flags, "--handback")
        assert claude("Stop", {**base, "stop_hook_active": True}, daemon, *handback) == ""
        later = json.loads(claude("Stop", {**base, "stop_hook_active": False}, daemon, *handback))
        assert "against" in later["reason"] and "PostgreSQL16" not in later["reason"]
        # and what was handed back is not handed back again
        assert claude("Stop", {**base, "stop_hook_active": False}, daemon, *handback) == ""
        # a session resumed starts with what is still open on its claims
        context = claude("SessionStart", {**base, "source": "resume"}, daemon, *flags)
        told = json.loads(context)["hookSpecificOutput"]["additionalContext"]
        assert "Disputes on your claims (1)" in told and "(ready BillingRelease)" in told
        assert "Your open questions (1)" in told and "(usesDatabase ProdCluster ?db)" in told
        # the agent's next session is told what concerned it while it was away
        claude("SessionEnd", {**base, "reason": "clear"}, daemon, *flags)
        other.answer(question, {"?db": "MySQL8"})
        fresh = {**base, "session_id": "abcdef01-2345-4678-89ab-000000000002"}
        context = claude("SessionStart", {**fresh, "source": "startup"}, daemon, *flags)
        told = json.loads(context)["hookSpecificOutput"]["additionalContext"]
        assert "Since your last session" in told and "MySQL8" in told


def test_a_daemon_that_is_down_leaves_the_agent_unharmed_and_the_next_hook_catches_up(
    home, start_daemon, unreachable_url
):
    lead = "99999999-8888-4777-8666-555555555555"
    transcript = home / f"{lead}.jsonl"
    write_lines(transcript, [record("user", "3-1", None, "deploy", lead)])
    base = {"session_id": lead, "transcript_path": str(transcript), "cwd": str(home)}
    for event in ("SessionStart", "Stop", "SubagentStop", "SessionEnd"):
        body = json.dumps({"hook_event_name": event, **base, "agent_id": "x1"})
        done = hook("claude", event, "--url", unreachable_url, "--channel", "CxShop", stdin=body)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = hook(
        "codex",
        "--url",
        unreachable_url,
        json.dumps({"type": "agent-turn-complete", "thread-id": THREAD}),
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    garbage = hook("claude", "Stop", "--url", unreachable_url, stdin="not json")
    assert (garbage.returncode, garbage.stdout, garbage.stderr) == (0, "", "")
    logged = (home / "state" / "hooks.log").read_text()
    assert "claude SessionStart" in logged and "codex" in logged
    daemon = start_daemon()  # the daemon is back: the next hook does what was missed
    claude("Stop", {**base, "stop_hook_active": False}, daemon)
    with daemon.client() as client:
        assert turns_of(client, lead)[0][0] == "deploy"
        # the hooks that come once were kept, and ran again: the wraps are filed
        filed = {w["session_id"] for w in WrapQueue(client).get_unprocessed_wraps()}
        sub = koinii_id(f"claude-code:{lead}/agent-x1")
        assert filed == {lead, sub}
        assert Introspection(client).get_session(THREAD)["id"] == THREAD
    assert not list((home / "state" / "kept").glob("*.json"))
    assert "ran the kept claude SessionEnd" in (home / "state" / "hooks.log").read_text()


def test_a_codex_turn_imports_its_rollout_and_a_worker_wraps_into_its_coordinator(
    home, start_daemon
):
    daemon = start_daemon()
    rollout = (
        home / "codex" / "sessions" / "2026" / "02" / "23" / ROLLOUT.name.removeprefix("codex_")
    )
    rollout.parent.mkdir(parents=True)
    shutil.copy(ROLLOUT, rollout)
    lead = "11111111-2222-4333-8444-555555555555"
    claude(
        "SessionStart",
        {"session_id": lead, "transcript_path": "", "cwd": str(home)},
        daemon,
        "--agent",
        "AgentLead",
    )
    payload = {
        "type": "agent-turn-complete",
        "thread-id": THREAD,
        "turn-id": "turn-1",
        "cwd": str(home),
        "input-messages": ["run the tests"],
        "last-assistant-message": "Two tests fail: test_push and test_retry.",
    }
    env = {"KOINII_AGENT": "AgentCodexWorker", "KOINII_PARENT_SESSION": lead}
    for _ in range(2):  # a notify said twice files one wrap
        done = hook("codex", "--url", daemon.url, json.dumps(payload), env=env)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    with daemon.client() as client:
        assert Introspection(client).get_session(THREAD)["id"] == THREAD
        with koinii.open_kb() as kb:
            (report,) = import_paths(SessionStore(kb), [ROLLOUT])
            assert turns_of(client, THREAD) == turns_of(kb, report["session_id"])
        coordinator = channel.join(channel.wire(client), "CxShop", "AgentLead")
        absorbed = permeate(coordinator, session_id=lead)
        assert [w["session_id"] for w in absorbed["wraps"]] == [THREAD]
        assert [e.text for e in absorbed["entries"]] == [
            '(memoryNote AgentCodexWorker "Two tests fail: test_push and test_retry.")'
        ]


# --- docs/runtimes.md runs ----------------------------------------------------------------


def test_the_runtimes_page_runs_against_a_daemon(home, start_daemon):
    """Every ```sh block of docs/runtimes.md, line by line, as tests/test_cli_docs.py
    runs docs/cli.md; then what it promised is there."""
    from tests.test_cli_docs import script_of

    doc = (pathlib.Path(__file__).parent.parent / "docs" / "runtimes.md").read_text()
    daemon = start_daemon()
    env = {
        **os.environ,
        "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "KOINII_URL": daemon.url,
    }
    env.pop("CODEX_HOME")
    ran = subprocess.run(
        ["bash", "-c", script_of(doc)],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr + ran.stdout
    assert "installed: yes" in ran.stdout and "your session is" not in ran.stderr
    assert "Koinii: your session is 7d0c2b1e-0a4f-4c9e-9d3a-5b6f7e8d9c01" in ran.stdout
    settings_file = json.loads((home / "shop" / ".claude" / "settings.json").read_text())
    assert "--handback" in settings_file["hooks"]["Stop"][0]["hooks"][0]["command"]
    with daemon.client() as client:
        found = {s["id"] for s in Introspection(client).list_sessions()}
        assert {"7d0c2b1e-0a4f-4c9e-9d3a-5b6f7e8d9c01", THREAD} <= found


def test_over_a_daemon_with_tokens_a_hook_acts_only_as_its_tokens_agent(home, start_daemon):
    daemon = start_daemon(principals={"AgentLead": "agent", "AgentWorker": "agent"})
    lead, worker = "11111111-2222-4333-8444-555555555555", "66666666-7777-4888-9999-aaaaaaaaaaaa"
    as_lead = {"KOINII_TOKEN": daemon.tokens["AgentLead"]}
    claude(
        "SessionStart",
        {"session_id": lead, "transcript_path": "", "cwd": str(home)},
        daemon,
        "--channel",
        "CxShop",
        "--agent",
        "AgentLead",
        env=as_lead,
    )
    base = {"session_id": worker, "transcript_path": "", "cwd": str(home)}
    # the worker's token, but the hook says it is the lead: its wrap is refused, quietly
    posing = {"KOINII_TOKEN": daemon.tokens["AgentWorker"], "KOINII_PARENT_SESSION": lead}
    said = claude(
        "SessionEnd", {**base, "reason": "other"}, daemon, "--agent", "AgentLead", env=posing
    )
    assert said == ""
    assert "koinii/creator-mismatch" in (home / "state" / "hooks.log").read_text()
    assert not (home / "state" / "kept").exists()  # a refusal is not tried again
    with daemon.client("AgentLead") as client:
        assert WrapQueue(client).get_unprocessed_wraps() == []
    # as itself, the worker's wrap reaches the lead
    honest = {**posing, "KOINII_AGENT": "AgentWorker"}
    other = {**base, "session_id": "66666666-7777-4888-9999-bbbbbbbbbbbb"}
    claude("SessionEnd", {**other, "reason": "other"}, daemon, env=honest)
    with daemon.client("AgentLead") as client:
        coordinator = channel.join(channel.wire(client), "CxShop", "AgentLead")
        (wrap,) = permeate(coordinator, session_id=lead)["wraps"]
        assert wrap["agent_id"] == "AgentWorker"


def test_another_agent_cannot_take_a_sessions_wrap_id_first(home, start_daemon):
    """Issue 37, hostile rerun: a session's wrap id was `wrap-claude-code-<session>`, and the
    session's id is in every reader's session list — so AgentMallory filed that id first,
    and the worker's own wrap at SessionEnd was refused (`koinii/creator-mismatch`, a
    wrap id is its first filer's): its notes never reached the lead. Its ids now carry a
    nonce of the hook's own."""
    daemon = start_daemon(
        principals={"AgentLead": "agent", "AgentWorker": "agent", "AgentMallory": "agent"}
    )
    lead, worker = "11111111-2222-4333-8444-555555555555", "66666666-7777-4888-9999-aaaaaaaaaaaa"
    with daemon.client("AgentMallory") as mallory:
        for squat in (f"wrap-claude-code-{worker}", f"wrap-claude-code-{worker}-agent-AgentWorker"):
            WrapQueue(mallory).add_wrap_notification(
                squat, agent_id="AgentMallory", parent_session_id=lead
            )
    env = {
        "KOINII_TOKEN": daemon.tokens["AgentWorker"],
        "KOINII_AGENT": "AgentWorker",
        "KOINII_PARENT_SESSION": lead,
    }
    base = {"session_id": worker, "transcript_path": "", "cwd": str(home)}
    claude("SessionEnd", {**base, "reason": "other"}, daemon, env=env)
    log = home / "state" / "hooks.log"
    assert not log.exists() or "creator-mismatch" not in log.read_text()
    with daemon.client("AgentLead") as client:
        wraps = WrapQueue(client).get_unprocessed_wraps()
        assert [w["agent_id"] for w in wraps].count("AgentWorker") == 1
    claude("SessionEnd", {**base, "reason": "other"}, daemon, env=env)  # run again: no second
    with daemon.client("AgentLead") as client:
        wraps = WrapQueue(client).get_unprocessed_wraps()
        assert [w["agent_id"] for w in wraps].count("AgentWorker") == 1


@pytest.mark.backends("sqlite", "postgres")
def test_a_stop_hook_killed_mid_import_loses_nothing_and_doubles_nothing(home, start_daemon):
    """A hook killed while its import is half-way (some parts written, the session not
    complete): the next Stop imports again, and the session is what one import makes."""
    import signal
    import time

    daemon = start_daemon()
    session = "c0ffee00-1111-4222-8333-444455556666"
    lines, parent = [], None
    for n in range(1, 1201):  # 1,200 turns: six parts of an import (SessionStore: 200 a part)
        asked, said = f"{n}-1", f"{n}-2"
        lines.append(record("user", asked, parent, f"step {n}: go on", session))
        reply = [{"type": "text", "text": f"done with step {n}"}]
        lines.append(record("assistant", said, asked, reply, session, message_id=f"m{n}"))
        parent = said
    transcript = home / f"{session}.jsonl"
    write_lines(transcript, lines)
    body = json.dumps(
        {
            "hook_event_name": "Stop",
            "session_id": session,
            "transcript_path": str(transcript),
            "cwd": str(home),
            "stop_hook_active": False,
        }
    )
    killed = subprocess.Popen(
        [sys.executable, "-m", "koinii", "hook", "claude", "Stop", "--url", daemon.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed.stdin.write(body)
    killed.stdin.close()
    with daemon.client() as client:
        deadline = time.monotonic() + 60
        while killed.poll() is None and time.monotonic() < deadline:
            found = Introspection(client).get_session(session)
            if found and found["turn_count"]:  # a part is in: kill it now
                break
            time.sleep(0.05)
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        killed.stdout.close()
        killed.stderr.close()
        assert claude("Stop", json.loads(body), daemon) == ""
        after = turns_of(client, session)
    with koinii.open_kb() as kb:
        (report,) = import_paths(SessionStore(kb), [transcript])
        assert after == turns_of(kb, report["session_id"])
    assert len(after) == 1200


def test_a_hook_told_two_stores_does_nothing_and_says_why_in_its_log(home):
    env = {"KOINII_URL": "http://127.0.0.1:7411", "KOINII_DB": str(home / "team.db")}
    body = json.dumps({"session_id": THREAD, "transcript_path": "", "cwd": str(home)})
    done = hook("claude", "SessionStart", stdin=body, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert "KOINII_DB and KOINII_URL name two stores" in (home / "state" / "hooks.log").read_text()
    assert not (home / "team.db").exists()
