"""Identity and access, enforced by the daemon (wire.md §4)."""

import http.client
import json
import subprocess
import sys

import pytest

import koinii
from koinii import Refused
from koinii.server.tokens import UNAUTHORIZED
from tests.conftest import refused

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

TEAM = {
    "AgentAtlas": "agent",
    "AgentBoreas": "agent",
    "Registrar": "admin",
    "Ops": "operator",
    "Auditor": "reader",
}


@pytest.fixture
def team(start_daemon):
    return start_daemon(principals=TEAM)


def raw(daemon, path, body=b"{}", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
    conn.request("POST", path, body, headers or {})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def test_an_agent_writes_its_own_context_and_the_daemon_records_the_principal(team):
    atlas = team.client("AgentAtlas")
    h = atlas.assert_("(usesDatabase ProdCluster Postgres)", "CxAtlas")
    provenance = atlas.provenance(h)
    assert provenance["principal"] == "AgentAtlas" and provenance["creator"] == "AgentAtlas"


def test_an_agent_writing_another_agents_context_is_403_foreign_context(team):
    atlas = team.client("AgentAtlas")
    refusal = refused(lambda: atlas.assert_("(p a)", "CxBoreas"))
    assert refusal.kind == "koinii/foreign-context"
    assert refusal.data == {"agent": "AgentAtlas", "context": "CxBoreas", "own": "CxAtlas"}
    status, _ = raw(
        team,
        "/v1/assert",
        json.dumps({"sentence": "(p a)", "context": "CxBoreas"}).encode(),
        {"Authorization": f"Bearer {team.tokens['AgentAtlas']}"},
    )
    assert status == 403


def test_an_agent_writing_the_registry_is_403_registry_forbidden(team):
    refusal = refused(
        lambda: team.client("AgentAtlas").assert_("(trustLevel AgentAtlas 9)", "CxRegistry")
    )
    assert refusal.kind == "koinii/registry-forbidden"


def test_a_creator_other_than_the_principal_is_refused_and_its_own_id_allowed(team):
    atlas = team.client("AgentAtlas")
    assert refused(lambda: atlas.assert_("(p a)", "CxAtlas", creator="AgentBoreas")).kind == (
        "koinii/creator-mismatch"
    )
    assert isinstance(atlas.assert_("(p a)", "CxAtlas", creator="AgentAtlas"), int)


def test_a_speech_act_naming_another_speaker_is_refused(team):
    atlas = team.client("AgentAtlas")
    refusal = refused(lambda: atlas.assert_("(queries AgentBoreas WhichDb)", "CxAtlas"))
    assert refusal.kind == "koinii/speaker-mismatch"
    assert refusal.data == {"agent": "AgentAtlas", "named": "AgentBoreas", "act": "queries"}


def test_authority_refusals_answer_403_like_a_foreign_sentex(team):
    """Speaking, creating, masking or marking as another agent is a question of authority,
    whatever the sentence's shape: 403, as retracting another's sentex is."""
    boreas = team.client("AgentBoreas")
    theirs = boreas.assert_("(p b)", "CxBoreas")
    token = {"Authorization": f"Bearer {team.tokens['AgentAtlas']}"}

    def status_of(op: str, body: dict) -> tuple[int, str]:
        status, reply = raw(team, f"/v1/{op}", json.dumps(body).encode(), token)
        return status, reply["error"]["kind"]

    writes = {
        "koinii/speaker-mismatch": {"sentence": "(queries AgentBoreas WhichDb)"},
        "koinii/creator-mismatch": {"sentence": "(p a)", "creator": "AgentBoreas"},
        "koinii/foreign-mask": {"sentence": f"(except (sentexHandle {theirs}))"},
        "koinii/foreign-mark": {"sentence": "(agentContext CxAtlas AgentBoreas)"},
    }
    for kind, body in writes.items():
        assert status_of("assert", {**body, "context": "CxAtlas"}) == (403, kind)
    assert status_of("retract", {"handle": theirs}) == (403, "koinii/foreign-sentex")


def test_retracting_another_principals_sentex_is_refused(team):
    atlas, boreas = team.client("AgentAtlas"), team.client("AgentBoreas")
    h = atlas.assert_("(p a)", "CxAtlas")
    assert refused(lambda: boreas.retract(h)).kind == "koinii/foreign-sentex"
    assert refused(lambda: boreas.edit(remove=[h])).data["in"] == "remove"
    assert atlas.retract(h).removed_sentexes == 1


def test_a_client_supplied_principal_is_refused_never_stored(team):
    atlas = team.client("AgentAtlas")
    refusal = refused(
        lambda: atlas.assert_("(p a)", "CxAtlas", provenance={"principal": "AgentBoreas"})
    )
    assert refusal.kind == "reserved-provenance"
    h = atlas.assert_("(p b)", "CxAtlas", provenance={"note": "mine"})
    assert atlas.provenance(h)["principal"] == "AgentAtlas"


def test_an_agent_may_place_its_own_context_under_a_channel(team):
    atlas = team.client("AgentAtlas")
    atlas.assert_("(genlCx CxDeploy CxAtlas)", "CxUniverse")
    atlas.assert_("(agentContext CxAtlas AgentAtlas)", "CxAtlas")
    assert refused(lambda: atlas.assert_("(genlCx CxDeploy CxBoreas)", "CxUniverse")).kind == (
        "koinii/foreign-context"
    )
    boreas = team.client("AgentBoreas")
    refusal = refused(lambda: boreas.assert_("(genlCx CxAtlas CxBoreas)", "CxUniverse"))
    assert refusal.kind == "koinii/not-a-channel" and refusal.data["owners"] == ["AgentAtlas"]
    assert refused(lambda: boreas.assert_("(genlCx CxRegistry CxBoreas)", "CxUniverse")).kind == (
        "koinii/not-a-channel"
    )


def test_roles_admin_operator_reader(team):
    admin, ops, reader = team.client("Registrar"), team.client("Ops"), team.client("Auditor")
    row = admin.assert_("(trustLevel AgentAtlas 3)", "CxRegistry")
    assert refused(lambda: admin.assert_("(p a)", "CxAtlas")).kind == "koinii/admin-off-registry"
    assert refused(lambda: reader.assert_("(p a)", "CxAtlas")).kind == "forbidden"
    assert refused(lambda: reader.retract(row)).kind == "forbidden"
    assert reader.sentex(row).believed  # a reader reads
    assert (
        refused(lambda: team.client("AgentAtlas").load_text("(p a)", "CxAtlas")).kind == "forbidden"
    )
    ops.load_text("(p a)\n(p b)", "CxAnything")
    assert ops.retract(row).removed_sentexes == 1


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer kt_wrong"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer"},
    ],
    ids=["missing", "wrong", "malformed", "empty"],
)
def test_missing_wrong_and_malformed_tokens_get_the_same_401(team, headers):
    status, reply = raw(team, "/v1/stats", b"{}", headers)
    assert status == 401
    assert reply == {
        "ok": False,
        "error": {
            "kind": "unauthorized",
            "message": UNAUTHORIZED,
            "data": {},
        },
    }


def test_a_foreign_origin_is_403(team):
    headers = {
        "Authorization": f"Bearer {team.tokens['AgentAtlas']}",
        "Origin": "http://evil.example",
    }
    status, reply = raw(team, "/v1/stats", b"{}", headers)
    assert status == 403 and reply["error"]["kind"] == "cross-origin"


def test_an_open_daemon_records_no_principal(client):
    h = client.assert_("(p a)", "CxA")
    assert "principal" not in client.provenance(h)


def test_binding_a_non_loopback_address_without_tokens_exits_2(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "koinii",
            "serve",
            "--db",
            str(tmp_path / "x.db"),
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "token table" in result.stderr


def test_token_add_prints_once_and_stores_only_the_hash(tmp_path):
    table = tmp_path / "tokens.json"
    run = [sys.executable, "-m", "koinii", "token"]
    out = subprocess.run(
        [*run, "add", "AgentAtlas", "--role", "agent", "--tokens", str(table)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out.startswith("kt_") and out not in table.read_text()
    listed = subprocess.run(
        [*run, "list", "--tokens", str(table)], capture_output=True, text=True, check=True
    ).stdout
    assert "AgentAtlas" in listed and "agent" in listed and out not in listed
    bad = subprocess.run(
        [*run, "add", "not an id", "--tokens", str(table)], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "naming" in bad.stderr
    revoked = subprocess.run(
        [*run, "revoke", "AgentAtlas", "--tokens", str(table)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "revoked 1" in revoked.stdout
    assert json.loads(table.read_text())["tokens"] == []


def test_a_revoked_token_no_longer_works_after_restart(team, tmp_path):
    from koinii.server.tokens import revoke

    table = team.args[team.args.index("--tokens") + 1]
    revoke(table, "AgentAtlas")
    team.restart()
    with pytest.raises(Refused) as refusal:
        team.client("AgentAtlas").stats()
    assert refusal.value.kind == "unauthorized"
    assert koinii.connect(team.url, token=team.tokens["AgentBoreas"]).stats()["seq"] >= 1


@pytest.mark.parametrize("operation", ["edit", "load_text", "moves/claim"])
def test_a_readers_write_is_refused_before_its_body_is_read(start_daemon, operation):
    """Its headers are enough: an 8 MB body it never sends is not waited for (else the
    daemon would wait out the body's 60 s, and read and decode it if it came)."""
    import socket

    daemon = start_daemon(principals={"Viewer": "reader"})
    port = int(daemon.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(
            (
                f"POST /v1/{operation} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {daemon.tokens['Viewer']}\r\n"
                "Content-Type: application/json\r\nContent-Length: 8000000\r\n\r\n"
            ).encode()
        )
        reply = b""
        while b'"kind"' not in reply:
            chunk = conn.recv(4096)  # (the connection's timeout bounds each wait)
            if not chunk:
                break
            reply += chunk
    text = reply.decode("latin-1")
    assert text.startswith("HTTP/1.1 403"), text
    assert '"kind":"forbidden"' in text.replace(" ", ""), text
