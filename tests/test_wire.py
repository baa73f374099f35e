"""The daemon and the client: every operation round-trips as in-process (wire.md §2),
over the blocking client and the asyncio one alike (the `connect` fixture)."""

import pytest

import koinii
from koinii import Refused, Sym
from koinii.kb import semantic

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix


@pytest.fixture
def client(daemon, connect):
    return connect(daemon)


def script(kb):
    """The same conversation, run against a KB or a Client; returns what it observed."""
    seen = {}
    kb.assert_("(genlCx CxTeam CxAtlas)", "CxUniverse")
    kb.assert_("(genlCx CxTeam CxBoreas)", "CxUniverse")
    h = kb.assert_("(usesDatabase ProdCluster Postgres)", "CxAtlas", creator="AgentAtlas")
    seen["idempotent"] = kb.assert_("(usesDatabase  ProdCluster Postgres)", "CxAtlas") == h
    rule = kb.assert_("(implies (usesDatabase ?c ?db) (needsBackup ?c))", "CxAtlas")
    no = kb.assert_("(not (usesDatabase ProdCluster Postgres))", "CxBoreas")
    seen["sentex"] = kb.sentex(h)
    seen["missing"] = kb.sentex(99999)
    seen["provenance"] = {k: v for k, v in kb.provenance(h).items() if k != "created"}
    seen["matching"] = kb.sentexes_matching("(needsBackup ?c)", "?ctx")
    seen["query"] = kb.query("(usesDatabase ?c ?db)", "CxTeam")
    seen["conjunction"] = kb.query(["(usesDatabase ?c ?db)", "(needsBackup ?c)"], "CxAtlas")
    seen["witness"] = kb.query("(needsBackup ?c)", "?where")
    seen["argue"] = [
        kb.argue("(usesDatabase ProdCluster Postgres)", c)
        for c in ("CxTeam", "CxAtlas", "CxBoreas", "CxOther")
    ]
    seen["believed"] = (kb.believed(h), kb.believed(h, "CxTeam"), kb.believed(h, "CxBoreas"))
    seen["why"] = kb.why(seen["matching"][0].handle)
    seen["why_not"] = (kb.why_not(h), kb.why_not(h, "CxBoreas"), kb.why_not(99999))
    seen["contradictions"] = kb.contradictions("CxTeam")
    seen["conflicts"] = kb.conflicts()
    seen["violations"] = kb.violations()
    seen["up"] = kb.context_up("CxTeam")
    seen["down"] = kb.context_down("CxAtlas")
    seen["check"] = (kb.check("(fine Thing)", "CxAtlas"), kb.check("(Bad Thing)", "CxAtlas"))
    seen["check_edit"] = kb.check_edit(
        add=[("(a B)", "CxAtlas"), ("(a ?x)", "CxAtlas")], remove=[-1]
    )
    edited = kb.edit(add=[("(color Sky Blue)", "CxAtlas", {"strength": "monotonic"})], remove=[no])
    seen["edited"] = (edited.handles != [], edited.removed_sentexes, edited.removed_justifications)
    seen["added_provenance"] = kb.add_provenance(h, {"tag": "x"})["tag"]
    loaded = kb.load_text("(likes Ann Tea)\n; a comment\n(likes Bob Coffee)", "CxAtlas")
    seen["loaded"] = len(loaded.handles)
    retracted = kb.retract(rule)
    seen["retracted"] = (retracted.removed_sentexes, retracted.removed_justifications)
    seen["after"] = kb.query("(needsBackup ?c)", "CxAtlas")
    stats = kb.stats()
    seen["stats"] = {k: v for k, v in stats.items() if k != "seq"}
    return seen


@pytest.mark.backends("sqlite", "postgres")
def test_every_operation_round_trips_with_the_same_results_as_in_process(client):
    with koinii.open_kb() as kb:
        local = script(kb)
    remote = script(client)
    for key in local:
        if key == "sentex":  # created times differ between the two runs
            assert {**remote[key].__dict__, "provenance": None} == {
                **local[key].__dict__,
                "provenance": None,
            }
        elif key == "matching":
            assert [s.text for s in remote[key]] == [s.text for s in local[key]]
        else:
            assert remote[key] == local[key], key


def test_terms_come_back_as_terms(client):
    client.assert_('(says AgentAtlas "héllo\\n" 42 1.5 true (sentexHandle 1))', "CxA")
    [binding] = client.query("(says AgentAtlas ?s ?n ?f ?b ?h)", "CxA")
    assert binding == {
        "?s": "héllo\n",
        "?n": 42,
        "?f": 1.5,
        "?b": True,
        "?h": (Sym("sentexHandle"), 1),
    }
    assert type(binding["?b"]) is bool


@pytest.mark.parametrize(
    "call, kind",
    [
        (lambda c: c.assert_("(a (b", "CxA"), "parse"),
        (lambda c: c.assert_("()", "CxA"), "shape"),
        (lambda c: c.assert_("(" * 65 + "a" + ")" * 65, "CxA"), "shape"),
        (lambda c: c.assert_("(Bad x)", "CxA"), "naming"),
        (lambda c: c.assert_("(p a)", "deploy"), "naming"),
        (lambda c: c.assert_("(p ?x)", "CxA"), "not-ground"),
        (lambda c: c.assert_("(genlCx CxA CxA)", "CxUniverse"), "not-well-formed"),
        (lambda c: c.assert_("(p (sentexHandle 99999))", "CxA"), "unknown-handle"),
        (lambda c: c.assert_("(implies (p ?x) (q ?y))", "CxA"), "not-range-restricted"),
        (lambda c: c.assert_("(p a)", "CxEverything"), "read-only-context"),
        (lambda c: c.assert_("(p a)", "CxA", strength="sure"), "bad-option"),
        (
            lambda c: c.assert_("(p a)", "CxA", provenance={"principal": "AgentX"}),
            "reserved-provenance",
        ),
        (lambda c: c.edit(add=[("(p a)", "CxA", {"colour": 1})]), "unknown-option"),
        (lambda c: c.retract(0), "bad-handle"),
        (lambda c: c.watch(goal="(and (p ?x) (q ?x))", ctx="CxA"), "not-watchable"),
        (lambda c: c.poll("nope", 0), "unknown-subscription"),
        (lambda c: c.changes(-1), "bad-cursor"),
    ],
)
def test_every_refusal_kind_crosses_the_wire_intact(client, call, kind):
    seq = client.seq
    with pytest.raises(Refused) as refusal:
        call(client)
    assert refusal.value.kind == kind
    assert refusal.value.message
    assert client.seq == seq


def test_a_refused_batch_says_where_over_the_wire(client):
    with pytest.raises(Refused) as refusal:
        client.edit(add=[("(p a)", "CxA"), ("(p ?x)", "CxA")])
    assert refusal.value.kind == "not-ground"
    assert refusal.value.data["rolled_back"] is True
    assert refusal.value.data["in"] == "add" and refusal.value.data["index"] == 1
    assert client.query("(p a)", "CxA") == []


def test_health_needs_no_token_and_reports_the_seq(start_daemon, connect):
    daemon = start_daemon(principals={"AgentAtlas": "agent"})
    health = connect(daemon).health()
    assert health["ok"] is True and health["version"] == koinii.__version__
    assert isinstance(health["seq"], int)
    assert health["durability"]["backend"] in ("sqlite", "postgresql")  # the store it runs on
    assert health["ranking"] == ("hybrid" if semantic.installed() else "lexical")


def test_the_openapi_document_lists_every_operation(daemon):
    import json
    import urllib.request

    with urllib.request.urlopen(daemon.url + "/openapi.json") as r:
        doc = json.load(r)
    assert doc["openapi"].startswith("3.")
    assert "/v1/assert" in doc["paths"] and "/v1/poll" in doc["paths"]


def test_a_daemon_that_cannot_be_reached_is_unavailable(connect, unreachable_url):
    client = connect(unreachable_url, timeout=2)
    with pytest.raises(koinii.Unavailable):
        client.stats()
