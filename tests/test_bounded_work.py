"""Bounded work per request (docs/daemon.md, bounded work): size limits before work that
grows with the input, a time budget for writes (rules included) as for reads, a `limit`
that bounds a query's work, and a daemon that keeps serving everyone while one request
runs at its budget. Bounds in these tests are generous: they tell seconds from
milliseconds, not one millisecond from another."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import threading
import time

import pytest

import koinii
from koinii import Refused
from koinii.channel import agent as channel
from tests.conftest import Daemon, refused

CROSS_RULE = "(implies (and (s ?x) (s ?y)) (t ?x ?y))"  # n facts derive n² conclusions


def _grid(store, n: int = 40) -> None:
    """n² (r A B) facts: a 3-literal join over them has n⁴ solutions."""
    with store.budget(30):
        store.edit(add=[(f"(r N{i} N{j})", "CxA") for i in range(n) for j in range(n)])


JOIN = ["(r ?a ?b)", "(r ?b ?c)", "(r ?c ?d)"]


# --- in-process -------------------------------------------------------------------------------


def test_a_write_under_a_cross_product_rule_is_stopped_at_its_budget(kb):
    kb.assert_(CROSS_RULE, "CxB")
    before = kb.stats()
    started = time.monotonic()
    with kb.budget(0.05):
        caught = refused(lambda: kb.edit(add=[(f"(s M{i})", "CxB") for i in range(400)]))
    assert caught.kind == "budget-exhausted" and caught.data["budget_s"] == 0.05
    assert time.monotonic() - started < 2.0  # not the minute the 160,000 derivations take
    assert kb.stats() == before  # rolled back whole


def test_a_rule_out_of_budget_says_which_join_ran_out_and_how_big_it_got(kb):
    """A rule that cannot finish in its budget names itself, the join that was running
    (the antecedent it joined from, the literals it joined with), how many candidates
    that join had considered, and how many times the rule had fired in the write."""
    kb.edit(add=[(f"(s M{i})", "CxB") for i in range(400)])
    with kb.budget(0.05):
        caught = refused(lambda: kb.assert_(CROSS_RULE, "CxB"))  # a new rule: scanned whole
    assert caught.kind == "budget-exhausted" and caught.data["rule_text"] == CROSS_RULE
    join = caught.data["join"]
    assert join["from"] in ("(s ?x)", "(s ?y)") and len(join["with"]) == 1
    assert join["candidates"] > 256  # more than one round of the budget's clock
    assert f"{join['candidates']:,} candidates" in caught.message

    kb.assert_("(implies (and (v ?x) (v ?y)) (u ?x ?y))", "CxA")  # nothing to read yet
    with kb.budget(0.05):  # new facts, each joined with those before it
        caught = refused(lambda: kb.edit(add=[(f"(v N{i})", "CxA") for i in range(400)]))
    join = caught.data["join"]
    assert caught.kind == "budget-exhausted" and join["firings"] > 0
    assert f"the rule had fired {join['firings']:,} times in this write" in caught.message


def test_a_dry_run_of_a_batch_too_big_for_its_budget_says_so_and_stops_there(kb):
    before = kb.stats()
    batch = [(f"(note Item{i} Part{i % 7})", "CxB") for i in range(60_000)]
    started = time.monotonic()
    with kb.budget(0.05):
        problems = kb.check_edit(add=batch)
    [problem] = problems
    assert problem["kind"] == "budget-exhausted" and problem["in"] == "add"
    assert problem["index"] < len(batch) - 1  # stopped where it ran out, the rest unjudged
    assert time.monotonic() - started < 1.0  # not the seconds judging 60,000 entries takes
    assert kb.stats() == before


def test_the_violations_read_spends_its_budget_as_it_goes(kb):
    kb.edit(add=[(f"(p Item{i})", "CxA") for i in range(30_000)])
    kb.assert_("(implies (p ?x) (q ?x))", "CxA")  # a rule of one antecedent: no join
    with kb.budget(0.01):
        assert refused(kb.violations).kind == "budget-exhausted"
    assert kb.violations() == []


def test_a_limit_bounds_the_work_of_a_query(kb):
    _grid(kb)
    with kb.budget(0.05):
        assert refused(lambda: kb.query(JOIN, "CxA")).kind == "budget-exhausted"
        found = kb.query(JOIN, "CxA", limit=3)  # stops at the third solution
    assert len(found) == 3
    assert found == sorted(found, key=lambda s: [str(s[v]) for v in ("?a", "?b", "?c", "?d")])


def test_a_goal_far_past_the_sentence_limit_is_refused_before_it_is_read(kb):
    goal = "(p " + "x" * (15 << 20) + ")"
    started = time.monotonic()
    refusal = refused(lambda: kb.query(goal, "CxA"))
    assert refusal.kind == "shape" and "characters" in refusal.message
    assert time.monotonic() - started < 0.5  # tokenising it took seconds


def test_a_goal_of_too_many_literals_is_refused(kb):
    refusal = refused(lambda: kb.query([f"(p ?x{i})" for i in range(65)], "CxA"))
    assert refusal.kind == "shape" and refusal.data["limit"] == 64


def test_a_small_write_in_memory_costs_no_more_after_fifty_thousand():
    """A write's work does not grow with the writes before it: in memory, a commit once
    read through every node noted since the last search, and after 50,000 one-fact
    writes each took ten times what the first did."""

    def fastest_of_five(start: int) -> float:  # seconds for 300 writes, least disturbed
        times = []
        for k in range(5):
            began = time.perf_counter()
            for i in range(300):
                kb.assert_(f"(timed Item{start + 300 * k + i})", "CxA")
            times.append(time.perf_counter() - began)
        return min(times)

    with koinii.open_kb(None) as kb:
        early = fastest_of_five(0)
        for i in range(50_000):
            kb.assert_(f"(item Thing{i})", "CxA")
        late = fastest_of_five(10_000)
    # the bug was 10x; 5x leaves room for a machine busy with other work (seen: 3.4x at
    # load average 7 with the bug fixed)
    assert late < 5 * early, (early, late)


# --- over the wire ------------------------------------------------------------------------------


def _post(daemon, op: str, body: bytes) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    conn.request("POST", f"/v1/{op}", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


class Prober:
    """Another client: a one-write round trip every few ms, timed, while something runs."""

    def __init__(self, daemon, principal: str | None = None) -> None:
        self.client = daemon.client(principal)
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            started = time.perf_counter()
            self.client.assert_(f"(probe P{i})", "CxProbe")
            self.times.append(time.perf_counter() - started)
            i += 1
            time.sleep(0.005)

    def __enter__(self) -> Prober:
        self._thread.start()
        time.sleep(0.2)
        return self

    def __exit__(self, *exc) -> None:
        time.sleep(0.2)
        self._stop.set()
        self._thread.join(10)

    @property
    def worst(self) -> float:
        return max(self.times)


def at_once(daemon, call, callers: int) -> tuple[Prober, list]:
    """`call()` from `callers` threads at once, the prober timing another client
    meanwhile; what each call returned."""
    answers: list = []
    threads = [threading.Thread(target=lambda: answers.append(call())) for _ in range(callers)]
    with Prober(daemon) as prober:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    return prober, answers


def test_a_long_read_runs_off_the_loop_while_everyone_else_is_served(daemon):
    client = daemon.client(timeout=60)
    _grid(client)
    with Prober(daemon) as prober:
        started = time.monotonic()
        with client.budget(2.0):  # an operator's long read (the open daemon's callers are)
            caught = refused(lambda: client.query(JOIN, "CxA"))
        took = time.monotonic() - started
    assert caught.kind == "budget-exhausted"
    assert 1.5 < took < 4.0  # it ran to its budget, and was stopped there
    # Nobody waited on it: held, the loop would make the prober wait the read's 2 s. (Not
    # tighter: under the suite's two workers, a round trip here stalls up to 0.65 s.)
    assert len(prober.times) > 50 and prober.worst < 1.0, prober.worst
    assert client.health()["ok"] is True


def test_a_long_reads_answer_comes_back_whole_from_its_snapshot(daemon):
    client = daemon.client(timeout=60)
    _grid(client)
    with client.budget(5.0):  # 64,000 rows: past the loop's slice, done in a snapshot
        rows = client.query(["(r ?a ?b)", "(r ?b ?c)"], "CxA")
    assert len(rows) == 40**3
    assert {(str(r["?a"]), str(r["?c"])) for r in rows} == {
        (f"N{i}", f"N{j}") for i in range(40) for j in range(40)
    }


def test_a_snapshots_answer_is_spliced_into_the_reply_as_the_child_rendered_it():
    """Never decoded and encoded again on the loop: 200,000 rows took 0.45 s of it."""
    from koinii.server.snapshot import Snapshots
    from koinii.wire import RawJSON, render

    answer = {"rows": [{"?x": "Ünïcode"}] * 1000, "seq": 7}
    got = asyncio.run(Snapshots().run(lambda: answer, 5.0))
    assert type(got) is RawJSON and got == render(answer)

    def refuses():
        raise Refused("shape", "no", {"at": 1})

    caught = refused(lambda: asyncio.run(Snapshots().run(refuses, 5.0)))
    assert (caught.kind, caught.message, caught.data) == ("shape", "no", {"at": 1})


def test_a_write_past_its_budget_is_refused_and_holds_nobody(daemon):
    client = daemon.client()
    client.assert_(CROSS_RULE, "CxB")
    before = client.stats()
    with Prober(daemon) as prober:
        for _ in range(5):  # an attacker, again and again
            started = time.monotonic()
            caught = refused(lambda: client.edit(add=[(f"(s M{i})", "CxB") for i in range(400)]))
            assert caught.kind == "budget-exhausted"
            assert time.monotonic() - started < 3.0
    # (unbounded, each attack held everyone > 10 s; bounded, one budget and its rollback,
    # stretched on a busy machine — 0.65 s under the suite's two workers, 1.4 s with two
    # runs of the suite and more on two cores: the bound is a third of the unbounded hold;
    # benchmarks/resilience.py measures it closely)
    assert prober.worst < 3.0, prober.worst
    after = client.stats()
    assert after["sentexes"] - before["sentexes"] == len(prober.times)  # only the probes


def test_a_goal_past_the_small_body_limit_is_refused_before_it_is_read(daemon):
    huge = json.dumps({"goal": "(p " + "x" * (15 << 20) + ")", "context": "CxA"}).encode()
    status, reply = _post(daemon, "query", huge)
    assert status == 413 and reply["error"]["kind"] == "body-too-large"
    big = json.dumps({"goal": "(p " + "x" * (1 << 20) + ")", "context": "CxA"}).encode()
    status, reply = _post(daemon, "query", big)
    assert status == 400 and reply["error"]["kind"] == "shape"


@pytest.mark.parametrize("role, allowed", [("agent", False), ("operator", True)])
def test_only_an_operator_may_raise_a_request_budget(start_daemon, connect, role, allowed):
    daemon = start_daemon(principals={"AgentAtlas": "agent", "OpsOlga": "operator"})
    client = connect(daemon, "AgentAtlas" if role == "agent" else "OpsOlga")
    with client.budget(0.001):  # lowering is anyone's
        client.query("(r ?a ?b)", "CxA")
    with client.budget(5.0):
        if allowed:
            assert client.query("(r ?a ?b)", "CxA") == []
        else:
            refusal = refused(lambda: client.query("(r ?a ?b)", "CxA"))
            assert refusal.kind == "forbidden" and refusal.data["option"] == "budget_ms"


def test_a_budget_ms_out_of_range_is_bad_option(daemon, connect):
    status, reply = _post(daemon, "query", b'{"goal": "(p ?x)", "context": "CxA", "budget_ms": 0}')
    assert status == 400 and reply["error"]["kind"] == "bad-option"
    client = connect(daemon)
    with client.budget(10**6), pytest.raises(Refused) as caught:
        client.query("(p ?x)", "CxA")
    assert caught.value.kind == "bad-option"


def test_a_daemon_killed_during_a_long_read_leaves_its_store_free_at_once(tmp_path):
    # The read runs in a forked child, which keeps none of the daemon's files: not the
    # store's writer lock, which would keep the store locked until the read's budget ran
    # out, long after the daemon it belonged to was gone.
    daemon = Daemon(str(tmp_path / "team.db"), []).start()
    client = daemon.client(timeout=60)
    _grid(client)

    def long_read() -> None:
        with client.budget(3.0), contextlib.suppress(Exception):
            client.query(JOIN, "CxA")

    threading.Thread(target=long_read, daemon=True).start()
    time.sleep(1.0)  # in its child by now, which reads on for two seconds more
    daemon.kill()
    with koinii.open_kb(daemon.db):  # was refused store-locked: the child held the lock
        pass


def test_a_conversation_read_past_its_slice_runs_off_the_loop(daemon):
    """A conversation read is scheduled as a read (its operation says so): a slice of the
    loop, then a snapshot. Here a channel whose one declared-functional predicate has
    1,500 values (a million clashing pairs: 4-5 s to gather) held everyone for as long."""
    client = daemon.client(timeout=60)
    channel.join(channel.wire(client), "CxTeam", "AgentAtlas")
    client.assert_("(functional poolSize)", "CxAtlas")
    with client.budget(30):
        client.edit(add=[(f"(poolSize Db V{i})", "CxAtlas") for i in range(1500)])
    with Prober(daemon) as prober:
        try:
            client.invoke("conversation.disputes", channel="CxTeam")
        except Refused as refusal:  # stopped at its budget, on the snapshot
            assert refusal.kind == "budget-exhausted"
    assert len(prober.times) > 5 and prober.worst < 1.0, prober.worst


def test_an_agents_big_edit_is_capped_and_its_access_checks_spend_the_write_budget(
    start_daemon,
):
    """A 150,000-entry edit held everyone 2-5 s in its per-entry access checks, run before
    the write's budget began: now an agent's edit adds at most 10,000 entries, and the
    checks of those count toward its budget."""
    daemon = start_daemon(principals={"AgentAtlas": "agent", "Ops": "operator"})
    atlas = daemon.client("AgentAtlas", timeout=60)
    huge = [(f"(note N{i})", "CxAtlas") for i in range(150_000)]
    started = time.monotonic()
    caught = refused(lambda: atlas.edit(add=huge))
    assert caught.kind == "batch-too-large" and caught.data["limit"] == 10_000
    assert time.monotonic() - started < 10  # (the body's transfer and decoding; no checks)
    with Prober(daemon, "Ops") as prober:
        for _ in range(3):
            caught = refused(lambda: atlas.edit(add=huge[:10_000]))
            assert caught.kind == "budget-exhausted"
    assert prober.worst < 1.0, prober.worst
    assert atlas.sentexes_matching("(note ?n)", "CxAtlas") == []
