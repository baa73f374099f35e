"""Where a client connects: $KOINII_URL and $KOINII_TOKEN when not given (as the CLI
reads them), a URL's path kept (a daemon behind a path-prefix proxy), a bad URL refused,
and a token that is not of a token's form — the docs' placeholder `kt_…` — refused
`unauthorized` with the fix, by both clients, the CLI and `koinii mcp`."""

import asyncio
import os
import subprocess
import sys

import pytest

import koinii
from koinii.server.tokens import add_token
from tests.conftest import Daemon, forker, line_within, refused

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix


@pytest.fixture
def proxy(daemon):
    """The daemon served under /koinii by a real reverse proxy process (tests/path_proxy.py)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.path_proxy", "0", "/koinii", daemon.url],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready, port = line_within(proc.stdout, timeout=15).split()
        assert ready == "ready"
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


def test_connect_reads_the_url_and_token_from_the_environment(start_daemon, monkeypatch):
    daemon = start_daemon(principals={"AgentAtlas": "agent"})
    monkeypatch.setenv("KOINII_URL", daemon.url)
    assert refused(lambda: koinii.connect().assert_("(p A)", "CxAtlas")).kind == "unauthorized"
    monkeypatch.setenv("KOINII_TOKEN", daemon.tokens["AgentAtlas"])
    with koinii.connect() as client:
        assert client.url == daemon.url
        handle = client.assert_("(p A)", "CxAtlas")
        assert client.provenance(handle)["principal"] == "AgentAtlas"


def test_what_the_call_names_wins_over_the_environment(start_daemon, monkeypatch, unreachable_url):
    daemon = start_daemon(principals={"AgentAtlas": "agent", "AgentBoreas": "agent"})
    monkeypatch.setenv("KOINII_URL", unreachable_url)
    monkeypatch.setenv("KOINII_TOKEN", daemon.tokens["AgentAtlas"])
    with koinii.connect(daemon.url, token=daemon.tokens["AgentBoreas"]) as client:
        handle = client.assert_("(p B)", "CxBoreas")
        assert client.provenance(handle)["principal"] == "AgentBoreas"
    no_token = koinii.connect(daemon.url, token="")  # names no token: the variable is not read
    assert refused(lambda: no_token.assert_("(p A)", "CxAtlas")).kind == "unauthorized"
    monkeypatch.setenv("KOINII_URL", "")  # empty is unset: the default address
    assert koinii.connect().url == "http://127.0.0.1:7411"


def test_a_url_keeps_its_path_behind_a_path_prefix_proxy(proxy):
    for url in (proxy + "/koinii", proxy + "/koinii/"):
        with koinii.connect(url) as client:
            handle = client.assert_("(p A)", "CxA")
            assert client.sentex(handle).text == "(p A)"
            assert client.health()["ok"] is True
            sub = client.watch("(p ?x)", "CxA")
            assert client.poll(sub["token"], 0, wait_ms=50) == {
                "events": [],
                "cursor": 0,
                "lagged": 0,
            }


def test_without_the_prefix_the_proxy_answers_and_it_is_not_koinii(proxy):
    with pytest.raises(koinii.Unavailable) as unavailable:
        koinii.connect(proxy).stats()
    assert "404" in str(unavailable.value)


@pytest.mark.parametrize(
    "url",
    ["ftp://127.0.0.1:7411", "127.0.0.1:7411", "http://127.0.0.1:port", "http://h/k?x=1"],
)
def test_a_url_that_is_not_a_daemons_is_refused(url):
    refusal = refused(lambda: koinii.connect(url))
    assert refusal.kind == "bad-url" and refusal.data == {"url": url}
    assert "http://host:port" in refusal.message


# --- a token's form -------------------------------------------------------------------------

FIX = "paste the kt_… that `koinii token add` printed"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """One daemon with a token table (SQLite: the form is checked before any store)."""
    folder = tmp_path_factory.mktemp("guarded")
    table = str(folder / "guarded.tokens")
    daemon = Daemon(
        str(folder / "guarded.db"),
        ["--tokens", table],
        {"AgentAtlas": add_token(table, "AgentAtlas", "agent")},
    ).start()
    yield daemon
    daemon.kill()


NOT_TOKENS = ["kt_…", "kt_...", "Bearer kt_abc", "kt_", "kt_abc\u00e9", "AgentAtlas", 7411]


@pytest.mark.parametrize("token", NOT_TOKENS)
def test_a_token_not_of_a_tokens_form_is_refused_unauthorized_with_the_fix(guarded, token):
    daemon = guarded
    refusal = refused(lambda: koinii.connect(daemon.url, token=token).stats())
    assert refusal.kind == "unauthorized" and FIX in refusal.message
    assert refusal.data == {"option": "token"}

    async def asynchronously() -> None:
        async with koinii.aconnect(daemon.url, token=token) as client:
            await client.stats()

    assert refused(lambda: asyncio.run(asynchronously())).message == refusal.message


def test_the_placeholder_is_named_and_a_token_read_from_a_file_keeps_working(guarded, monkeypatch):
    daemon = guarded
    monkeypatch.setenv("KOINII_TOKEN", "kt_…")
    refusal = refused(lambda: koinii.connect(daemon.url))
    assert "the docs' placeholder" in refusal.message and FIX in refusal.message
    monkeypatch.setenv("KOINII_TOKEN", daemon.tokens["AgentAtlas"] + "\n")  # $(cat file)
    with koinii.connect(daemon.url) as client:
        assert client.provenance(client.assert_("(p A)", "CxAtlas"))["principal"] == "AgentAtlas"


def koinii_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return forker().run(list(args), env={**os.environ, **env})


def test_the_cli_refuses_the_placeholder_token_exit_1_with_the_fix(guarded):
    daemon = guarded
    given = koinii_cli("query", "(p ?x)", "-c", "CxAtlas", "--url", daemon.url, "--token", "kt_…")
    from_env = koinii_cli(
        "query", "(p ?x)", "-c", "CxAtlas", "--url", daemon.url, KOINII_TOKEN="kt_…"
    )
    for ran in (given, from_env):
        assert ran.returncode == 1, ran.stderr
        assert ran.stderr.startswith("koinii: unauthorized: the token given")
        assert FIX in ran.stderr and "Traceback" not in ran.stderr


def test_koinii_mcp_refuses_the_placeholder_token_at_start_exit_1_with_the_fix(guarded):
    daemon = guarded
    ran = koinii_cli(
        "mcp",
        "--agent",
        "AgentAtlas",
        "--channel",
        "CxTeam",
        "--url",
        daemon.url,
        "--token",
        "kt_…",
    )
    assert ran.returncode == 1, ran.stderr
    assert ran.stderr.startswith("koinii: unauthorized: the token given") and FIX in ran.stderr
