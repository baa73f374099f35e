"""Identity: policies, grants, attestation, write boundaries, the registry (channel.md §1)."""

import dataclasses
import secrets

import pytest

from koinii import identity
from koinii.identity import authenticate
from tests.conftest import refused


def admin_verifier(claimed_id, credential, claims):
    return claimed_id == "AdminRoot" and credential == "root" and claims["admin"] is True


def signed(claimed_id, credential, claims):
    return credential == "sig:" + claimed_id


@pytest.fixture
def admin():
    return authenticate(
        {"claimed_id": "AdminRoot", "credential": "root", "admin": True}, verify=admin_verifier
    )


def test_context_for_drops_agent_and_adds_cx():
    assert identity.context_for("AgentAtlas") == "CxAtlas"
    assert identity.context_for("Atlas") == "CxAtlas"
    assert identity.context_for("AgentMajority") == "CxMajority"
    assert refused(lambda: identity.context_for("atlas")).kind == "naming"


def test_cooperative_trusts_the_claim_and_proof_tier_needs_a_proof():
    cooperative = authenticate({"claimed_id": "AgentAtlas"})
    assert (cooperative.policy, cooperative.authenticated, cooperative.context) == (
        "cooperative",
        False,
        "CxAtlas",
    )
    proven = authenticate(
        {"claimed_id": "AgentAtlas", "credential": "sig:AgentAtlas", "source": "atlas-daemon"},
        policy="proof-tier",
        verify=signed,
    )
    assert proven.authenticated and proven.minted and proven.source == "atlas-daemon"
    assert refused(
        lambda: authenticate({"claimed_id": "AgentAtlas"}, policy="proof-tier")
    ).kind == ("koinii/identity-unverified")


def test_a_verifier_that_says_no_is_identity_unverified():
    refusal = refused(
        lambda: authenticate(
            {"claimed_id": "AgentAtlas", "credential": "forged"}, policy="proof-tier", verify=signed
        )
    )
    assert refusal.kind == "koinii/identity-unverified"


def test_an_unknown_policy_is_refused_and_echoed():
    refusal = refused(lambda: authenticate({"claimed_id": "AgentAtlas"}, policy="made-up"))
    assert refusal.kind == "koinii/unknown-policy" and refusal.data["policy"] == "made-up"


def test_an_admin_needs_a_verifier_that_sees_the_claims():
    request = {"claimed_id": "AdminRoot", "credential": "root", "admin": True}
    refusal = refused(lambda: authenticate(request))
    assert refusal.kind == "koinii/identity-unverified"
    assert refusal.data["admin"] is True and refusal.data["verifier"] is False
    assert refused(lambda: authenticate(request, verify=lambda i, c: True)).kind == (
        "koinii/identity-unverified"
    )
    wrong = {**request, "credential": "guess"}
    assert refused(lambda: authenticate(wrong, verify=admin_verifier)).kind == (
        "koinii/identity-unverified"
    )


def test_a_short_key_names_its_type_never_its_value():
    refusal = refused(lambda: identity.set_attest_key("too-short"))
    assert refusal.kind == "koinii/bad-attest-key"
    assert refusal.data == {"key_class": "str"}
    assert "too-short" not in refusal.message and "too-short" not in str(refusal.data)
    assert refused(lambda: identity.set_attest_key(b"x" * 8)).data == {"key_class": "bytes"}


def test_a_hand_built_or_altered_grant_does_not_verify(kb, admin):
    assert admin.minted
    hand_built = identity.Principal("AgentMallory", "CxMallory", None, "cooperative", True, True)
    renamed = dataclasses.replace(admin, id="AgentMallory")
    forged = dataclasses.replace(admin, grant="00" * 32)
    for principal in (hand_built, renamed, forged):
        assert not principal.minted
        refusal = refused(
            lambda p=principal: identity.register_agent(kb, p, "AgentAtlas", "Atlas", 1)
        )
        assert refusal.kind == "koinii/registry-forbidden"
    assert identity.registered_agents(kb) == []


def test_a_grant_does_not_survive_a_key_change(kb, admin):
    identity.set_attest_key(b"k" * 32)
    try:
        assert not admin.minted
        assert refused(
            lambda: identity.register_agent(kb, admin, "AgentAtlas", "Atlas", 1)
        ).kind == ("koinii/registry-forbidden")
    finally:
        identity.set_attest_key(secrets.token_bytes(32))


def test_write_boundaries(kb, admin):
    boreas = authenticate({"claimed_id": "AgentBoreas"})
    assert refused(
        lambda: identity.ingest_into(kb, boreas, "CxAtlas", "(ran ProdCluster)")
    ).kind == ("koinii/foreign-context")
    assert refused(
        lambda: identity.ingest_into(kb, boreas, "CxRegistry", "(trustLevel AgentBoreas 9)")
    ).kind == ("koinii/registry-forbidden")
    assert refused(
        lambda: identity.ingest_into(kb, admin, "CxAtlas", "(ran ProdCluster)")
    ).kind == ("koinii/admin-off-registry")
    h = identity.ingest(kb, boreas, "(ran ProdCluster)")
    sentex = kb.sentex(h)
    assert sentex.context == "CxBoreas" and sentex.provenance["creator"] == "AgentBoreas"
    assert (
        sentex.provenance["policy"] == "cooperative" and sentex.provenance["authenticated"] is False
    )
    assert kb.sentexes_matching("(ran ?x)", "CxAtlas") == []


def test_attestation_binds_the_sentex_and_does_not_survive_copying(kb):
    atlas = authenticate(
        {"claimed_id": "AgentAtlas", "credential": "sig:AgentAtlas"},
        policy="proof-tier",
        verify=signed,
    )
    h = identity.ingest(kb, atlas, "(reliable ProdCluster)")
    assert identity.attested_by(kb, h) == "AgentAtlas"
    copied = kb.assert_(
        "(reliable StagingCluster)",
        "CxAtlas",
        creator="AgentAtlas",
        provenance={"attestation": kb.provenance(h)["attestation"]},
    )
    assert identity.attested_by(kb, copied) is None
    cooperative = identity.ingest(
        kb, authenticate({"claimed_id": "AgentAtlas"}), "(fast ProdCluster)"
    )
    assert identity.attested_by(kb, cooperative) is None


def test_the_registry_reads_are_functional(kb, admin):
    identity.register_agent(kb, admin, "AgentAtlas", "Atlas", 0.9)
    identity.register_agent(kb, admin, "AgentBoreas", "Boreas", 0.6)
    assert identity.registered_agents(kb) == ["AgentAtlas", "AgentBoreas"]
    assert identity.trust_of(kb, "AgentAtlas") == 0.9
    assert identity.display_name_of(kb, "AgentAtlas") == "Atlas"
    identity.set_trust(kb, admin, "AgentAtlas", 0.94)
    assert identity.trust_of(kb, "AgentAtlas") == 0.94
    assert len(kb.sentexes_matching("(trustLevel AgentAtlas ?t)", "CxRegistry")) == 1
    extra = kb.assert_("(trustLevel AgentAtlas 0.5)", "CxRegistry")  # stored, never "the first"
    refusal = refused(lambda: identity.trust_of(kb, "AgentAtlas"))
    assert refusal.kind == "koinii/registry-not-functional" and extra in refusal.data["handles"]
    kb.retract(extra)
    assert identity.trust_of(kb, "AgentAtlas") == 0.94
    assert identity.trust_of(kb, "AgentNobody") is None


def test_co_attribution_survives_first_writer_wins(kb):
    for name in ("AgentAtlas", "AgentBoreas"):
        identity.ingest(kb, authenticate({"claimed_id": name}), "(usesDatabase ProdCluster Pg)")
    assert identity.co_attribution(kb, "(usesDatabase ProdCluster Pg)") == ["CxAtlas", "CxBoreas"]


def test_an_authenticated_daemons_recorded_principal_attests(start_daemon):
    daemon = start_daemon(principals={"AgentAtlas": "agent"})
    atlas = daemon.client("AgentAtlas")
    h = atlas.assert_("(reliable ProdCluster)", "CxAtlas")
    assert identity.attested_by(atlas, h) == "AgentAtlas"
    open_daemon = start_daemon()
    unattested = open_daemon.client().assert_(
        "(reliable ProdCluster)", "CxAtlas", creator="AgentAtlas"
    )
    assert identity.attested_by(open_daemon.client(), unattested) is None
