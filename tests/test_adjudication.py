"""Adjudication: notify, sweep, rulings, ballots and the majority, contested premises
(disputes.md §2; upstream-scenarios §7)."""

import itertools

import pytest

import koinii
from koinii import disputes, identity
from koinii.channel import agent as channel
from koinii.disputes import adjudication, majority, quarantine, rulings
from koinii.disputes.majority import MAJORITY_ARBITER
from koinii.identity import grants
from tests.conftest import channel_sees, holds, refused

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

P = "(reliable ProdCluster)"
NOT_P = "(not (reliable ProdCluster))"
T0 = 1_750_000_000_000


def verify(claimed_id, credential, claims):
    return credential == "sig:" + claimed_id


def principal(agent, policy="proof-tier"):
    request = {"claimed_id": agent, "credential": "sig:" + agent}
    return identity.authenticate(request, policy=policy, verify=verify)


def ballot(kb, agent, stance, target):
    """An attested ballot: cast by a proof-tier principal whose credential proves its id."""
    return majority.cast_ballot(kb, principal(agent), stance, target)


def askable(kb, sentence, ctx):
    return kb.query(sentence, ctx) == [{}]


def make_clash(kb, *extra_voters):
    """Atlas holds P, Boreas (not P), CxDeploy sees both (and the extra voters)."""
    p = holds(kb, "AgentAtlas", P)
    n = holds(kb, "AgentBoreas", NOT_P)
    channel_sees(kb, "CxDeploy", "AgentAtlas", "AgentBoreas", *extra_voters)
    return p, n, (p, n)


@pytest.fixture
def clash(kb):
    return make_clash(kb, "AgentCiel")


class Counting:
    """The KB, counting whole-KB contradiction scans made through it."""

    def __init__(self, kb):
        self.kb = kb
        self.scans = 0

    def contradictions(self, ctx=None):
        self.scans += 1
        return self.kb.contradictions(ctx)

    def __getattr__(self, name):
        return getattr(self.kb, name)


# --- leave open and notify ------------------------------------------------------------------------


def test_notify_calls_the_sink_once_and_changes_no_belief(kb, clash):
    key = clash[2]
    before = len(kb.contradictions())
    heard = []
    notified = adjudication.notify_disputes(kb, "CxDeploy", heard.append)
    assert [e["dispute_id"] for e in notified] == [key]
    assert [e["dispute_id"] for e in heard] == [key]
    assert askable(kb, P, "CxDeploy") and askable(kb, NOT_P, "CxDeploy")
    assert kb.argue(P, "CxDeploy") == "contradiction"
    assert len(kb.contradictions()) == before


def test_notify_fires_once_across_calls(kb, clash):
    heard = []
    for _ in range(3):
        adjudication.notify_disputes(kb, "CxDeploy", heard.append)
    assert len(heard) == 1


def test_one_poll_tick_notifies_and_sweeps(kb, clash):
    t0 = adjudication.opened_at(kb, clash[2])
    notified, stale = [], []
    tick = adjudication.poll(
        kb,
        "CxDeploy",
        timeout_ms=1000,
        notify_sink=notified.append,
        stale_sink=stale.append,
        clock=lambda: t0 + 2000,
    )
    assert (len(tick["notified"]), len(tick["stale"])) == (1, 1)
    assert (len(notified), len(stale)) == (1, 1)
    assert disputes.dispute_state(kb, clash[2]) == "stale"


def test_the_state_is_a_plain_query_of_an_explainable_mark(kb, clash):
    key = clash[2]
    assert disputes.dispute_state(kb, key) == "open"
    adjudication.notify_disputes(kb, "CxDeploy", clock=lambda: T0)
    assert disputes.dispute_state(kb, key) == "notified"
    [mark] = kb.sentexes_matching("(disputeNotified ?d ?at)", disputes.DISPUTES)
    assert mark.sentence[2] == T0 and kb.why(mark.handle)["believed"]


def test_the_stale_sweep_marks_only_disputes_past_the_timeout(kb, clash):
    key = clash[2]
    t0 = adjudication.opened_at(kb, key)
    assert t0 is not None
    swept = []
    assert (
        adjudication.sweep_stale(kb, "CxDeploy", 1000, swept.append, clock=lambda: t0 + 500) == []
    )
    assert disputes.dispute_state(kb, key) == "open"
    late = adjudication.sweep_stale(kb, "CxDeploy", 1000, swept.append, clock=lambda: t0 + 2000)
    assert [e["dispute_id"] for e in late] == [key] and len(swept) == 1
    assert disputes.dispute_state(kb, key) == "stale"
    assert kb.argue(P, "CxDeploy") == "contradiction"
    assert [e["dispute_id"] for e in disputes.disputes_in(kb, "CxDeploy")] == [key]
    assert adjudication.sweep_stale(kb, "CxDeploy", 1000, clock=lambda: t0 + 3000) == []


def test_a_derived_clash_ages_from_what_it_rests_on_not_from_zero(kb):
    kb.assert_("(implies (fast ?x) (reliable ProdCluster))", "CxDeploy")
    kb.assert_("(implies (flaky ?x) (not (reliable ProdCluster)))", "CxDeploy")
    fast = holds(kb, "AgentAtlas", "(fast Disk1)")
    flaky = holds(kb, "AgentBoreas", "(flaky Net1)")
    channel_sees(kb, "CxDeploy", "AgentAtlas", "AgentBoreas")
    [entry] = disputes.disputes_in(kb, "CxDeploy")
    assert all(kb.sentex(h).derived for h in entry["handles"])
    t0 = adjudication.opened_at(kb, entry["dispute_id"])
    premises = max(kb.provenance(h)["created"] for h in (fast, flaky))
    assert t0 is not None and t0 >= premises
    assert adjudication.sweep_stale(kb, "CxDeploy", 1000, clock=lambda: t0 + 500) == []
    assert disputes.dispute_state(kb, entry["dispute_id"]) == "open"
    assert len(adjudication.sweep_stale(kb, "CxDeploy", 1000, clock=lambda: t0 + 2000)) == 1


def test_the_stale_sweep_scans_once_for_many_disputes(kb, clash):
    holds(kb, "AgentAtlas", "(fast ProdCluster)")
    holds(kb, "AgentBoreas", "(not (fast ProdCluster))")
    t0 = max(
        adjudication.opened_at(kb, e["dispute_id"]) for e in disputes.disputes_in(kb, "CxDeploy")
    )
    counting = Counting(kb)
    swept = adjudication.sweep_stale(counting, "CxDeploy", 1000, clock=lambda: t0 + 2000)
    assert len(swept) == 2 and counting.scans == 1
    assert adjudication.sweep_stale(kb, "CxDeploy", 1000, clock=lambda: t0 + 2000) == []


# --- an arbiter's ruling -----------------------------------------------------------------------


def test_a_ruling_resolves_the_dispute_and_explains_itself(kb, clash):
    _p, n, key = clash
    ruling = rulings.rule(kb, "AgentArbiter", key, P, "CxDeploy", clock=lambda: T0 + 5000)
    assert kb.contradictions("CxDeploy") == []
    assert disputes.dispute_state(kb, key) == "resolved"
    assert not disputes.is_disputed(kb, P, "CxDeploy") and kb.argue(P, "CxDeploy") == "true"
    assert not askable(kb, NOT_P, "CxDeploy") and kb.why_not(n) == "defeated"
    sentex = kb.sentex(ruling)
    assert (sentex.context, sentex.strength, sentex.believed) == ("CxArbiter", "monotonic", True)
    assert sentex.provenance["creator"] == "AgentArbiter"
    assert sentex.provenance["adjudication"] == {"dispute": list(key), "at": T0 + 5000}
    assert kb.why(ruling)["believed"]
    assert rulings.who_ruled(kb, ruling) == {
        "arbiter": "AgentArbiter",
        "dispute_ids": [key],
        "at": T0 + 5000,
    }


def test_ruling_the_negative_side(kb, clash):
    key = clash[2]
    rulings.rule(kb, "AgentArbiter", key, NOT_P, "CxDeploy")
    assert disputes.dispute_state(kb, key) == "resolved"
    assert kb.argue(P, "CxDeploy") == "false"
    assert askable(kb, NOT_P, "CxDeploy") and not askable(kb, P, "CxDeploy")


def test_retracting_the_ruling_reopens_the_dispute_fresh(kb, clash):
    key = clash[2]
    adjudication.notify_disputes(kb, "CxDeploy")
    ruling = rulings.rule(kb, "AgentArbiter", key, P, "CxDeploy")
    assert disputes.marks_of(kb, key) == []  # the episode ended when the ruling landed
    kb.retract(ruling)
    assert disputes.is_disputed(kb, P, "CxDeploy") and kb.argue(P, "CxDeploy") == "contradiction"
    assert askable(kb, P, "CxDeploy") and askable(kb, NOT_P, "CxDeploy")
    assert disputes.dispute_state(kb, key) == "open"
    assert rulings.who_ruled(kb, ruling) is None


def test_a_reopened_dispute_is_notified_again(kb, clash):
    heard = []
    adjudication.notify_disputes(kb, "CxDeploy", heard.append)
    ruling = rulings.rule(kb, "AgentArbiter", clash[2], P, "CxDeploy")
    kb.retract(ruling)
    adjudication.notify_disputes(kb, "CxDeploy", heard.append)
    assert len(heard) == 2


def test_an_arbiter_supersedes_its_own_ruling(kb, clash):
    key = clash[2]
    first = rulings.rule(kb, "AgentArbiter", key, P, "CxDeploy")
    assert kb.argue(P, "CxDeploy") == "true"
    second = rulings.rule(kb, "AgentArbiter", key, NOT_P, "CxDeploy")
    assert not kb.believed(first) and kb.sentex(first) is None
    assert rulings.standing_rulings(kb, "AgentArbiter", key) == [second]
    assert kb.argue(P, "CxDeploy") == "false"
    seq = kb.seq
    assert rulings.rule(kb, "AgentArbiter", key, NOT_P, "CxDeploy") == second
    assert kb.seq == seq  # ruling the same side again changes nothing


def test_who_ruled_a_plain_claim_is_nobody(kb, clash):
    assert rulings.who_ruled(kb, clash[0]) is None
    assert rulings.who_ruled(kb, 999_999) is None


def test_one_ruling_settles_two_disputes_and_a_new_one_withdraws_it(kb):
    """Atlas's P clashes with Boreas in CxDeploy and with Ciel in CxOps: the same side
    upheld on both is one sentex, tagged for both; its first tag is never rewritten."""
    p = holds(kb, "AgentAtlas", P)
    b = holds(kb, "AgentBoreas", NOT_P)
    c = holds(kb, "AgentCiel", NOT_P)
    channel_sees(kb, "CxDeploy", "AgentAtlas", "AgentBoreas")
    channel_sees(kb, "CxOps", "AgentAtlas", "AgentCiel")
    first, second = (p, b), (p, c)
    h1 = rulings.rule(kb, "AgentArbiter", first, P, "CxDeploy")
    h2 = rulings.rule(kb, "AgentArbiter", second, P, "CxOps")
    assert h1 == h2
    assert rulings.standing_rulings(kb, "AgentArbiter", first) == [h1]
    assert rulings.standing_rulings(kb, "AgentArbiter", second) == [h1]
    assert rulings.who_ruled(kb, h1)["dispute_ids"] == [first, second]
    provenance = kb.provenance(h1)
    assert provenance["adjudication"]["dispute"] == list(first)
    assert provenance["adjudication#2"]["dispute"] == list(second)
    h3 = rulings.rule(kb, "AgentArbiter", first, NOT_P, "CxDeploy")
    assert not kb.believed(h1)
    assert rulings.standing_rulings(kb, "AgentArbiter", first) == [h3]
    assert kb.argue(P, "CxDeploy") == "false"


def test_a_dispute_id_is_accepted_in_either_spelling(kb, clash):
    p, n, key = clash
    ruling = rulings.rule(kb, "AgentArbiter", key, P, "CxDeploy")
    assert rulings.standing_rulings(kb, "AgentArbiter", (n, p)) == [ruling]
    assert rulings.rule(kb, "AgentArbiter", [n, p], P, "CxDeploy") == ruling


def test_an_arbiter_who_is_a_party_is_refused(kb, clash):
    p, _n, key = clash
    seq = kb.seq
    for side in (P, NOT_P):
        refusal = refused(lambda s=side: rulings.rule(kb, "AgentAtlas", key, s, "CxDeploy"))
        assert refusal.kind == "arbiter-is-party"
        assert refusal.data == {"arbiter": "AgentAtlas", "dispute_id": list(key), "handles": [p]}
    assert kb.seq == seq and askable(kb, P, "CxAtlas")
    assert rulings.rule(kb, "AgentArbiter", key, P, "CxDeploy") > 0


def test_holding_a_defeated_copy_of_a_side_is_not_being_a_party(kb, clash):
    key = clash[2]
    kb.assert_("(implies (green ?x) (reliable ?x))", "CxDora")
    kb.assert_("(green ProdCluster)", "CxDora", creator="AgentDora")
    kb.assert_("(not (green ProdCluster))", "CxDora", strength="monotonic", creator="AgentDora")
    [stored] = [s for s in kb.sentexes_matching(P, "CxEverything") if s.context == "CxDora"]
    assert not stored.believed
    rulings.rule(kb, "AgentDora", key, NOT_P, "CxDeploy")
    assert kb.argue(P, "CxDeploy") == "false"


def test_a_refused_ruling_leaves_everything_as_it_was(kb, clash):
    _p, n, key = clash
    adjudication.notify_disputes(kb, "CxDeploy")
    seq = kb.seq
    cases = [
        ("(reliable ?x)", "CxDeploy", "not-ground"),
        ("(fast ProdCluster)", "CxDeploy", "koinii/not-a-side"),
        (P, "CxArbiter", "koinii/not-a-channel"),
        (P, "CxRegistry", "koinii/not-a-channel"),
    ]
    for upheld, ctx, kind in cases:
        refusal = refused(lambda u=upheld, c=ctx: rulings.rule(kb, "AgentArbiter", key, u, c))
        assert refusal.kind == kind
    assert kb.seq == seq
    assert disputes.dispute_state(kb, key) == "notified"
    assert rulings.standing_rulings(kb, "AgentArbiter", key) == []
    kb.retract(n)
    gone = refused(lambda: rulings.rule(kb, "AgentArbiter", key, P, "CxDeploy"))
    assert gone.kind == "koinii/no-such-handle" and gone.data["handle"] == n


def test_a_speech_act_dispute_drives_the_whole_loop(kb):
    medium = channel.local(kb)
    atlas = channel.join(medium, "CxDeploy", "AgentAtlas")
    boreas = channel.join(medium, "CxDeploy", "AgentBoreas")
    claim = atlas.assert_(P)
    boreas.dispute(claim)
    assert disputes.is_disputed(kb, P, "CxDeploy")
    assert askable(kb, f"(contested (sentexHandle {claim}))", "CxDeploy")
    heard = []
    adjudication.notify_disputes(kb, "CxDeploy", heard.append)
    assert len(heard) == 1
    rulings.rule(kb, "AgentArbiter", heard[0]["dispute_id"], P, "CxDeploy")
    assert disputes.dispute_state(kb, heard[0]["dispute_id"]) == "resolved"


# --- reasoning on contested premises; quarantine ------------------------------------------------


def test_reasoning_goes_on_over_a_dispute_and_says_so(kb, clash):
    p = clash[0]
    kb.assert_("(implies (reliable ?x) (deployable ?x))", "CxDeploy")
    kb.assert_("(implies (deployable ?x) (shippable ?x))", "CxDeploy")
    kb.assert_("(fast ProdCluster)", "CxDeploy")
    for conclusion in ("(deployable ProdCluster)", "(shippable ProdCluster)"):
        assert askable(kb, conclusion, "CxDeploy")
        assert quarantine.rests_on_contested(kb, conclusion, "CxDeploy")
    assert kb.argue(P, "CxDeploy") == "contradiction"
    assert quarantine.contested_premises(kb, "(deployable ProdCluster)", "CxDeploy") == [p]
    assert not quarantine.rests_on_contested(kb, "(fast ProdCluster)", "CxDeploy")


def test_a_conclusion_stored_below_the_channel_is_still_flagged(kb, clash):
    kb.assert_("(implies (reliable ?x) (deployable ?x))", "CxAtlas")
    deployable = "(deployable ProdCluster)"
    assert askable(kb, deployable, "CxDeploy")
    assert kb.sentexes_matching(deployable, "CxDeploy") == []
    assert [s.context for s in kb.sentexes_matching(deployable, "?ctx")] == ["CxAtlas"]
    premises = quarantine.contested_premises(kb, deployable, "CxDeploy")
    assert [kb.sentex(h).text for h in premises] == [P]
    assert not askable(kb, deployable, "CxBoreas")
    assert quarantine.contested_premises(kb, deployable, "CxBoreas") == []


def test_quarantine_hides_a_contested_claim_from_the_channel_reversibly(kb, clash):
    p = clash[0]
    kb.assert_("(implies (reliable ?x) (deployable ?x))", "CxDeploy")
    quarantine.quarantine(kb, "CxDeploy", p)
    assert quarantine.quarantined(kb, "CxDeploy") == [p]
    assert not askable(kb, P, "CxDeploy") and askable(kb, P, "CxAtlas")
    assert not askable(kb, "(deployable ProdCluster)", "CxDeploy")
    assert kb.argue(P, "CxDeploy") != "contradiction"
    assert quarantine.unquarantine(kb, "CxDeploy", p) == 1
    assert quarantine.quarantined(kb, "CxDeploy") == []
    assert askable(kb, P, "CxDeploy") and askable(kb, "(deployable ProdCluster)", "CxDeploy")
    assert kb.argue(P, "CxDeploy") == "contradiction"
    assert quarantine.unquarantine(kb, "CxDeploy", p) == 0


FIVE = ["whirs", "echoes", "alpha", "rumbles", "corks"]


@pytest.mark.parametrize("order", ["given", "reversed", "sorted"])
def test_contested_premises_do_not_depend_on_assertion_order(order):
    predicates = {"given": FIVE, "reversed": FIVE[::-1], "sorted": sorted(FIVE)}[order]
    with koinii.open_kb() as kb:
        channel_sees(kb, "CxDeploy", "AgentAtlas", "AgentBoreas")
        body = " ".join(f"({pred} ?x)" for pred in FIVE)
        kb.assert_(f"(implies (and {body}) (deployable ?x))", "CxDeploy")
        for pred in predicates:
            holds(kb, "AgentAtlas", f"({pred} ProdCluster)")
            holds(kb, "AgentBoreas", f"(not ({pred} ProdCluster))")
        premises = quarantine.contested_premises(kb, "(deployable ProdCluster)", "CxDeploy")
        texts = [kb.sentex(h).text for h in premises]
    assert texts == [f"({pred} ProdCluster)" for pred in sorted(FIVE)]


# --- ballots and the majority ---------------------------------------------------------------------


def test_a_tie_leaves_the_dispute_open_and_a_majority_rules(kb, clash):
    p, _n, key = clash
    nobody = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert nobody == {
        "for": 0,
        "against": 0,
        "outcome": "tie",
        "ruling": None,
        "withdrawn": [],
        "changed": False,
        "ignored": [],
    }
    ballot(kb, "AgentAtlas", "for", p)
    ballot(kb, "AgentBoreas", "against", p)
    assert majority.tally(kb, p) == {"for": 1, "against": 1}
    tie = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert (tie["outcome"], tie["ruling"]) == ("tie", None)
    assert disputes.is_disputed(kb, P, "CxDeploy")
    ballot(kb, "AgentCiel", "for", p)
    won = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert (won["for"], won["against"], won["outcome"]) == (2, 1, "for")
    assert not disputes.is_disputed(kb, P, "CxDeploy") and kb.argue(P, "CxDeploy") == "true"
    assert rulings.who_ruled(kb, won["ruling"])["arbiter"] == MAJORITY_ARBITER
    assert kb.sentex(won["ruling"]).context == "CxMajority"
    kb.retract(won["ruling"])
    assert disputes.is_disputed(kb, P, "CxDeploy")


def run_moves(order):
    """The majority scenario's moves in the given order, on a fresh KB; its reading."""
    with koinii.open_kb() as kb:
        handles = {}

        def claim(agent, sentence):
            handles[agent] = holds(kb, agent, sentence)

        moves = {
            "atlas": lambda: claim("AgentAtlas", P),
            "boreas": lambda: claim("AgentBoreas", NOT_P),
            "edges": lambda: channel_sees(kb, "CxDeploy", "AgentAtlas", "AgentBoreas", "AgentCiel"),
            "ciel-edge": lambda: channel_sees(kb, "CxDeploy", "AgentCiel"),
            "vote-a": lambda: ballot(kb, "AgentAtlas", "for", handles["AgentAtlas"]),
            "vote-b": lambda: ballot(kb, "AgentBoreas", "against", handles["AgentAtlas"]),
            "vote-c": lambda: ballot(kb, "AgentCiel", "for", handles["AgentAtlas"]),
        }
        for move in order:
            moves[move]()
        p = handles["AgentAtlas"]
        found = {
            frozenset(side["sentence"] for side in entry["sides"])
            for entry in disputes.disputes_in(kb, "CxDeploy")
        }
        key = disputes.disputes_in(kb, "CxDeploy")[0]["dispute_id"]
        tally = majority.tally(kb, p)
        result = majority.resolve_by_majority(kb, key, p, "CxDeploy")
        return (
            found,
            tally,
            (result["for"], result["against"], result["outcome"]),
            kb.argue(P, "CxDeploy"),
            disputes.is_disputed(kb, P, "CxDeploy"),
        )


def test_interleavings_of_the_same_moves_agree():
    one = run_moves(["atlas", "boreas", "edges", "vote-a", "vote-b", "vote-c"])
    two = run_moves(["boreas", "ciel-edge", "atlas", "vote-c", "vote-b", "edges", "vote-a"])
    assert one == two
    assert one[0] == {frozenset({P, NOT_P})}
    assert one[2] == (2, 1, "for") and one[3] == "true" and one[4] is False


def test_cooperative_ballots_cast_by_their_voters_count_in_one_process(kb, clash):
    """In one process the cooperative policy trusts the creator, as it trusts every
    claimed id there: a ballot in the voter's own context, by the voter, counts."""
    p, _n, key = clash
    for agent, stance in (("AgentAtlas", "for"), ("AgentBoreas", "against"), ("AgentCiel", "for")):
        majority.cast_ballot(kb, principal(agent, "cooperative"), stance, p)
    assert majority.tally(kb, p) == {"for": 2, "against": 1}
    won = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert (won["outcome"], won["ignored"]) == ("for", [])


def test_voting_the_claim_down_rules_its_negation(kb, clash):
    p, _n, key = clash
    ballot(kb, "AgentAtlas", "for", p)
    ballot(kb, "AgentBoreas", "against", p)
    ballot(kb, "AgentCiel", "against", p)
    result = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert (result["for"], result["against"], result["outcome"]) == (1, 2, "against")
    assert kb.sentex(result["ruling"]).text == NOT_P
    assert not disputes.is_disputed(kb, P, "CxDeploy") and kb.argue(P, "CxDeploy") == "false"


def test_a_repeated_ballot_is_one_vote(kb, clash):
    p = clash[0]
    assert ballot(kb, "AgentBoreas", "against", p) == ballot(kb, "AgentBoreas", "against", p)
    assert majority.tally(kb, p) == {"for": 0, "against": 1}


def test_a_voter_on_both_sides_spoils_the_ballot(kb, clash):
    p = clash[0]
    ballot(kb, "AgentAtlas", "for", p)
    ballot(kb, "AgentBoreas", "against", p)
    ballot(kb, "AgentBoreas", "for", p)
    assert majority.tally(kb, p) == {"for": 1, "against": 0}


def test_a_voter_changes_its_vote_by_retracting_the_ballot(kb, clash):
    p = clash[0]
    first = ballot(kb, "AgentBoreas", "for", p)
    assert majority.tally(kb, p) == {"for": 1, "against": 0}
    kb.retract(first)
    ballot(kb, "AgentBoreas", "against", p)
    assert majority.tally(kb, p) == {"for": 0, "against": 1}


def test_an_unknown_stance_is_refused(kb, clash):
    refusal = refused(lambda: ballot(kb, "AgentAtlas", "abstain", clash[0]))
    assert refusal.kind == "koinii/no-such-stance"
    assert refusal.data == {"stance": "abstain", "known": ["for", "against"]}


def test_resolving_an_unchanged_count_again_changes_nothing(kb, clash):
    p, _n, key = clash
    for agent, stance in (("AgentAtlas", "for"), ("AgentBoreas", "against"), ("AgentCiel", "for")):
        ballot(kb, agent, stance, p)
    first = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    seq = kb.seq
    second = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert first["changed"] and not second["changed"]
    assert {**second, "changed": True} == first and kb.seq == seq
    assert disputes.dispute_state(kb, key) == "resolved"


def test_the_majority_changes_its_mind(kb, clash):
    p, _n, key = clash
    ba = ballot(kb, "AgentAtlas", "for", p)
    bc = ballot(kb, "AgentCiel", "for", p)
    bb = ballot(kb, "AgentBoreas", "against", p)
    r1 = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert (r1["outcome"], r1["withdrawn"]) == ("for", []) and kb.argue(P, "CxDeploy") == "true"
    kb.retract(ba)
    kb.retract(bc)
    ballot(kb, "AgentAtlas", "against", p)
    bc2 = ballot(kb, "AgentCiel", "against", p)
    r2 = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert (r2["for"], r2["against"], r2["outcome"]) == (0, 3, "against")
    assert r2["withdrawn"] == [r1["ruling"]] and not kb.believed(r1["ruling"])
    assert kb.argue(P, "CxDeploy") == "false"
    assert [
        e for e in disputes.disputes_in(kb, "CxDeploy") if e["dispute_class"] == "conflict"
    ] == []
    kb.retract(bc2)
    ballot(kb, "AgentCiel", "for", p)
    r3 = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert (r3["for"], r3["against"], r3["outcome"]) == (1, 2, "against")
    assert r3["withdrawn"] == [] and r3["ruling"] == r2["ruling"]
    kb.retract(bb)
    r4 = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert (r4["for"], r4["against"], r4["outcome"]) == (1, 1, "tie")
    assert r4["withdrawn"] == [r2["ruling"]]
    assert disputes.is_disputed(kb, P, "CxDeploy") and kb.argue(P, "CxDeploy") == "contradiction"


def test_a_defeated_ruling_is_not_standing(kb, clash):
    p, _n, key = clash
    tag = {"adjudication": {"dispute": list(key), "at": T0}}
    soft = kb.assert_(P, "CxMajority", creator=MAJORITY_ARBITER, provenance=tag)
    assert rulings.standing_rulings(kb, MAJORITY_ARBITER, key) == [soft]
    kb.assert_(NOT_P, "CxMajority", strength="monotonic", creator=MAJORITY_ARBITER)
    assert kb.sentex(soft) is not None and not kb.believed(soft)
    assert rulings.standing_rulings(kb, MAJORITY_ARBITER, key) == []
    result = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert (result["outcome"], result["withdrawn"]) == ("tie", [])
    assert kb.sentex(soft) is not None


@pytest.mark.parametrize("first", [9, 10])
def test_withdrawn_rulings_are_listed_by_content(first):
    with koinii.open_kb() as kb:
        kb.assert_("(functional rated)", "CxUniverse", strength="monotonic")
        a = holds(kb, "AgentAtlas", "(rated ProdCluster 9)")
        b = holds(kb, "AgentBoreas", "(rated ProdCluster 10)")
        channel_sees(kb, "CxDeploy", "AgentAtlas", "AgentBoreas")
        [entry] = disputes.disputes_in(kb, "CxDeploy")
        key = entry["dispute_id"]
        assert key == (a, b)
        tag = {"adjudication": {"dispute": list(key), "at": T0}}
        rulings = {}
        for score in (first, 19 - first):
            rulings[score] = kb.assert_(
                f"(rated ProdCluster {score})",
                "CxMajority",
                creator=MAJORITY_ARBITER,
                provenance=tag,
            )
        result = majority.resolve_by_majority(kb, key, a, "CxDeploy")
        assert result["outcome"] == "tie"
        assert result["withdrawn"] == [rulings[9], rulings[10]]


def two_disputes(kb):
    """Atlas's P against Boreas in CxDeploy and against Ciel in CxOps; Dora seen by both."""
    p = holds(kb, "AgentAtlas", P)
    b = holds(kb, "AgentBoreas", NOT_P)
    c = holds(kb, "AgentCiel", NOT_P)
    channel_sees(kb, "CxDeploy", "AgentAtlas", "AgentBoreas", "AgentDora")
    channel_sees(kb, "CxOps", "AgentAtlas", "AgentCiel", "AgentDora")
    return p, [((p, b), "CxDeploy"), ((p, c), "CxOps")]


def reading(kb):
    return [
        (
            kb.argue(P, ctx),
            askable(kb, P, ctx),
            askable(kb, NOT_P, ctx),
            disputes.is_disputed(kb, P, ctx),
            len(kb.conflicts(ctx)),
            len([e for e in disputes.disputes_in(kb, ctx) if e["dispute_class"] == "conflict"]),
        )
        for ctx in ("CxDeploy", "CxOps")
    ]


@pytest.mark.parametrize(("order", "last"), list(itertools.product([(0, 1), (1, 0)], [0, 1])))
def test_every_order_of_the_same_rulings_reads_the_same(order, last):
    with koinii.open_kb() as kb:
        _, both = two_disputes(kb)
        for i in order:
            rulings.rule(kb, "AgentArbiter", both[i][0], P, both[i][1])
        rulings.rule(kb, "AgentArbiter", both[last][0], NOT_P, both[last][1])
        assert reading(kb) == [("false", False, True, False, 0, 0)] * 2


@pytest.mark.parametrize(("first", "second"), list(itertools.product([(0, 1), (1, 0)], repeat=2)))
def test_every_order_of_the_same_polls_reads_the_same(first, second):
    with koinii.open_kb() as kb:
        p, both = two_disputes(kb)
        ballots = {agent: ballot(kb, agent, "for", p) for agent in ("AgentAtlas", "AgentDora")}
        ballot(kb, "AgentBoreas", "against", p)
        for i in first:
            assert majority.resolve_by_majority(kb, both[i][0], p, both[i][1])["outcome"] == "for"
        for agent, handle in ballots.items():
            kb.retract(handle)
            ballot(kb, agent, "against", p)
        for i in second:
            assert (
                majority.resolve_by_majority(kb, both[i][0], p, both[i][1])["outcome"] == "against"
            )
        assert reading(kb) == [("false", False, True, False, 0, 0)] * 2
        counts = [len(rulings.standing_rulings(kb, MAJORITY_ARBITER, k)) for k, _ in both]
        assert counts == [1, 1]


def test_ballots_their_voters_did_not_cast_never_count_and_never_veto(kb, clash):
    p, _n, key = clash
    for agent, stance in (("AgentAtlas", "for"), ("AgentBoreas", "against"), ("AgentCiel", "for")):
        ballot(kb, agent, stance, p)
    planted = [
        # in another agent's context, by another creator, or with no creator at all
        kb.assert_(f"(votesAgainst AgentX1 (sentexHandle {p}))", "CxMallory", creator="AgentX1"),
        kb.assert_(f"(votesAgainst AgentX2 (sentexHandle {p}))", "CxX2", creator="AgentMallory"),
        kb.assert_(f"(votesAgainst AgentX3 (sentexHandle {p}))", "CxX3"),
    ]
    # and one a rule derives: a conclusion is nobody's vote
    kb.assert_("(implies (trigger ?t) (votesAgainst AgentX4 ?t))", "CxX4")
    kb.assert_(f"(trigger (sentexHandle {p}))", "CxX4", creator="AgentX4")
    [derived] = kb.sentexes_matching(f"(votesAgainst AgentX4 (sentexHandle {p}))", "CxX4")
    planted.append(derived.handle)
    assert majority.tally(kb, p) == {"for": 2, "against": 1}
    won = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert (won["for"], won["against"], won["outcome"]) == (2, 1, "for")
    assert won["ignored"] == sorted(planted)
    counted = {b["handle"]: b["counted"] for b in majority.ballots(kb, p)}
    assert [counted[h] for h in planted] == [False] * 4


def test_an_attestation_binds_the_voter_the_ballot_and_the_key(kb, clash, monkeypatch):
    p, _n, key = clash
    ha = ballot(kb, "AgentAtlas", "for", p)
    assert identity.attested_by(kb, ha) == "AgentAtlas"
    assert majority.resolve_by_majority(kb, key, p, "CxDeploy")["outcome"] == "for"

    # Atlas casting Boreas's ballot: attested, but by Atlas, not by the voter it names
    forged = identity.ingest(
        kb, principal("AgentAtlas"), f"(votesAgainst AgentBoreas (sentexHandle {p}))"
    )
    assert majority.resolve_by_majority(kb, key, p, "CxDeploy")["ignored"] == [forged]
    kb.retract(forged)

    # an attestation copied onto another ballot does not verify there
    copied = kb.assert_(
        f"(votesAgainst AgentBoreas (sentexHandle {p}))",
        "CxBoreas",
        creator="AgentBoreas",
        provenance={"attestation": kb.provenance(ha)["attestation"]},
    )
    assert identity.attested_by(kb, copied) is None
    assert majority.resolve_by_majority(kb, key, p, "CxDeploy")["ignored"] == [copied]
    kb.retract(copied)

    # a cooperative ballot against by Atlas itself spoils Atlas's vote
    spoiler = holds(kb, "AgentAtlas", f"(votesAgainst AgentAtlas (sentexHandle {p}))")
    assert majority.tally(kb, p) == {"for": 0, "against": 0}
    tie = majority.resolve_by_majority(kb, key, p, "CxDeploy")
    assert (tie["outcome"], tie["ignored"]) == ("tie", [])
    kb.retract(spoiler)

    # under another key, the attestation itself no longer verifies: the ballot is ignored
    monkeypatch.setattr(grants, "_key", grants._key)  # restored after the test
    identity.set_attest_key(b"another key, at least thirty-two bytes long")
    assert identity.attested_by(kb, ha) is None
    assert majority.resolve_by_majority(kb, key, p, "CxDeploy")["ignored"] == [ha]


def test_resolving_without_a_claim_is_refused(kb, clash):
    refusal = refused(lambda: majority.resolve_by_majority(kb, clash[2], 999_999, "CxDeploy"))
    assert refusal.kind == "koinii/no-such-handle"


# --- over the wire ------------------------------------------------------------------------------

TEAM = {
    "AgentAtlas": "agent",
    "AgentBoreas": "agent",
    "AgentCiel": "agent",
    "AgentMajority": "arbiter",
    "Ops": "operator",
}


@pytest.fixture
def wire_team(start_daemon):
    """A daemon with agent tokens; Atlas claims P and Boreas disputes it, each over its
    own connection. Returns (daemon, agents, claim, dispute id)."""
    daemon = start_daemon(principals=TEAM)
    agents = {
        name: channel.join(channel.wire(daemon.client(f"Agent{name}")), "CxDeploy", f"Agent{name}")
        for name in ("Atlas", "Boreas", "Ciel")
    }
    claim = agents["Atlas"].assert_(P)
    agents["Boreas"].dispute(claim)
    ops = daemon.client("Ops")
    [entry] = disputes.disputes_in(ops, "CxDeploy")
    return daemon, agents, claim, entry["dispute_id"]


def test_ballots_cast_through_the_daemon_are_attested_and_a_majority_rules(wire_team):
    daemon, agents, claim, key = wire_team
    ops = daemon.client("Ops")
    first = [agents["Atlas"].vote("for", claim), agents["Boreas"].vote("against", claim)]
    assert [identity.attested_by(ops, h) for h in first] == ["AgentAtlas", "AgentBoreas"]
    tie = majority.resolve_by_majority(ops, key, claim, "CxDeploy")
    assert (tie["for"], tie["against"], tie["outcome"]) == (1, 1, "tie")
    agents["Ciel"].vote("for", claim)
    won = majority.resolve_by_majority(ops, key, claim, "CxDeploy")
    assert (won["for"], won["against"], won["outcome"]) == (2, 1, "for")
    assert rulings.who_ruled(ops, won["ruling"])["arbiter"] == MAJORITY_ARBITER
    assert ops.argue(P, "CxDeploy") == "true" and disputes.dispute_state(ops, key) == "resolved"


def test_a_ballot_the_daemon_did_not_see_its_voter_cast_is_ignored(wire_team):
    daemon, agents, claim, key = wire_team
    ops = daemon.client("Ops")
    agents["Atlas"].vote("for", claim)
    # an operator may write anywhere, but the principal it records is its own
    planted = ops.assert_(
        f"(votesAgainst AgentDan (sentexHandle {claim}))", "CxDan", creator="AgentDan"
    )
    assert ops.provenance(planted)["principal"] == "Ops"
    won = majority.resolve_by_majority(ops, key, claim, "CxDeploy")
    assert (won["for"], won["against"], won["outcome"]) == (1, 0, "for")
    assert won["ignored"] == [planted]


def test_the_majority_may_rule_with_its_own_arbiter_token_but_not_clear_marks(wire_team):
    """AgentMajority's arbiter token writes its own context — monotonic rulings included —
    and places it under the channel, so it can rule; the lifecycle marks in CxDisputes are
    shared state only an operator clears, so a ruling that would clear them is refused
    whole (docs/disputes.md)."""
    daemon, agents, claim, key = wire_team
    ops, arbiter = daemon.client("Ops"), daemon.client("AgentMajority")
    agents["Atlas"].vote("for", claim)
    adjudication.notify_disputes(ops, "CxDeploy")
    seq = ops.seq
    refusal = refused(lambda: majority.resolve_by_majority(arbiter, key, claim, "CxDeploy"))
    assert refusal.kind == "koinii/foreign-sentex"
    assert ops.seq == seq and disputes.dispute_state(ops, key) == "notified"
    disputes.reopen(ops, key)
    won = majority.resolve_by_majority(arbiter, key, claim, "CxDeploy")
    assert won["outcome"] == "for"
    assert identity.attested_by(ops, won["ruling"]) == MAJORITY_ARBITER


def test_an_agent_token_cannot_rule(wire_team):
    """A ruling is monotonic: it would defeat the other side silently. Agents write
    defaults only (docs/security.md); an arbiter or an operator rules."""
    daemon, agents, claim, key = wire_team
    atlas = daemon.client("AgentAtlas")
    agents["Atlas"].vote("for", claim)
    refusal = refused(lambda: rulings.rule(atlas, "AgentAtlas", key, P, "CxDeploy"))
    assert refusal.kind in ("arbiter-is-party", "koinii/strength-forbidden")
    ciel = daemon.client("AgentCiel")
    refusal = refused(lambda: ciel.assert_(P, "CxCiel", strength="monotonic"))
    assert refusal.kind == "koinii/strength-forbidden" and "arbiter" in refusal.message
