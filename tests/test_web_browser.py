"""The web view in a real browser (Debian's Chromium, driven by Playwright), over a real
daemon: three agent processes pose a question, answer it twice, dispute one answer and
vote, the adjudicator service rules, and the open page shows each move as it happens —
without a reload. Then the thread, the dispute and its ruling, the context graph and a
why tree, each opened from the page itself; and the sign-in refuses a wrong token and
lets a reader token in. One browser and one team for the whole module.

The screenshots it takes are the ones in docs/web.md and the README: set
KOINII_WEB_SCREENSHOTS=docs/images to write them there (else they go to a temporary
folder). Without Chromium (or Playwright) the module skips, saying why — except in CI
(`CI` set), where that is a failure."""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.agent_process import AgentProcess
from tests.conftest import Daemon

ROOT = pathlib.Path(__file__).parent.parent
CHROMIUM = os.environ.get("KOINII_CHROMIUM", "/usr/bin/chromium")  # Debian's package
# As root, with no network but the registries: no sandbox, nothing fetched at start
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TEAM = ("AgentAtlas", "AgentBoreas", "AgentCyra")
VERSION = "(postgresMajorVersion ProdCluster ?version)"
SEEN_WITHIN_MS = 5_000  # generous for a loaded CI machine; test_web.py pins < 1 s


def text(locator) -> str:
    """What an element says, as written (no CSS text-transform), spaces collapsed."""
    return " ".join(locator.text_content().split())


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the browser tests cannot run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        unavailable(f"Playwright is not installed ({exc}): pip install -e '.[test]'")
    if not os.path.exists(CHROMIUM):
        unavailable(
            f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set KOINII_CHROMIUM)"
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> pathlib.Path:
    wanted = os.environ.get("KOINII_WEB_SCREENSHOTS")
    folder = ROOT / wanted if wanted else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """A daemon with tokens, the adjudicator service, and three agent processes."""
    from koinii.server.tokens import add_token

    folder = tmp_path_factory.mktemp("team")
    table = str(folder / "team.tokens")
    roles = {**{a: "agent" for a in TEAM}, "Ops": "operator", "Viewer": "reader"}
    tokens = {who: add_token(table, who, role) for who, role in roles.items()}
    daemon = Daemon(str(folder / "team.db"), ["--tokens", table], tokens).start()
    agents = {a[5:]: AgentProcess(daemon.url, a, tokens[a], "CxTeam") for a in TEAM}
    service = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "koinii",
            "adjudicate",
            "--channel",
            "CxTeam",
            "--url",
            daemon.url,
            "--token",
            tokens["Ops"],
            "--cursor",
            str(folder / "cursor"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield daemon, agents
    service.send_signal(signal.SIGTERM)
    service.wait(15)
    for agent in agents.values():
        agent.stop()
    daemon.kill()


@pytest.fixture(scope="module")
def page(chromium, team):
    context = chromium.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def test_a_wrong_token_is_refused_and_a_reader_token_signs_in(page, team, shots):
    daemon, _ = team
    page.goto(daemon.url + "/channel/CxTeam/")
    assert page.url.endswith("/login?next=/channel/CxTeam/")
    page.get_by_label("Token").fill("kt_this-is-not-a-token-of-this-daemon")
    with page.expect_response(lambda r: r.url.endswith("/login")) as refused:
        page.get_by_role("button", name="Sign in").click()
    assert refused.value.status == 401
    assert "Refused (unauthorized)" in page.get_by_role("alert").inner_text()
    page.screenshot(path=shots / "login-refused.png", animations="disabled")
    page.get_by_label("Token").fill(daemon.tokens["Viewer"])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/channel/CxTeam/")
    assert "Viewer · reader" in page.locator(".who").inner_text()
    cookie = next(c for c in page.context.cookies() if c["name"] == "koinii_view")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # no script reads it


def test_the_conversation_appears_live_then_its_thread_dispute_ruling_graph_and_why(
    page, team, shots
):
    daemon, agents = team
    atlas, boreas, cyra = agents["Atlas"], agents["Boreas"], agents["Cyra"]
    if "/channel/CxTeam/" not in page.url:
        pytest.skip("the sign-in test did not get this far")
    moves = page.locator("#moves")
    page.locator("#live-status[data-state=live]").wait_for()
    page.evaluate("window.stillTheSamePage = true")
    latencies = []

    def shows(text: str, move) -> int:
        started = time.monotonic()
        result = move()
        moves.get_by_text(text).first.wait_for(timeout=SEEN_WITHIN_MS)
        latencies.append(time.monotonic() - started)
        return result

    q = shows("AgentAtlas asked: " + VERSION, lambda: atlas.do("pose_query", question=VERSION))
    b = shows(
        f"AgentBoreas answered question #{q} with (postgresMajorVersion ProdCluster 16)",
        lambda: boreas.do("answer", question=q, content={"?version": "16"}),
    )
    shows(f"AgentCyra answered question #{q}", lambda: cyra.do("answer", question=q, content="15"))
    shows(f"AgentAtlas endorsed claim #{b + 1}", lambda: atlas.do("endorse", target=b))
    shows("AgentCyra disputed claim", lambda: cyra.do("dispute", target=b))
    for agent, stance in ((atlas, "for"), (boreas, "for"), (cyra, "against")):
        shows(
            f"{agent.agent} voted {stance}",
            lambda a=agent, s=stance: a.do("vote", stance=s, target=b),
        )
    ruled = "AgentMajority ruled (postgresMajorVersion ProdCluster 16)"
    moves.get_by_text(ruled).wait_for(timeout=20_000)  # the service counts, then rules
    page.locator("#questions .state-settled").first.wait_for()  # the panel followed too
    # an operator's write reads as its principal; a rule's conclusion names the rule and
    # whose it is (not "someone in CxTeam", not an author-less "—")
    ops = daemon.client("Ops")
    rule = ops.assert_("(implies (postgresMajorVersion ?c 16) (supported ?c))", "CxTeam")
    moves.get_by_text("Ops wrote (implies (postgresMajorVersion ?c 16)").wait_for()
    derived = moves.locator("li.kind-derivation", has_text="(supported ProdCluster)")
    derived.wait_for(timeout=SEEN_WITHIN_MS)
    assert f"derived by rule #{rule}, Ops's, from #" in text(derived)
    assert "Ops" in text(derived.locator(".agent"))
    assert "someone in" not in text(moves)
    # the rebuttal the ruling defeated is told as Cyra's dispute losing, by its handle
    assert "AgentCyra's dispute #" in text(moves) and "lost: its rebuttal #" in text(moves)
    assert page.evaluate("window.stillTheSamePage") is True  # all of it without a reload
    assert page.locator("#moves .agent-none").count() == 0  # every move has its author
    print("seen after", [round(s, 2) for s in latencies])
    page.screenshot(path=shots / "channel.png", animations="disabled")
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=shots / "channel-390.png", animations="disabled")
    page.set_viewport_size({"width": 1280, "height": 860})

    # keyboard: the skip link first, then the question's thread by Enter
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.locator(f'#questions a[href="thread/{q}"]').focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/channel/CxTeam/thread/{q}")
    thread = page.locator("#thread")
    assert "settled" in text(thread.locator("h1"))
    assert thread.locator(".answer").count() == 2
    boreas_answer = thread.locator(".answer", has_text="AgentBoreas answered")
    # the dispute by its move's handle, who raised it and who resolved it (the two
    # answers' differing values are a contradiction of their own, raised by no one)
    named = text(boreas_answer.locator(".dispute-ref", has_text="Dispute #"))
    assert re.search(r"Dispute #\d+ resolved raised by AgentCyra · resolved by the majority", named)
    assert "2 for" in text(boreas_answer.locator(".tally"))
    assert "1 against" in text(boreas_answer.locator(".tally"))
    assert "AgentMajority upholds it" in text(boreas_answer.locator(".ruling"))
    assert "Endorsed by AgentAtlas" in text(boreas_answer)
    page.screenshot(path=shots / "thread.png", animations="disabled", full_page=True)

    nav = page.get_by_role("navigation", name="Sections")
    nav.get_by_role("link", name="Disputes", exact=True).click()
    page.get_by_role("link", name="resolved 1").click()
    dispute = page.locator("article.dispute")
    assert dispute.count() == 1
    assert "AgentMajority upholds" in text(dispute.locator(".ruling"))
    assert "raised by AgentCyra · resolved by the majority" in text(dispute.locator(".named"))
    page.screenshot(path=shots / "disputes.png", animations="disabled", full_page=True)

    nav.get_by_role("link", name="Contexts", exact=True).click()
    page.wait_for_url("**/contexts")
    graph = page.locator("svg.graph")
    graph.locator("a").first.wait_for()  # (count() does not wait for the page to draw it)
    for name in ("CxTeam", "CxAtlas", "CxBoreas", "CxCyra", "CxMajority", "CxSpeechActs"):
        assert graph.locator(f'a[href="/contexts/{name}"]').count() == 1, name
    graph.locator('a[href="/contexts/CxBoreas"]').click()
    page.wait_for_url("**/contexts/CxBoreas")
    assert "(answers AgentBoreas" in text(page.locator("table.held-list"))
    page.screenshot(path=shots / "contexts.png", animations="disabled")

    page.goto(f"{daemon.url}/channel/CxTeam/thread/{q}")  # the thread again
    page.locator(".answer", has_text="AgentBoreas answered").locator(
        ".claim > .sentence a.why"
    ).click()
    tree = page.locator(".why-tree").first
    assert "derived" in text(tree.locator(".why-node").first)
    assert "(carriesClaim answers 2)" in text(tree.locator(".why-rule"))
    assert "(answers AgentBoreas" in text(tree.locator(".why-node.premise"))
    page.screenshot(path=shots / "why.png", animations="disabled", full_page=True)

    # Cyra's rebuttal, defeated by the ruling
    [rebuttal] = [
        s
        for s in ops.sentexes_matching(f"(not {VERSION.replace('?version', '16')})", "CxEverything")
        if s.context == "CxCyra"
    ]
    page.goto(f"{daemon.url}/why/{rebuttal.handle}")
    assert "defeated" in text(page.locator(".verdict"))
    assert "CxMajority, monotonic, by AgentMajority" in text(page.locator("main"))
    page.screenshot(path=shots / "why-defeated.png", animations="disabled", full_page=True)


# --- every page, empty and full: no template text leaks -------------------------------------

# What a template shows when it went wrong: a macro or an undefined value printed, a tag
# left unrendered, a script's missing value (a closing "}}" alone is JSON on the API page)
LEAKS_IN_TEXT = (
    "<Macro",
    "{{",
    "{%",
    "{#",
    "None",
    "Undefined",
    "undefined",
    "NaN",
    "[object Object]",
)
LEAKS_IN_HTML = ("Macro", '="None"', "=None", "None&", "{{", "{%")
STATES = ("open", "notified", "stale", "resolved")


def leaks(page) -> list[str]:
    shown = page.locator("body").inner_text()
    html = page.content()
    return [f"text {t!r}" for t in LEAKS_IN_TEXT if t in shown] + [
        f"html {t!r}" for t in LEAKS_IN_HTML if t in html
    ]


def boreas_answer(boreas, q: int) -> int:
    return next(a["handle"] for a in boreas.thread(q)["answers"] if a["speaker"] == boreas.agent)


def world(folder: pathlib.Path, full: bool, monkeypatch) -> tuple[Daemon, dict[str, int | str]]:
    """A daemon with introspection on and a channel CxTeam of Atlas and Boreas: with
    nothing said (and one unanswered question in CxQuiet, a session with no turn), or with
    every kind of thing a page shows."""
    from koinii.channel import agent as channel
    from koinii.client.adjudicator import Adjudicator
    from koinii.server.tokens import add_token
    from koinii.sessions import SessionStore
    from koinii.wraps import Coordinators, wrap_session

    monkeypatch.setenv("KOINII_INTROSPECTION", "1")  # the daemon process inherits it
    table = str(folder / "world.tokens")
    roles = {"AgentAtlas": "agent", "AgentBoreas": "agent", "Ops": "operator", "Viewer": "reader"}
    tokens = {who: add_token(table, who, role) for who, role in roles.items()}
    daemon = Daemon(str(folder / "world.db"), ["--tokens", table], tokens).start()
    atlas = channel.join(channel.wire(daemon.client("AgentAtlas")), "CxTeam", "AgentAtlas")
    boreas = channel.join(channel.wire(daemon.client("AgentBoreas")), "CxTeam", "AgentBoreas")
    sessions = SessionStore(daemon.client("AgentAtlas"))
    session = sessions.start_session(title="Check the cluster")
    if not full:
        quiet = channel.join(channel.wire(daemon.client("AgentAtlas")), "CxQuiet", "AgentAtlas")
        q = quiet.pose_query(VERSION)
        return daemon, {"channel": "CxTeam", "thread": q, "why": q, "session": session}
    q = atlas.pose_query(VERSION)
    a = boreas.answer({"?version": "16"}, q)
    atlas.answer({"?version": "14"}, q)
    atlas.answer({"?version": "15"}, q)  # replaces Atlas's first answer: kept in the history
    claim = boreas_answer(boreas, q)
    atlas.endorse(claim)
    boreas.justify("(releaseNotes ProdCluster Pg16)", claim)
    atlas.dispute(claim)
    for agent in (atlas, boreas):  # Atlas convinced: the count rules for the claim
        agent.vote("for", claim)
    other = atlas.pose_query("(usesCache ProdCluster ?cache)")
    cache = boreas.answer("Redis", other)
    atlas.dispute(boreas_answer(boreas, other))
    boreas.vote("for", boreas_answer(boreas, other))
    Adjudicator(daemon.client("Ops"), "CxTeam").settle()  # rules the one both voted on
    Coordinators(daemon.client("AgentAtlas")).register(
        "AgentAtlas", project_id="ops", session_id="session:atlas"
    )
    wrap_session(
        boreas,
        session_id="session:boreas",
        parent_session_id="session:atlas",
        project_id="ops",
        notes=["the cluster runs 16"],
        decisions=["keep 16"],
    )
    turn = sessions.start_turn(session, "Which version does the cluster run?")
    sessions.finish_turn(turn, "done", "complete", answer="16, by its release notes.")
    return daemon, {"channel": "CxTeam", "thread": q, "why": a, "session": session, "c": cache}


FULL = {  # a page of the full world, and something it must show
    "/channel/CxTeam/disputes?state=resolved": "resolved by the majority",
    "/channel/CxTeam/disputes?state=notified": "raised by AgentAtlas",
    # the two answers 16 and 15 to a one-value question: named by their values
    "/channel/CxTeam/disputes": "15 said by AgentAtlas, 16 said by AgentBoreas",
    "/wraps": "the cluster runs 16",
    "/sessions": "Check the cluster",
}


def every_page(where: dict) -> list[str]:
    channel = f"/channel/{where['channel']}"
    thread_channel = "/channel/CxQuiet" if "c" not in where else channel
    return [
        "/",
        "/api",
        f"{channel}/",
        f"{thread_channel}/thread/{where['thread']}",
        f"{channel}/disputes",
        *(f"{channel}/disputes?state={s}" for s in STATES),
        "/contexts",
        "/contexts/CxAtlas",
        "/contexts/CxTeam",
        f"/why/{where['why']}",
        "/wraps",
        "/sessions",
        "/sessions?search=cluster",
        f"/sessions/{where['session']}",
    ]


@pytest.mark.parametrize("full", [False, True], ids=["empty", "full"])
def test_every_page_shows_no_template_text_empty_or_full(chromium, tmp_path, monkeypatch, full):
    daemon, where = world(tmp_path, full, monkeypatch)
    context = chromium.new_context(viewport={"width": 1280, "height": 860})
    try:
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.goto(daemon.url + "/login")
        assert not leaks(page), "/login"
        page.get_by_label("Token").fill(daemon.tokens["Viewer"])
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(daemon.url + "/")
        found = {}
        for path in every_page(where):
            response = page.goto(daemon.url + path)
            assert response.status == 200, (path, page.locator("main").inner_text())
            if leaks(page):
                found[path] = leaks(page)
            if full and path in FULL:  # full indeed
                assert FULL[path] in page.locator("main").inner_text(), path
            if full and path.endswith(f"/thread/{where['thread']}"):  # and what was taken back
                assert "superseded by AgentAtlas at seq" in page.locator("main").inner_text()
        page.goto(daemon.url + "/why/999999")  # the error page
        assert "Refused" in page.locator("main").inner_text()
        if leaks(page):
            found["/why/999999"] = leaks(page)
        assert found == {}
    finally:
        context.close()
        daemon.kill()


@pytest.mark.parametrize("state", STATES)
def test_the_disputes_filter_names_its_state_and_is_the_one_highlighted(chromium, tmp_path, state):
    from koinii.channel import agent as channel
    from koinii.server.tokens import add_token

    table = str(tmp_path / "filter.tokens")
    tokens = {"AgentAtlas": add_token(table, "AgentAtlas", "agent")}
    daemon = Daemon(str(tmp_path / "filter.db"), [], tokens).start()  # open: no sign-in
    channel.join(channel.wire(daemon.client()), "CxTeam", "AgentAtlas")
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.goto(f"{daemon.url}/channel/CxTeam/disputes?state={state}")
        assert text(page.locator("p.empty")) == f"No {state} dispute."
        current = page.locator('.filters a[aria-current="page"]')
        assert current.count() == 1 and text(current) == f"{state} 0"
        page.goto(f"{daemon.url}/channel/CxTeam/disputes")
        assert text(page.locator("p.empty")) == "No dispute."
        assert text(page.locator('.filters a[aria-current="page"]')) == "all 0"
    finally:
        context.close()
        daemon.kill()
