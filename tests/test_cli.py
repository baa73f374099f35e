"""The `koinii` command: every command, bad arguments, and `tail` hearing another process."""

import os
import re
import subprocess
import sys
import time

import pytest

import koinii
from tests.conftest import forker, line_within, wait_until

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix


def koinii_cli(
    *args: str, env: dict | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    return forker().run(list(args), timeout=timeout, env={**os.environ, **(env or {})})


def test_version_and_help():
    assert koinii_cli("--version").stdout.strip().endswith(koinii.__version__)
    helped = koinii_cli("--help")
    assert helped.returncode == 0
    for command in ("serve", "assert", "query", "tail", "token", "migrate", "mcp"):
        assert command in helped.stdout
        assert koinii_cli(command, "--help").returncode == 0


def test_assert_and_query_against_a_daemon(daemon):
    url = ["--url", daemon.url]
    made = koinii_cli("assert", "(usesDatabase ProdCluster Postgres)", "-c", "CxDeploy", *url)
    assert made.returncode == 0 and int(made.stdout) > 0
    found = koinii_cli("query", "(usesDatabase ?cluster ?db)", "-c", "CxDeploy", *url)
    assert found.returncode == 0
    assert (
        "ProdCluster" in found.stdout and "Postgres" in found.stdout and "?cluster" in found.stdout
    )


def test_assert_and_query_on_a_store_file(tmp_path):
    db = ["--db", str(tmp_path / "kb.db")]
    assert koinii_cli("assert", "(ready Release)", "-c", "CxA", *db).returncode == 0
    assert "no solutions" not in koinii_cli("query", "(ready ?x)", "-c", "CxA", *db).stdout


def test_a_refusal_is_one_readable_line_with_its_kind(daemon):
    result = koinii_cli("assert", "(UsesDatabase x)", "-c", "CxDeploy", "--url", daemon.url)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("koinii: naming: ")
    assert "Traceback" not in result.stderr


def test_an_unreachable_daemon_exits_3_in_one_line(unreachable_url):
    result = koinii_cli("query", "(p ?x)", "-c", "CxA", "--url", unreachable_url)
    assert result.returncode == 3
    assert result.stderr.startswith("koinii: unavailable: ") and "Traceback" not in result.stderr


def test_bad_arguments_exit_2_with_usage():
    result = koinii_cli("assert", "(p a)")  # no --context
    assert result.returncode == 2 and "--context" in result.stderr
    assert koinii_cli("no-such-command").returncode == 2
    assert koinii_cli("mcp", "--agent", "AgentAtlas").returncode == 2  # no --channel


def test_tail_receives_a_write_made_by_another_process(daemon):
    tail = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "koinii",
            "tail",
            "--url",
            daemon.url,
            "--goal",
            "(answers ?a ?c ?q)",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        writer = daemon.client()
        # the tail starts at the current seq: it has read it once its long poll is parked
        assert wait_until(lambda: writer.health()["parked"], timeout=20)
        q = writer.assert_("(queries AgentAtlas WhichDb)", "CxAtlas")
        writer.assert_("(unrelated Noise)", "CxAtlas")
        writer.assert_(f"(answers AgentBoreas PostgreSQL14 (sentexHandle {q}))", "CxBoreas")
        deadline = time.monotonic() + 10
        line = ""
        while time.monotonic() < deadline and "answered" not in line:
            line = line_within(tail.stdout, timeout=deadline - time.monotonic())
        assert f"AgentBoreas answered question #{q} with PostgreSQL14" in line  # who, what
    finally:
        tail.terminate()
        tail.wait(10)
    out = tail.stdout.read()
    assert "Noise" not in out and "queries" not in out


def test_tail_is_resumable_from_a_seq(daemon):
    client = daemon.client()
    client.assert_("(first Thing)", "CxA")
    since = client.seq
    client.assert_("(second Thing)", "CxA")
    result = koinii_cli("tail", "--url", daemon.url, "--since", str(since), "--no-follow")
    assert result.returncode == 0
    assert "(second Thing)" in result.stdout and "(first Thing)" not in result.stdout


def test_tail_tells_who_did_what_and_hides_the_plumbing(daemon):
    from koinii.channel import agent as channel

    since = daemon.client().seq
    atlas = channel.join(channel.wire(daemon.client()), "CxTeam", "AgentAtlas")
    boreas = channel.join(channel.wire(daemon.client()), "CxTeam", "AgentBoreas")
    q = atlas.pose_query("(usesDatabase ProdCluster ?db)")
    a = boreas.answer("PostgreSQL16", q)
    atlas.accept(a)
    told = koinii_cli("tail", "--url", daemon.url, "--since", str(since), "--no-follow")
    lines = told.stdout.splitlines()
    said = [re.sub(r"^\S+ seq +\d+ ", "", line).rsplit("  #", 1)[0] for line in lines]
    assert said == [
        "AgentAtlas asked: (usesDatabase ProdCluster ?db)",
        f"AgentBoreas answered question #{q} with (usesDatabase ProdCluster PostgreSQL16)",
        f"AgentAtlas accepted AgentBoreas's answer #{a} "
        f"((usesDatabase ProdCluster PostgreSQL16)) to question #{q}",
    ]  # the joins' context edges and marks are not shown
    raw = koinii_cli("tail", "--url", daemon.url, "--since", str(since), "--no-follow", "--raw")
    assert "(genlCx CxTeam CxAtlas)" in raw.stdout and "AgentBoreas" in raw.stdout
    as_json = koinii_cli(
        "tail", "--url", daemon.url, "--since", str(since), "--no-follow", "--json"
    )
    import json

    kinds = [json.loads(line)["kind"] for line in as_json.stdout.splitlines()]
    assert kinds == ["question", "answer", "acceptance"]


def test_tail_tells_a_withdrawal_of_a_sentex_with_no_author_named(daemon):
    client = daemon.client()
    handle = client.assert_("(usesDatabase ProdCluster PostgreSQL16)", "CxOps")
    since = client.seq
    client.retract(handle)
    told = koinii_cli("tail", "--url", daemon.url, "--since", str(since), "--no-follow")
    assert f"its writer withdrew claim #{handle}" in told.stdout
    assert "None" not in told.stdout
