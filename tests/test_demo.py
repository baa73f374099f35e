"""`koinii demo` runs a real team in separate processes and leaves nothing behind."""

import os
import subprocess
import sys


def processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(cmdline)
    return found


def test_the_demo_runs_a_team_settles_the_dispute_and_exits_clean():
    result = subprocess.run(
        [sys.executable, "-m", "koinii", "demo", "--pace", "0"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for line in (
        "AgentAtlas asked: (usesDatabase ProdCluster ?db)",
        "AgentBoreas answered question",
        "with (usesDatabase ProdCluster PostgreSQL16)",
        "AgentCiel disputed claim",
        "AgentMajority ruled (usesDatabase ProdCluster PostgreSQL16)",  # the adjudicator
        "AgentAtlas accepted AgentBoreas's answer",
        "AgentCiel withdrew answer",
        "the coordinator permeated wrap-",
    ):
        assert line in out, line
    assert "2 for, 1 against" in out and "settled" in out
    assert "disputes still open" in out and "wraps left unprocessed" in out
    assert processes_mentioning("koinii-demo-") == []
    assert processes_mentioning("koinii.demo") == []
