"""The web view over real HTTP against real daemon processes: who may look (a token
once, then a session cookie that opens the view and never the API), the transport
guards, the live stream (one feed reader, no subscription slot, within a second of a
write, ended by a stop; and, in-process, a slow page missing nothing), and every bad
input a named refusal. The pages in a real browser are tests/test_web_browser.py."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time

import pytest

import koinii
from koinii.channel import agent as channel
from koinii.kb import semantic
from koinii.server import build_app
from koinii.sessions import SessionStore
from koinii.web import graph, moves
from koinii.web.live import RING, LiveFeed
from koinii.web.reads import WAITING, invoker, wraps_page, wraps_records
from koinii.wraps import Coordinators, wrap_session
from tests.conftest import Daemon
from tests.web_client import Browser

TEAM = {"AgentAtlas": "agent", "AgentBoreas": "agent", "Ops": "operator", "Viewer": "reader"}


def start(tmp_path, *args: str, principals=TEAM, name: str = "web") -> Daemon:
    from koinii.server.tokens import add_token

    tokens = {}
    extra = list(args)
    if principals:
        table = str(tmp_path / f"{name}.tokens")
        tokens = {p: add_token(table, p, role) for p, role in principals.items()}
        extra += ["--tokens", table]
    return Daemon(str(tmp_path / f"{name}.db"), extra, tokens).start()


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """A daemon with a token table and a channel of two agents that have said a little."""
    daemon = start(tmp_path_factory.mktemp("web"))
    atlas = channel.join(channel.wire(daemon.client("AgentAtlas")), "CxTeam", "AgentAtlas")
    boreas = channel.join(channel.wire(daemon.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    q = atlas.pose_query("(usesCache ProdCluster ?cache)")
    boreas.answer("Redis", q)
    yield daemon, atlas, boreas, q
    daemon.kill()


def viewer(daemon: Daemon) -> Browser:
    browser = Browser(daemon.url)
    assert browser.sign_in(daemon.tokens["Viewer"]).status == 303
    return browser


# --- who may look --------------------------------------------------------------------------


def test_a_page_asks_for_a_token_once_and_keeps_a_session_cookie_not_the_token(team):
    daemon, *_ = team
    browser = Browser(daemon.url)
    asked = browser.get("/channel/CxTeam/")
    assert asked.status == 303 and asked.headers["location"] == "/login?next=/channel/CxTeam/"
    wrong = browser.sign_in("kt_not-a-token-of-this-daemon", "/channel/CxTeam/")
    assert wrong.status == 401 and "unauthorized" in wrong.text and browser.cookie is None
    right = browser.sign_in(daemon.tokens["Viewer"], "/channel/CxTeam/")
    assert right.status == 303 and right.headers["location"] == "/channel/CxTeam/"
    cookie = right.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert daemon.tokens["Viewer"] not in cookie  # the browser never holds the token
    page = browser.get("/channel/CxTeam/")
    assert page.status == 200 and "AgentBoreas answered" in page.text
    assert "Viewer · reader" in page.text
    assert browser.request("POST", "/logout").status == 303
    assert browser.get("/channel/CxTeam/").status == 303  # signed out: asked again


def test_any_role_signs_in_and_a_sign_in_never_leaves_the_daemon(team):
    daemon, *_ = team
    browser = Browser(daemon.url)
    answer = browser.sign_in(daemon.tokens["AgentAtlas"], "//evil.example/")
    assert answer.status == 303 and answer.headers["location"] == "/"


def test_the_cookie_opens_the_view_and_never_the_api(team):
    daemon, *_ = team
    browser = viewer(daemon)
    body = b'{"goal": "(usesCache ?c ?x)", "context": "CxTeam"}'
    for op in ("query", "assert"):
        refused = browser.request("POST", f"/v1/{op}", body, Content_Type="application/json")
        assert refused.status == 401 and '"kind":"unauthorized"' in refused.text


def test_the_transport_guards_hold_for_the_view(team):
    daemon, *_ = team
    browser = viewer(daemon)
    rebound = browser.get("/channel/CxTeam/", Host="evil.example")
    assert rebound.status == 403 and rebound.refusal_kind() == "bad-host"
    stream = browser.get("/channel/CxTeam/live", Host="evil.example")
    assert stream.status == 403
    foreign = Browser(daemon.url).sign_in(daemon.tokens["Viewer"], Origin="http://evil.example")
    assert foreign.status == 403 and foreign.refusal_kind() == "cross-origin"
    page = browser.get("/channel/CxTeam/")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


def test_without_a_cookie_the_live_stream_is_refused(team):
    daemon, *_ = team
    answer = Browser(daemon.url).get("/channel/CxTeam/live")
    assert answer.status == 401 and answer.refusal_kind() == "unauthorized"


def test_an_open_daemon_shows_its_loopback_callers_the_view_without_a_token(tmp_path):
    daemon = start(tmp_path, principals=None)
    try:
        atlas = channel.join(channel.wire(daemon.client()), "CxTeam", "AgentAtlas")
        atlas.pose_query("(readyToShip BillingRelease)")
        page = Browser(daemon.url).get("/channel/CxTeam/")
        assert page.status == 200 and "AgentAtlas asked" in page.text
        assert "open daemon" in page.text
    finally:
        daemon.kill()


# --- what it shows ---------------------------------------------------------------------------


def test_an_agents_markup_is_shown_as_text(team):
    daemon, atlas, *_ = team
    atlas.assert_('(motto Atlas "<script>alert(1)</script><img src=x onerror=alert(2)>")')
    page = viewer(daemon).get("/channel/CxTeam/")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "<script>alert" not in page.text and "<img src=x" not in page.text


def test_bad_input_is_a_named_refusal_that_says_what_to_do(team):
    daemon, *_ = team
    browser = viewer(daemon)
    for path, kind, status in (
        ("/channel/CxNobody/", "koinii/no-such-channel", 400),
        ("/channel/notAContext/", "naming", 400),
        ("/channel/CxTeam/thread/999999", "koinii/no-such-handle", 400),
        ("/channel/CxTeam/thread/abc", "bad-option", 400),
        ("/channel/CxTeam/?before=yesterday", "bad-option", 400),
        ("/channel/CxTeam/disputes?state=bogus", "bad-option", 400),
        ("/why/abc", "bad-handle", 400),
        ("/why/999999", "koinii/no-such-handle", 400),
        ("/contexts/CxNothingHere", "not-found", 404),
        ("/sessions", "introspection-off", 400),
    ):
        answer = browser.get(path)
        assert (answer.status, answer.refusal_kind()) == (status, kind), path
    assert "the channels are listed at /" in browser.get("/channel/CxNobody/").text
    assert "KOINII_INTROSPECTION=1" in browser.get("/sessions").text


def test_the_contexts_page_draws_the_hierarchy_and_lists_what_a_context_holds(team):
    daemon, *_ = team
    browser = viewer(daemon)
    page = browser.get("/contexts")
    assert page.status == 200 and "<svg" in page.text
    for name, kind in (("CxTeam", "channel"), ("CxAtlas", "agent"), ("CxSpeechActs", "vocabulary")):
        assert f'class="node kind-{kind}' in page.text.split(f'href="/contexts/{name}"')[1][:40]
    held = browser.get("/contexts/CxBoreas")
    assert "(answers AgentBoreas" in held.text and "(usesCache ProdCluster Redis)" in held.text


def test_wraps_are_shown_per_coordinator_unprocessed_then_processed(tmp_path):
    daemon = start(tmp_path, principals={"AgentCoord": "agent", "AgentLing": "agent", **TEAM})
    try:
        coord = channel.join(channel.wire(daemon.client("AgentCoord")), "CxHive", "AgentCoord")
        ling = channel.join(channel.wire(daemon.client("AgentLing")), "CxHive", "AgentLing")
        Coordinators(daemon.client("AgentCoord")).register(
            "AgentCoord", project_id="hive", session_id="session:coord"
        )
        wrap_session(
            ling,
            session_id="session:ling",
            parent_session_id="session:coord",
            project_id="hive",
            notes=["the API paginates by cursor"],
            decisions=["keep the v1 routes"],
        )
        page = viewer(daemon).get("/wraps")
        assert page.status == 200
        section = page.text.split("AgentCoord</span>", 1)[1]
        assert 'Unprocessed <span class="count">1</span>' in section
        assert "the API paginates by cursor" in section and "keep the v1 routes" in section
        assert coord.context == "CxCoord"
    finally:
        daemon.kill()


def test_the_wraps_page_reads_out_only_the_wraps_it_shows(tmp_path):
    """A long queue is counted, and its oldest WAITING shown: each wrap shown is read out
    sentence by sentence, and 2,000 of them were an 8.5 MB page that held the daemon."""
    with koinii.open_kb(str(tmp_path / "wraps.db")) as kb:
        ling = channel.join(channel.local(kb), "CxHive", "AgentLing")
        for i in range(WAITING + 5):
            wrap_session(
                ling,
                session_id=f"session:ling{i}",
                parent_session_id="session:coord",
                project_id="hive",
                notes=[f"note {i}"],
            )
        [group] = wraps_page(kb, wraps_records(kb))["groups"]
        queue = [w["wrap_id"] for w in invoker(kb)("wraps.list")]  # the oldest first
    assert group["unprocessed_count"] == len(queue) == WAITING + 5
    assert [w["wrap_id"] for w in group["unprocessed"]] == queue[:WAITING]
    assert all(w["entries"][0]["kind"] == "note" for w in group["unprocessed"])


def test_the_wraps_page_reads_the_ids_of_the_wraps_it_shows_only(tmp_path):
    """The page counts every wrap and shows a window: the ids of the others are never
    read (one 1.4-million-id wrap cost every later listing 0.6-0.9 s). Here the ids of
    the wraps past the window are not even JSON: the page is drawn all the same."""
    import sqlite3

    path = str(tmp_path / "wraps.db")
    with koinii.open_kb(path) as kb:
        ling = channel.join(channel.local(kb), "CxHive", "AgentLing")
        for i in range(WAITING + 5):
            wrap_session(
                ling,
                session_id=f"session:ling{i}",
                parent_session_id="session:coord",
                project_id="hive",
                notes=[f"note {i}"],
            )
        queue = [w["wrap_id"] for w in invoker(kb)("wraps.list")]
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        for wrap_id in queue[WAITING:]:
            db.execute(
                "UPDATE wrap_notification SET created_ids = 'not read' WHERE wrap_id = ?",
                (wrap_id,),
            )
    with koinii.open_kb(path) as kb:
        [group] = wraps_page(kb, wraps_records(kb))["groups"]
    assert group["unprocessed_count"] == WAITING + 5
    assert [w["wrap_id"] for w in group["unprocessed"]] == queue[:WAITING]
    assert all(w["entries"][0]["kind"] == "note" for w in group["unprocessed"])


def test_sessions_are_listed_searched_with_highlights_and_read_when_introspection_is_on(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("KOINII_INTROSPECTION", "1")  # the daemon process inherits it
    daemon = start(tmp_path, principals={"AgentAtlas": "agent", "Viewer": "reader"})
    try:
        store = SessionStore(daemon.client("AgentAtlas"))
        sid = store.start_session(title="Fix the flaky deploy")
        turn = store.start_turn(sid, "Why does the staging deploy fail?")
        store.finish_turn(turn, "done", "complete", answer="A stale migration lock.")
        browser = viewer(daemon)
        found = browser.get("/sessions?search=staging")
        assert found.status == 200 and "Fix the flaky deploy" in found.text
        assert "<mark>staging</mark>" in found.text
        if semantic.installed():  # the daemon ranks hybrid: found in other words, and says so
            other = browser.get("/sessions?search=deployment+keeps+failing")
            assert "Fix the flaky deploy" in other.text and "close in meaning" in other.text
        one = browser.get(f"/sessions/{sid}")
        assert "Why does the staging deploy fail?" in one.text
        assert "A stale migration lock." in one.text
        assert browser.get("/sessions/no-such-session").refusal_kind() == "not-found"
    finally:
        daemon.kill()


# --- live -------------------------------------------------------------------------------------


def test_a_move_reaches_an_open_page_within_a_second_of_the_write(team):
    daemon, atlas, boreas, q = team
    browser = viewer(daemon)
    got: list = []
    reader = threading.Thread(target=lambda: got.extend(browser.events("/channel/CxTeam/live", 1)))
    reader.start()
    time.sleep(0.5)  # the stream is open and parked
    wrote = time.monotonic()
    atlas.endorse(boreas.thread(q)["answers"][0]["handle"])
    reader.join(10)
    [(event, data, arrived)] = got
    assert event == "move" and "AgentAtlas endorsed claim" in data
    assert 'class="agent agent-' in data  # the line as the page renders it
    assert arrived - wrote < 1.0


def test_a_page_that_reads_slowly_is_sent_what_another_page_was_told_meanwhile(tmp_path):
    """In-process, two pages' streams of one feed: while a slow page has not taken its
    line, a write is told to the other page (the feed reads the log once, for both);
    when the slow page reads on, that write's line comes next — not skipped, and not
    held back until a later write or the heartbeat."""
    with koinii.open_kb(str(tmp_path / "live.db")) as kb:
        atlas = channel.join(channel.local(kb), "CxTeam", "AgentAtlas")
        feed = LiveFeed(build_app(kb).state.daemon, lambda line: line.context)

        async def scenario() -> list[str]:
            slow, quick = (feed.stream("CxTeam", kb.seq) for _ in range(2))
            for page in (slow, quick):
                await anext(page)  # `retry`: each is open
            taking = [asyncio.ensure_future(anext(page)) for page in (slow, quick)]
            await asyncio.sleep(0)  # both park
            atlas.pose_query("(readyToShip BillingRelease)")
            await asyncio.gather(*taking)  # both have the first line: the slow one stops
            quick_next = asyncio.ensure_future(anext(quick))
            await asyncio.sleep(0)
            atlas.pose_query("(readyToShip PaymentsRelease)")
            second = await asyncio.wait_for(quick_next, 5)  # told by the quick page's turn
            late = await asyncio.wait_for(anext(slow), 5)
            return [second, late]

        second, late = asyncio.run(scenario())
    assert second.startswith("id: ") and late == second


def test_the_feed_tells_no_more_than_its_ring_can_keep_nor_what_came_before_a_page(tmp_path):
    """What the feed tells on the loop is bounded by its ring, not by the writes: a bulk
    load written while no page followed is not told when a page opens after it (it held
    every request 3.5 s at 55,000 sentences), and a write with more changes than the
    ring holds is not told to a page that follows (it reloads, as it did)."""
    with koinii.open_kb(str(tmp_path / "live.db")) as kb:
        atlas = channel.join(channel.local(kb), "CxTeam", "AgentAtlas")
        rendered: list = []
        feed = LiveFeed(build_app(kb).state.daemon, lambda line: rendered.append(line) or "x")
        bulk = [(f"(note Item{i} Part{i % 7})", "CxTeam") for i in range(RING + 1000)]

        async def scenario() -> list[str]:
            with kb.budget(30):
                kb.edit(add=bulk)  # nobody follows
            page = feed.stream("CxTeam", kb.seq)  # opened after it
            await anext(page)  # `retry`
            waiting = asyncio.ensure_future(anext(page))
            await asyncio.sleep(0)
            told_then = len(feed.ring)
            atlas.pose_query("(readyToShip BillingRelease)")
            move = await asyncio.wait_for(waiting, 5)
            waiting = asyncio.ensure_future(anext(page))
            await asyncio.sleep(0)
            with kb.budget(30):
                kb.edit(add=[(f"(note More{i} Part{i % 7})", "CxTeam") for i in range(RING + 1)])
            reload = await asyncio.wait_for(waiting, 5)
            return [told_then, move, reload, len(feed.ring)]

        told_then, move, reload, told_after = asyncio.run(scenario())
    assert told_then == 0 and move.startswith("id: ") and len(rendered) == 1
    assert reload == "event: reload\ndata: behind\n\n" and told_after == 0


def test_open_pages_share_one_feed_reader_and_take_no_subscription_slot(tmp_path):
    daemon = start(tmp_path, "--max-subscriptions", "1", "--max-subscriptions-per-principal", "1")
    try:
        atlas = channel.join(channel.wire(daemon.client("AgentAtlas")), "CxTeam", "AgentAtlas")
        browser = viewer(daemon)
        pages: list[list] = [[] for _ in range(3)]
        readers = [
            threading.Thread(
                target=lambda got=got: got.extend(browser.events("/channel/CxTeam/live", 1))
            )
            for got in pages
        ]
        for reader in readers:
            reader.start()
        time.sleep(0.5)
        ops = daemon.client("Ops")
        assert ops.watchers() == []  # three open pages hold no subscription
        sub = daemon.client("AgentAtlas").watch(goal="(queries ?who ?q)", ctx="CxTeam")
        assert sub["token"]  # the only slot is still the agent's to take
        atlas.pose_query("(readyToShip BillingRelease)")
        for reader in readers:
            reader.join(10)
        assert all(got and "AgentAtlas asked" in got[0][1] for got in pages)
    finally:
        daemon.kill()


def test_a_stopping_daemon_ends_its_open_streams_at_once(tmp_path):
    daemon = start(tmp_path)
    try:
        channel.join(channel.wire(daemon.client("AgentAtlas")), "CxTeam", "AgentAtlas")
        browser = viewer(daemon)
        reader = threading.Thread(target=lambda: browser.events("/channel/CxTeam/live", 1))
        reader.start()
        time.sleep(0.5)
        stopping = time.monotonic()
        daemon.proc.send_signal(signal.SIGTERM)
        assert daemon.proc.wait(20) == 0
        assert time.monotonic() - stopping < 5  # not uvicorn's 10 s graceful timeout
        reader.join(5)
        assert not reader.is_alive()
    finally:
        daemon.kill()


# --- windows: a long channel opens in the time its window takes ------------------------------


def test_a_window_holds_the_newest_moves_and_pages_back_through_the_rest(tmp_path):
    with koinii.open_kb(str(tmp_path / "long.db")) as kb:
        medium = channel.local(kb)
        atlas = channel.join(medium, "CxTeam", "AgentAtlas")
        channel.join(medium, "CxOther", "AgentBoreas").assert_("(elsewhere Boreas)")
        for i in range(30):
            atlas.assert_(f"(step Atlas {i})")
        newest, earlier = moves.window(kb, "CxTeam", size=12)
        assert [line.text for line in newest][-1] == "AgentAtlas claimed (step Atlas 29)"
        assert len(newest) == 12 and earlier == newest[0].seq
        seen = [line.text for line in newest]
        while earlier is not None:
            page, earlier = moves.window(kb, "CxTeam", before=earlier, size=12)
            seen = [line.text for line in page] + seen
        assert seen == [f"AgentAtlas claimed (step Atlas {i})" for i in range(30)]
        assert not any("Boreas" in text for text in seen)  # another channel's moves


def test_a_window_of_questions_reads_the_newest_first(tmp_path):
    from koinii.channel import conversation

    with koinii.open_kb(str(tmp_path / "questions.db")) as kb:
        atlas = channel.join(channel.local(kb), "CxTeam", "AgentAtlas")
        asked = [atlas.pose_query(f"(versionOf Service{i} ?v)") for i in range(8)]
        window = conversation.questions(kb, "CxTeam", limit=3)
        assert [q["handle"] for q in window] == asked[-3:]
        earlier = conversation.questions(kb, "CxTeam", limit=3, before=asked[-3])
        assert [q["handle"] for q in earlier] == asked[2:5]
        [whole] = conversation.questions(kb, "CxTeam", limit=1, threads=True)
        assert whole["answers"] == [] and whole["state"] == "open"
        assert conversation.questions(kb, "CxTeam") == conversation.questions(
            kb, "CxTeam", limit=100
        )


def test_the_context_drawing_is_layered_by_what_sees_what():
    edges = [
        ("CxTeam", "CxAtlas"),
        ("CxTeam", "CxBoreas"),
        ("CxAtlas", "CxSpeechActs"),
        ("CxBoreas", "CxSpeechActs"),
    ]
    kinds = {
        "CxTeam": "channel",
        "CxAtlas": "agent",
        "CxBoreas": "agent",
        "CxSpeechActs": "vocabulary",
    }
    counts = {"CxTeam": 0, "CxAtlas": 3, "CxBoreas": 4, "CxSpeechActs": 40}
    drawing = graph.layout(counts, edges, kinds)
    layer = {box.name: box.layer for box in drawing.boxes}
    assert layer == {"CxSpeechActs": 0, "CxAtlas": 1, "CxBoreas": 1, "CxTeam": 2}
    assert graph.layout(counts, list(reversed(edges)), kinds).boxes[0].x == drawing.boxes[0].x


def test_a_channel_is_told_and_drawn_from_a_page_of_its_edges_not_every_one():
    """A team's channel sees every member's context: the contexts page told its kind,
    and drew its edges, by reading all of them (at 20,000, 0.2-0.35 s of the page's
    0.5 s budget; 0.04 s now). It asks the first page of them for its kind, and all only
    when none of those is an agent's; it draws the edges to the contexts on the page,
    each asked, past a page of them. Held by what is read, not by the clock."""
    from koinii.web import reads

    kb = koinii.open_kb(None)
    edges = []
    for i in range(600):  # the channel's, and a context seeing only what no agent owns
        edges.append((f"(genlCx CxTeam CxA{i:03})", "CxUniverse"))
        edges.append((f"(agentContext CxA{i:03} AgentA{i:03})", f"CxA{i:03}"))
        edges.append((f"(genlCx CxPlain CxP{i:03})", "CxUniverse"))
    kb.edit(add=edges)
    read: list[tuple[str, int]] = []  # (what was asked, how many rows it gave)

    def counted(reader):
        def counting(goal, ctx, **options):
            rows = reader(goal, ctx, **options)
            read.append((str(goal), len(rows)))
            return rows

        return counting

    kb.sentexes_matching, kb.query = counted(kb.sentexes_matching), counted(kb.query)
    hierarchy = reads.Hierarchy(kb)
    assert hierarchy.kind("CxTeam") == "channel"
    edges = [rows for goal, rows in read if "genlCx" in goal and "CxTeam" in goal]
    assert edges == [reads.CONTEXTS]  # its first page of edges, not all 600
    assert hierarchy.kind("CxPlain") == "other"  # (all read: none of the first is an agent's)
    # the page drawing CxTeam asks of its edges only those to the contexts drawn
    read.clear()
    names = sorted(kb.context_counts())
    page = reads.contexts_page(kb, None, 0, names.index("CxTeam") // reads.CONTEXTS)
    edges = [rows for goal, rows in read if "genlCx" in goal and "CxTeam" in goal]
    assert edges and max(edges) <= reads.CONTEXTS + 1
    assert reads.Hierarchy(kb).sees_among("CxTeam", {"CxA001", "CxP001"}) == ["CxA001"]
    assert reads.Hierarchy(kb).sees_among("CxPlain", {"CxA001", "CxP001"}) == ["CxP001"]
    assert page["total"] == len(names)
    assert hierarchy.sees("CxTeam")[:2] == ["CxA000", "CxA001"]
    kb.close()
