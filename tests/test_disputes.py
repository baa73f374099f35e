"""Disputes: reads, ids and the lifecycle (disputes.md §1; upstream-scenarios §6)."""

import pytest

from koinii import Sym, disputes
from tests.conftest import channel_sees, holds, refused

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

P = "(reliable ProdCluster)"
NOT_P = "(not (reliable ProdCluster))"
T0 = 1_750_000_000_000


@pytest.fixture
def clash(kb):
    """Atlas holds P, Boreas holds (not P), CxDeploy sees both: (p, not_p, id)."""
    p = holds(kb, "AgentAtlas", P)
    n = holds(kb, "AgentBoreas", NOT_P)
    channel_sees(kb, "CxDeploy", "AgentAtlas", "AgentBoreas")
    return p, n, (p, n)


class Counting:
    """The KB, counting the whole-KB clash scans made through it."""

    def __init__(self, kb):
        self.kb = kb
        self.scans = 0

    def contradictions(self, ctx=None):
        self.scans += 1
        return self.kb.contradictions(ctx)

    def conflicts(self, ctx=None):
        self.scans += 1
        return self.kb.conflicts(ctx)

    def __getattr__(self, name):
        return getattr(self.kb, name)


# --- what is a dispute ---------------------------------------------------------------------------


def test_a_coexisting_default_clash_is_disputed_not_defeated(kb, clash):
    assert kb.query(P, "CxDeploy") == [{}] and kb.query(NOT_P, "CxDeploy") == [{}]
    assert kb.argue(P, "CxDeploy") == "contradiction"
    assert disputes.is_disputed(kb, P, "CxDeploy")
    assert disputes.disputed(kb, "CxDeploy")


def test_a_derived_clash_is_detected_like_an_asserted_one(kb):
    kb.assert_("(implies (green_audit ?x) (reliable ?x))", "CxDeploy")
    kb.assert_("(implies (failed_failover ?x) (not (reliable ?x)))", "CxDeploy")
    holds(kb, "AgentAtlas", "(green_audit ProdCluster)")
    holds(kb, "AgentBoreas", "(failed_failover ProdCluster)")
    channel_sees(kb, "CxDeploy", "AgentAtlas", "AgentBoreas")
    [entry] = disputes.disputes_in(kb, "CxDeploy")
    assert all(kb.sentex(h).derived for h in entry["handles"])  # neither side is a premise
    assert kb.argue(P, "CxDeploy") == "contradiction"
    assert disputes.is_disputed(kb, P, "CxDeploy")


def test_a_clean_strength_defeat_is_resolved_not_disputed(kb):
    kb.assert_(P, "CxDeploy", strength="monotonic")
    kb.assert_(NOT_P, "CxDeploy")
    assert kb.query(NOT_P, "CxDeploy") == []
    assert kb.contradictions("CxDeploy") == [] and disputes.disputes_in(kb, "CxDeploy") == []
    assert kb.argue(P, "CxDeploy") == "true"
    assert not disputes.is_disputed(kb, P, "CxDeploy")


def test_the_uncontested_and_the_unknown_are_not_disputed(kb):
    holds(kb, "AgentAtlas", P)
    channel_sees(kb, "CxDeploy", "AgentAtlas")
    assert not disputes.is_disputed(kb, P, "CxDeploy")
    assert not disputes.is_disputed(kb, "(fast ProdCluster)", "CxDeploy")
    assert not disputes.disputed(kb, "CxDeploy")


def test_a_monotonic_conflict_is_a_dispute_of_class_conflict(kb):
    holds(kb, "AgentAtlas", P, "monotonic")
    holds(kb, "AgentBoreas", NOT_P, "monotonic")
    channel_sees(kb, "CxDeploy", "AgentAtlas", "AgentBoreas")
    assert kb.argue(P, "CxDeploy") == "contradiction"
    assert disputes.is_disputed(kb, P, "CxDeploy")
    [entry] = disputes.disputes_in(kb, "CxDeploy")
    assert entry["dispute_class"] == "conflict"
    assert kb.conflicts() != [] and kb.contradictions() == []


def test_a_dispute_is_seen_where_both_sides_are_visible(kb, clash):
    kb.assert_("(genlCx CxUpper CxDeploy)", "CxUniverse")
    kb.assert_("(genlCx CxOnlyAtlas CxAtlas)", "CxUniverse")
    kb.assert_("(genlCx CxSibling CxCore)", "CxUniverse")
    assert disputes.disputed(kb, "CxDeploy") and disputes.disputed(kb, "CxUpper")
    for ctx in ("CxOnlyAtlas", "CxSibling", "CxAtlas"):
        assert not disputes.disputed(kb, ctx), ctx
    assert disputes.is_disputed(kb, P, "CxUpper")
    assert not disputes.is_disputed(kb, P, "CxOnlyAtlas")


def test_the_disputes_of_every_context_together_are_the_whole(kb, clash):
    holds(kb, "AgentCiel", "(fast ProdCluster)")
    holds(kb, "AgentDoris", "(not (fast ProdCluster))")
    channel_sees(kb, "CxOps", "AgentCiel", "AgentDoris")
    whole = {disputes.dispute_id(c) for c in kb.contradictions() + kb.conflicts()}
    contexts = {"CxDeploy", "CxOps", "CxAtlas", "CxBoreas", "CxCiel", "CxDoris", "CxUniverse"}
    union = {e["dispute_id"] for ctx in contexts for e in disputes.disputes_in(kb, ctx)}
    assert len(whole) == 2 and union == whole


def test_each_channel_sees_only_its_own_dispute(kb, clash):
    holds(kb, "AgentCiel", "(fast ProdCluster)")
    holds(kb, "AgentDoris", "(not (fast ProdCluster))")
    channel_sees(kb, "CxOps", "AgentCiel", "AgentDoris")
    [deploy] = disputes.disputes_in(kb, "CxDeploy")
    [ops] = disputes.disputes_in(kb, "CxOps")
    assert deploy["dispute_id"] == clash[2] and ops["dispute_id"] != deploy["dispute_id"]


def test_the_named_read_scans_nothing_and_the_any_form_scans(kb, clash):
    counting = Counting(kb)
    assert disputes.is_disputed(counting, P, "CxDeploy")
    assert counting.scans == 0
    assert disputes.disputed(counting, "CxDeploy")
    assert counting.scans >= 1


# --- ids ---------------------------------------------------------------------------------------


def test_an_id_is_the_sorted_handles_whatever_the_order(kb, clash):
    p, n, key = clash
    [entry] = disputes.disputes_in(kb, "CxDeploy")
    assert entry["dispute_id"] == key == disputes.dispute_id(entry)
    assert disputes.dispute_id([n, p]) == disputes.dispute_id((p, n)) == key
    assert disputes.dispute_term([n, p]) == disputes.dispute_term([p, n])


def test_the_term_of_a_dispute_names_every_member_in_order():
    h = Sym("sentexHandle")
    assert disputes.dispute_term([479, 478]) == (Sym("dispute"), (h, 478), (h, 479))
    assert disputes.dispute_term([999, 478, 479]) == (
        Sym("dispute"),
        (h, 478),
        (h, 479),
        (h, 999),
    )
    assert disputes.dispute_term([478, 479, 999]) != disputes.dispute_term([478, 479, 1000])
    assert disputes.dispute_term([478, 479, 999]) != disputes.dispute_term([478, 479])


def test_a_clash_of_three_is_one_dispute_with_three_members(kb, clash):
    c = holds(kb, "AgentCiel", NOT_P)
    channel_sees(kb, "CxDeploy", "AgentCiel")
    [entry] = disputes.disputes_in(kb, "CxDeploy")
    assert entry["dispute_id"] == tuple(sorted((*clash[:2], c)))
    disputes.mark_notified(kb, entry["dispute_id"], T0)
    assert disputes.dispute_state(kb, entry["dispute_id"]) == "notified"


def test_a_dispute_is_named_by_the_clash_a_context_observes(kb):
    """Atlas clashes with Boreas in CxDeploy and with Ciel in CxOps: two disputes, each
    live; the three together are no context's dispute."""
    a = holds(kb, "AgentAtlas", P)
    b = holds(kb, "AgentBoreas", NOT_P)
    c = holds(kb, "AgentCiel", NOT_P)
    channel_sees(kb, "CxDeploy", "AgentAtlas", "AgentBoreas")
    channel_sees(kb, "CxOps", "AgentAtlas", "AgentCiel")
    assert [e["dispute_id"] for e in disputes.disputes_in(kb, "CxDeploy")] == [(a, b)]
    assert [e["dispute_id"] for e in disputes.disputes_in(kb, "CxOps")] == [(a, c)]
    assert disputes.dispute_state(kb, (a, b)) == disputes.dispute_state(kb, (a, c)) == "open"
    assert disputes.dispute_state(kb, (a, b, c)) == "resolved"


def test_a_malformed_id_is_refused(kb):
    for bad in ([], [7], [7, 7], [0, 3], ["1", "2"], [True, 2], None, "12"):
        assert refused(lambda b=bad: disputes.dispute_id(b)).kind == "koinii/bad-dispute-id"


# --- the lifecycle -------------------------------------------------------------------------------


def test_open_then_notified_then_resolved_when_a_side_goes(kb, clash):
    _p, n, key = clash
    assert disputes.dispute_state(kb, key) == "open"
    assert [e["dispute_id"] for e in disputes.pending_disputes(kb, "CxDeploy")] == [key]
    disputes.mark_notified(kb, key, T0)
    assert disputes.dispute_state(kb, key) == "notified"
    assert disputes.is_notified(kb, key) and disputes.pending_disputes(kb, "CxDeploy") == []
    kb.retract(n)
    assert kb.query(NOT_P, "CxDeploy") == [] and kb.argue(P, "CxDeploy") == "true"
    assert disputes.disputes_in(kb, "CxDeploy") == []
    assert disputes.dispute_state(kb, key) == "resolved"


def test_reopen_clears_the_notified_mark(kb, clash):
    key = clash[2]
    disputes.mark_notified(kb, key, T0)
    assert disputes.reopen(kb, key) == 1
    assert not disputes.is_notified(kb, key)
    assert disputes.dispute_state(kb, key) == "open"


def test_a_stale_dispute_stays_live_and_its_mark_is_explainable(kb, clash):
    key = clash[2]
    mark = disputes.mark_stale(kb, key, T0 + 9999, "TimedOut")
    assert disputes.is_stale(kb, key) and disputes.dispute_state(kb, key) == "stale"
    assert [e["dispute_id"] for e in disputes.disputes_in(kb, "CxDeploy")] == [key]
    assert kb.argue(P, "CxDeploy") == "contradiction"
    stored = kb.sentexes_matching("(disputeStale ?d ?at ?why)", disputes.DISPUTES)
    assert [s.handle for s in stored] == [mark]
    assert stored[0].sentence[3] == Sym("TimedOut") and kb.why(mark)["believed"]
    assert disputes.reopen(kb, key) == 1
    assert disputes.dispute_state(kb, key) == "open"


def test_stale_outranks_notified_and_reopen_clears_both(kb, clash):
    key = clash[2]
    disputes.mark_notified(kb, key, T0)
    disputes.mark_stale(kb, key, T0 + 1, "TimedOut")
    assert disputes.dispute_state(kb, key) == "stale"
    assert len(disputes.marks_of(kb, key)) == 2
    assert disputes.reopen(kb, key) == 2
    assert not disputes.is_notified(kb, key) and not disputes.is_stale(kb, key)
    assert disputes.dispute_state(kb, key) == "open"
    assert disputes.reopen(kb, key) == 0


def test_the_mark_vocabulary_ships_and_is_enforced(kb, clash):
    key = clash[2]
    arities = kb.query("(arity ?p ?n)", disputes.DISPUTES)
    declared = {b["?p"].name: b["?n"] for b in arities}
    assert declared["disputeNotified"] == 2 and declared["disputeStale"] == 3
    assert "CxCore" in kb.context_up(disputes.DISPUTES)
    term = disputes.dispute_term(key)
    wrong = refused(lambda: kb.assert_((Sym("disputeStale"), term, T0), disputes.DISPUTES))
    assert wrong.kind == "arity"
    assert disputes.mark_stale(kb, key, T0, "TimedOut") > 0


def test_a_mark_on_a_handle_that_is_gone_is_refused(kb, clash):
    _p, n, key = clash
    kb.retract(n)
    refusal = refused(lambda: disputes.mark_notified(kb, key, T0))
    assert refusal.kind == "koinii/no-such-handle" and refusal.data["handle"] == n
    assert kb.sentexes_matching("(disputeNotified ?d ?at)", disputes.DISPUTES) == []


def test_the_lifecycle_runs_the_same_through_a_daemon(client):
    holds(client, "AgentAtlas", P)
    holds(client, "AgentBoreas", NOT_P)
    channel_sees(client, "CxDeploy", "AgentAtlas", "AgentBoreas")
    [entry] = disputes.pending_disputes(client, "CxDeploy")
    key = entry["dispute_id"]
    assert disputes.dispute_state(client, key) == "open"
    disputes.mark_notified(client, key, T0)
    disputes.mark_stale(client, key, T0 + 1)
    assert disputes.dispute_state(client, key) == "stale"
    assert disputes.reopen(client, key) == 2
    assert disputes.dispute_state(client, key) == "open"
