"""`koinii demo` runs a real team in separate processes and leaves nothing behind."""

import os
import re
import subprocess
import sys
import time


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


def test_the_demo_runs_a_team_settles_the_dispute_and_exits_clean(tmp_path):
    # its folder under a temp folder of this test's, so only its own processes are looked
    # for (another run on the host, or the --keep test beside it, may have a demo running)
    result = subprocess.run(
        [sys.executable, "-m", "koinii", "demo", "--pace", "0"],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "TMPDIR": str(tmp_path)},
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
    url = re.search(r"daemon on (http://\S+);", out)
    assert url, out
    assert processes_mentioning(str(tmp_path)) == []  # the daemon (its --db is there)
    assert processes_mentioning(url[1]) == []  # the team, the coordinator, the adjudicator


def test_the_demo_with_keep_leaves_its_daemon_and_says_how_to_explore_it():
    import re
    import shutil
    import signal
    import socket
    import urllib.request

    import koinii

    with socket.socket() as probe:  # a port free a moment ago, for --port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = subprocess.run(
        [sys.executable, "-m", "koinii", "demo", "--pace", "0", "--keep", "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    out = result.stdout
    pid = re.search(r"still running \(pid (\d+)\)", out)
    folder = re.search(r"rm -r (\S+)", out)
    try:
        assert result.returncode == 0, out + result.stderr
        assert pid, out
        url = re.search(r"the web view\s+(http://127\.0\.0\.1:(\d+))/", out)
        assert url and int(url.group(2)) == port, out
        reader = re.search(r"reader token\s+(kt_\S+)", out).group(1)
        operator = re.search(r"KOINII_TOKEN=(kt_\S+)", out).group(1)
        # the daemon is still there, with what the team did
        with koinii.connect(url.group(1), token=reader, timeout=10) as client:
            (question,) = client.invoke("conversation.questions", channel="CxTeam")
            assert question["state"] == "settled"
        with urllib.request.urlopen(url.group(1) + "/", timeout=10) as page:
            assert page.status == 200  # the web view (its sign-in page)
        # the CLI line it prints works as printed
        env = {**os.environ, "KOINII_URL": url.group(1), "KOINII_TOKEN": operator}
        env.pop("KOINII_DB", None)
        listed = subprocess.run(
            [sys.executable, "-m", "koinii", "questions", "-c", "CxTeam"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert "settled" in listed.stdout, listed.stderr
        # only the daemon stays: no agent or adjudicator of this demo (they name its URL)
        assert processes_mentioning(url.group(1)) == []
    finally:
        if pid:  # the daemon this test's demo left: stopped by its pid
            os.kill(int(pid.group(1)), signal.SIGTERM)
            for _ in range(100):
                if not processes_mentioning(folder.group(1) if folder else "koinii-demo-"):
                    break
                time.sleep(0.1)
        if folder:
            shutil.rmtree(folder.group(1), ignore_errors=True)
    assert processes_mentioning("koinii-demo-") == []
