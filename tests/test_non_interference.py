"""Non-interference as a property (docs/security.md): nothing an agent writes changes
another agent's own context, the writes it may make, the refusals it gets, or who owns
what — whatever the attacker writes, in whatever order with the victim's writes.

A random script of a victim's moves runs twice, on two fresh stores: alone, and
interleaved with a random script of an attacker's writes — claims, rules, declarations
(of its own predicates and of the system's, a claim carrier of its own), denials of the
victim's moves, placements (under the system's contexts, its voice AgentMajority's, and
the victim's belief context), masks, moves, withdrawals, batches — each made as the
daemon makes an agent token's write (`server.access.check_add` / `check_remove`, then
the engine, attributed to the attacker; a move, a claim too, through its operation).
Both daemons know both agents from their token table. The victim's own-context reads,
what it believes (its belief context), the outcome of each of its writes, the owners of
every context but the attacker's own, what each system context sees, and which of the
victim's moves the channel lists as contradicted must come out the same; only what the
channel shows beside them may differ.
"""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import koinii
from koinii.channel import belief
from koinii.identity import SYSTEM_CONTEXTS, owners_of, reserve_principals
from koinii.operations import invoker
from koinii.server import access
from koinii.server.tokens import Caller
from koinii.speech import move_kind
from koinii.terms import parse

VICTIM, ATTACKER, CHANNEL = "AgentVera", "AgentMallory", "CxTeam"
OWN, ATTACKERS = "CxVera", "CxMallory"
BELIEFS = "CxAgentAgentVera"  # what the victim believes (belief.believe_own)
EXAMPLES = 200  # per run (about 1.5 s; new random examples each run; 600 passed when written)

VICTIM_MOVES = [
    ("claim", {"sentence": "(p A)"}),
    ("claim", {"sentence": "(p B)"}),
    ("claim", {"sentence": "(q A)"}),
    ("claim", {"sentence": "(not (q B))"}),
    ("claim", {"sentence": "(usesDatabase Prod Pg)"}),
    ("claim", {"sentence": "(usesDatabase Prod Mysql)"}),
    ("claim", {"sentence": "(implies (p ?x) (r ?x))"}),
    ("claim", {"sentence": "(functional usesDatabase)"}),
    ("ask", {"question": "(usesDatabase Prod ?db)"}),
    ("claim", {"sentence": "(s A B C)"}),
]

# (sentence, where) an attacker writes; where "own" is its own context
ATTACKS = [
    ("(implies (agentContext CxMallory AgentMallory) (agentContext CxTeam AgentMallory))", "own"),
    ("(implies (p ?x) (agentContext CxVera AgentMallory))", "own"),
    ("(implies (p ?x) (not (r ?x)))", "own"),
    ("(implies (q ?x) (p ?x))", "own"),
    ("(functional p)", "own"),
    ("(functional q)", "own"),
    ("(arity p 2)", "own"),
    ("(arity s 2)", "own"),
    ("(arity usesDatabase 3)", "own"),
    ("(carriesClaim queries 2)", "own"),
    ("(not (p A))", "own"),
    ("(p C)", "own"),
    ("(q B)", "own"),
    ("(usesDatabase Prod Oracle)", "own"),
    ("(agentContext CxVera AgentMallory)", "own"),
    ("(agentContext CxTeam AgentMallory)", "own"),
    ("(genlCx CxVera CxMallory)", "CxUniverse"),
    ("(genlCx CxMallory CxVera)", "CxUniverse"),
    ("(genlCx CxMallory CxTeam)", "CxUniverse"),
    ("(genlCx CxTeam CxMallory)", "CxUniverse"),
    ("(genlCx CxSpeechActs CxMallory)", "CxUniverse"),
    ("(genlCx CxDisputes CxMallory)", "CxUniverse"),
    ("(genlCx CxRegistry CxMallory)", "CxUniverse"),
    # declarations of the system's vocabulary (the hostile rerun of issue 37)
    ("(functional genlCx)", "own"),
    ("(arity queries 1)", "own"),
    ("(singleValued agentContext 1)", "own"),
    ("(carriesClaim endorses 2)", "own"),
    ("(target_following_predicate p)", "own"),
    ("(speechAct p)", "own"),
    ("(disputeStale (dispute (sentexHandle 1) (sentexHandle 2)) 1 Forged)", "own"),
    # denials of the victim's moves and marks, and of the system's sentences
    ("(not (queries AgentVera (quote (usesDatabase Prod ?db))))", "own"),
    ("(implies (p ?x) (not (queries AgentVera (quote (usesDatabase Prod ?db)))))", "own"),
    ("(not (agentContext CxVera AgentVera))", "own"),
    ("(not (arity usesDatabase 2))", "own"),
    # a carrier of the attacker's own, carrying a denial of the victim's question
    ("(carriesClaim says 2)", "own"),
    (
        "(says AgentMallory (quote (not (queries AgentVera (quote (usesDatabase Prod ?db))))))",
        "own",
    ),
    ("(p A)", "CxVera"),
    ("(p A)", "CxTeam"),
]
PROBES = ["(p ?x)", "(q ?x)", "(r ?x)", "(s ?x ?y ?z)", "(usesDatabase ?c ?d)", "(not (q ?x))"]


def _store() -> koinii.KB:
    kb = koinii.open_kb(None)
    reserve_principals(kb, SimpleNamespace(agents=frozenset({VICTIM, ATTACKER})))
    return kb


def _outcome(call) -> str:
    try:
        call()
    except koinii.Refused as refusal:
        return refusal.kind
    return "ok"


def _victim(kb, move: str, fields: dict) -> str:
    with kb.attributed_to(VICTIM):
        return _outcome(lambda: invoker(kb)(f"moves.{move}", agent=VICTIM, **fields))


def _attack(kb, step) -> None:
    """One attacker write, as the daemon makes an agent token's write."""
    caller = Caller(ATTACKER, "agent")
    kind, arg = step
    with kb.attributed_to(ATTACKER):
        if kind == "write":
            sentence, where = arg
            ctx = ATTACKERS if where == "own" else where
            opts = {"creator": ATTACKER}

            def write():
                access.check_add(kb, caller, sentence, ctx, opts)
                kb.assert_(sentence, ctx, **opts)

            _outcome(write)
        elif kind == "batch":
            entries = [(s, ATTACKERS if w == "own" else w, {"creator": ATTACKER}) for s, w in arg]

            def batch():
                for sentence, ctx, opts in entries:
                    access.check_add(kb, caller, sentence, ctx, opts)
                kb.edit(add=entries)

            _outcome(batch)
        elif kind in ("mask", "dispute", "vote", "retract", "withdraw"):
            handles = _victims_handles(kb)
            if not handles:
                return
            target = handles[arg % len(handles)]
            if kind == "mask":
                _attack(kb, ("write", (f"(except (sentexHandle {target}))", "own")))
            elif kind == "retract":
                _outcome(lambda: (access.check_remove(kb, caller, target), kb.retract(target)))
            else:
                fields = {"target": target} if kind != "withdraw" else {"handle": target}
                if kind == "vote":
                    fields["stance"] = "against"
                _outcome(lambda: invoker(kb)(f"moves.{kind}", agent=ATTACKER, **fields))
        elif kind == "join":
            _outcome(lambda: invoker(kb)("moves.join", agent=ATTACKER, channel=arg))
        elif kind == "claim":  # the same sentences through the claim move (its own checks)
            _outcome(lambda: invoker(kb)("moves.claim", agent=ATTACKER, sentence=arg[0]))


def _victims_handles(kb) -> list[int]:
    return sorted(s.handle for s in kb.sentexes_matching("(p ?x)", OWN) if s.context == OWN)


def _reading(kb) -> dict:
    """What the victim reads in its own context, and who owns what (not the attacker's)."""
    return {
        "reads": {g: sorted(str(sorted(b.items())) for b in kb.query(g, OWN)) for g in PROBES},
        "believes": {
            g: sorted(str(sorted(b.items())) for b in kb.query(g, BELIEFS)) for g in PROBES
        },
        "owners": {c: owners_of(kb, c) for c in (CHANNEL, OWN, *SYSTEM_CONTEXTS)},
        "system sees": {
            c: sorted(kb.context_up(c))
            for c in (SYSTEM_CONTEXTS - {"CxEverything"}) | {"CxMajority"}  # its voice's too
        },
        # the victim's moves the channel lists as contradicted: a claim may be, a move never
        "moves denied": sorted(
            side["sentence"]
            for clash in kb.contradictions(CHANNEL)
            for side in clash["sides"]
            if side["context"] == OWN and move_kind(parse(side["sentence"])) != "claim"
        ),
    }


attack_step = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(ATTACKS)),
    st.tuples(st.just("batch"), st.lists(st.sampled_from(ATTACKS), min_size=2, max_size=4)),
    st.tuples(st.just("claim"), st.sampled_from([a for a in ATTACKS if a[1] == "own"])),
    st.tuples(
        st.sampled_from(["mask", "dispute", "vote", "retract", "withdraw"]), st.integers(0, 9)
    ),
    st.tuples(
        st.just("join"),
        st.sampled_from(
            [CHANNEL, OWN, BELIEFS, "CxSpeechActs", "CxDisputes", "CxHistory", "CxRegistry"]
            + ["CxMajority"]
        ),
    ),
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    victim=st.lists(st.sampled_from(VICTIM_MOVES), min_size=1, max_size=8),
    attacks=st.lists(st.lists(attack_step, max_size=3), min_size=9, max_size=9),
)
def test_nothing_an_attacker_writes_changes_the_victims_context_writes_or_ownership(
    victim, attacks
):
    alone, attacked = _store(), _store()
    try:
        for kb in (alone, attacked):
            assert _victim(kb, "join", {"channel": CHANNEL}) == "ok"
            assert belief.believe_own(kb, VICTIM) == BELIEFS
        outcomes = {"alone": [], "attacked": []}
        for i, (move, fields) in enumerate(victim):
            for step in attacks[i % len(attacks)]:
                _attack(attacked, step)
            outcomes["alone"].append(_victim(alone, move, fields))
            outcomes["attacked"].append(_victim(attacked, move, fields))
        for step in attacks[-1]:
            _attack(attacked, step)
        assert outcomes["attacked"] == outcomes["alone"]
        assert _reading(attacked) == _reading(alone)
    finally:
        alone.close()
        attacked.close()
