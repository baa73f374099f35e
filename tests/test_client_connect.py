"""Where a client connects: $KOINII_URL and $KOINII_TOKEN when not given (as the CLI
reads them), a URL's path kept (a daemon behind a path-prefix proxy), a bad URL refused."""

import subprocess
import sys

import pytest

import koinii
from tests.conftest import line_within, refused


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


def test_what_the_call_names_wins_over_the_environment(
    start_daemon, monkeypatch, unreachable_url
):
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
