"""The view's routes: who may look (the sign-in), and each page as a GET over reads.py.

Invariants:
- Every request of the view passes the daemon's transport guards first (`Daemon.guard`:
  its Host is one the daemon answers to, its Origin, if any, is the daemon's own) —
  the same guards as the API's, so neither a foreign page nor DNS rebinding reaches it.
- Read-only: every route is a GET, but signing in and out (POSTs that change only who
  the browser is, never the KB); no route of the view writes the store.
- `/api`, the browsable description of the HTTP API, is made from `openapi_document()`
  — the field table every request is checked against — and needs no sign-in, like
  `/openapi.json`; it is a packaged template, with no script and nothing fetched.
- A daemon with a token table shows a page only to a signed-in browser (login.py); an
  open daemon (no table) shows it to its loopback callers, as it serves them the API.
- A page is read, and rendered, within the read budget, holding nobody past a slice of
  the loop (docs/web.md): from the KB, a slice of the loop then the rest on a forked
  snapshot (`Daemon.bounded`); from the record tables (sessions, wraps), on a thread
  through a connection of its own (`Daemon.read_records`); the channel's moves, read
  from the store's change log, a slice of the loop at a time (`Daemon.in_turns`). A
  page past its budget is the error page, `budget-exhausted`, naming it.
- A page leaves only once the group commit it may have seen is durable
  (`Daemon.durable`): it never shows a write that could still be undone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from koinii._version import __version__
from koinii.channel import conversation
from koinii.errors import Refused, status_of
from koinii.operations import Caller
from koinii.server.daemon import Daemon
from koinii.server.openapi import openapi_document
from koinii.server.tokens import OPEN
from koinii.sessions import schema as sessions_schema
from koinii.sessions.introspection import enabled_by_default
from koinii.web import reads
from koinii.web.live import LiveFeed
from koinii.web.login import COOKIE, ViewSessions, cleared_cookie, cookie_header
from koinii.web.moves import window_steps
from koinii.web.render import SECURITY_HEADERS, Templates
from koinii.wraps import store as wraps_store

log = logging.getLogger("koinii.web")

FORM_BYTES = 4096  # the sign-in form's body at most
Page = tuple[str, dict[str, Any]]  # (template, what it shows)
# A page's HTML for (request, viewer), made within its budget (str on the loop or a
# thread; bytes, as a snapshot encoded it)
Made = Callable[[Request, Caller], Awaitable[str | bytes]]


def _utf8(html: str) -> bytes:
    return html.encode("utf-8")


def _guard_headers(request: Request) -> dict[bytes, str]:
    found: dict[bytes, str] = {}
    for name, value in request.scope["headers"]:
        if name in (b"host", b"origin") and name not in found:
            found[name] = value.decode("latin-1")
    return found


def _local(path: str | None) -> str:
    """A path on this daemon to go back to after signing in (never another site)."""
    if not path or not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/"
    return path


class View:
    """The web view of one daemon (see the module docstring)."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.kb = daemon.kb
        self.templates = Templates()
        self.signed_in = ViewSessions(daemon.tokens) if daemon.tokens is not None else None
        self.live = LiveFeed(daemon, self.templates.line)
        self.introspection = enabled_by_default()
        # channel -> (seq, its questions): every open page of a channel fetches them
        # after each move, and the first fetch at a seq reads them for all the others
        self._questions: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self._api: dict[str, Any] | None = None  # the API page's contents, made once

    # --- who is looking -------------------------------------------------------------

    def viewer(self, request: Request) -> Caller | None:
        if self.signed_in is None:
            return OPEN
        return self.signed_in.caller(request.cookies.get(COOKIE))

    def refusal(self, refusal: Refused, viewer: Caller | None = None) -> Response:
        return self.templates.page(
            "error.html",
            status=status_of(refusal.kind),
            refusal=refusal,
            viewer=viewer,
            introspection=self.introspection,
        )

    def page(self, made: Made) -> Callable[[Request], Awaitable[Response]]:
        """A GET page: guards, then the viewer (or the sign-in), then its HTML, `made`
        within its budget."""

        async def endpoint(request: Request) -> Response:
            viewer = None
            try:
                self.daemon.guard(_guard_headers(request))
                viewer = self.viewer(request)
                if viewer is None:
                    back = quote(
                        request.url.path + ("?" + request.url.query if request.url.query else "")
                    )
                    return RedirectResponse(f"/login?next={back}", status_code=303)
                await self.templates.compiled()
                response = self.templates.response(await made(request, viewer))
                await self.daemon.durable()
                return response
            except Refused as refusal:
                return self.refusal(refusal, viewer)
            except Exception:
                log.exception("internal error in the view at %s", request.url.path)
                failed = Refused("internal-error", "the daemon failed; see its log", {})
                return self.refusal(failed, viewer)

        return endpoint

    def _html(self, page: Page, viewer: Caller, spend: Callable[[], None] | None = None) -> str:
        template, shown = page
        return self.templates.html(
            template, spend, viewer=viewer, introspection=self.introspection, **shown
        )

    def from_kb(self, read: Callable[[Request], Page]) -> Made:
        """A page read from the KB, and rendered, within the read budget: a slice of the
        loop, then the rest on a forked snapshot (`Daemon.bounded`)."""

        async def made(request: Request, viewer: Caller) -> str | bytes:
            return await self._from_kb(lambda: read(request), viewer)

        return made

    async def _from_kb(self, read: Callable[[], Page], viewer: Caller) -> str | bytes:
        budget = self.daemon.limits.query_budget_s
        return await self.daemon.bounded(
            lambda: self._html(read(), viewer, self.kb.spend), budget, "the page", _utf8
        )

    async def _from_records(
        self, read: Callable[[], Page], viewer: Caller, prepare: Callable[[Any], None]
    ) -> str | bytes:
        """A page read from the record tables, and rendered, on a thread through a
        connection of its own, its statements within the read budget
        (`Daemon.read_records`)."""
        budget = self.daemon.limits.query_budget_s
        return await self.daemon.read_records(lambda: self._html(read(), viewer), budget, prepare)

    # --- signing in and out -----------------------------------------------------------

    async def login_form(self, request: Request) -> Response:
        try:
            self.daemon.guard(_guard_headers(request))
        except Refused as refusal:
            return self.refusal(refusal)
        back = _local(request.query_params.get("next"))
        if self.viewer(request) is not None:
            return RedirectResponse(back, status_code=303)
        return self.templates.page("login.html", back=back, problem=None, viewer=None)

    async def login(self, request: Request) -> Response:
        try:
            self.daemon.guard(_guard_headers(request))
            form = await self._form(request)
        except Refused as refusal:
            return self.refusal(refusal)
        back = _local(form.get("next"))
        if self.signed_in is None:
            return RedirectResponse(back, status_code=303)
        try:
            session, _caller = self.signed_in.sign_in(form.get("token", ""))
        except Refused as refusal:
            return self.templates.page(
                "login.html", status=401, back=back, problem=refusal, viewer=None
            )
        response = RedirectResponse(back, status_code=303)
        response.headers["set-cookie"] = cookie_header(session, request.url.scheme == "https")
        return response

    async def logout(self, request: Request) -> Response:
        try:
            self.daemon.guard(_guard_headers(request))
        except Refused as refusal:
            return self.refusal(refusal)
        if self.signed_in is not None:
            self.signed_in.sign_out(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.headers["set-cookie"] = cleared_cookie()
        return response

    async def _form(self, request: Request) -> dict[str, str]:
        """The sign-in form (urlencoded, at most FORM_BYTES)."""
        body = b""
        try:
            async with asyncio.timeout(self.daemon.limits.body_s):
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > FORM_BYTES:
                        raise Refused(
                            "body-too-large",
                            f"the sign-in form is over {FORM_BYTES} bytes: send only the token",
                            {"limit": FORM_BYTES},
                        )
        except TimeoutError:
            raise Refused(
                "body-timeout", "the form did not arrive in time: send it again", {}
            ) from None
        fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
        return {name: values[0] for name, values in fields.items()}

    # --- assets and the live stream ------------------------------------------------------

    async def asset(self, request: Request) -> Response:
        try:
            self.daemon.guard(_guard_headers(request))
        except Refused as refusal:
            return self.refusal(refusal)
        found = self.templates.asset(request.path_params["name"])
        if found is None:
            return self.refusal(Refused("not-found", f"no asset {request.url.path}", {}))
        return found

    async def stream(self, request: Request) -> Response:
        try:
            self.daemon.guard(_guard_headers(request))
            if self.viewer(request) is None:
                raise Refused("unauthorized", "sign in at /login to follow the channel", {})
            channel = reads.channel_name(self.kb, request.path_params["name"])
            resumed = request.headers.get("last-event-id") or request.query_params.get("since")
            since = reads.number(resumed, "since", default=self.kb.seq)
            await self.daemon.durable()
        except Refused as refusal:
            return self.refusal(refusal)
        headers = {**SECURITY_HEADERS, "cache-control": "no-store", "x-accel-buffering": "no"}
        return StreamingResponse(
            self.live.stream(channel, min(since, self.kb.seq)),
            media_type="text/event-stream",
            headers=headers,
        )

    # --- the pages ---------------------------------------------------------------------------

    def home(self, request: Request) -> Page:
        return "home.html", {"channels": reads.channels(self.kb)}

    async def channel(self, request: Request, viewer: Caller) -> str | bytes:
        """The moves first, from the change log in turns of the loop; then the rest."""
        name = reads.channel_name(self.kb, request.path_params["name"])
        if request.query_params.get("part") == "questions":
            return await self._from_kb(lambda: self.questions_part(name), viewer)
        before = reads.number(request.query_params.get("before"), "before")
        steps = window_steps(self.kb, name, before=before, size=reads.MOVES)
        budget = self.daemon.limits.query_budget_s
        lines, earlier = await self.daemon.in_turns(steps, budget, "the page")

        def read() -> Page:
            shown = reads.channel_page(self.kb, name, lines, earlier, before is None)
            return "channel.html", {**shown, "seq": self.kb.seq}

        return await self._from_kb(read, viewer)

    def questions_part(self, channel: str) -> Page:
        return "_questions.html", {"channel": channel, "questions": self.questions(channel)}

    def questions(self, channel: str) -> list[dict[str, Any]]:
        """The channel's questions part, read once per durable seq for every page (only
        what a commit reported is cached: a write still in an open group is not)."""
        seq = self.live.committed
        cached = self._questions.get(channel)
        if cached is not None and cached[0] == seq == self.kb.seq:
            return cached[1]
        found = reads.questions_part(self.kb, channel)
        if seq == self.kb.seq:
            self._questions[channel] = (seq, found)
        return found

    def thread(self, request: Request) -> Page:
        name = reads.channel_name(self.kb, request.path_params["name"])
        handle = reads.number(request.path_params["handle"], "handle")
        shown = {"channel": name, "thread": conversation.thread(self.kb, handle, name)}
        if request.query_params.get("part") == "main":
            return "_thread.html", shown
        return "thread.html", {**shown, "seq": self.kb.seq}

    def disputes(self, request: Request) -> Page:
        name = reads.channel_name(self.kb, request.path_params["name"])
        state = request.query_params.get("state") or None
        page = reads.number(request.query_params.get("page"), "page", default=0)
        shown = reads.disputes_page(self.kb, name, state, page)
        if request.query_params.get("part") == "main":
            return "_disputes.html", shown
        return "disputes.html", {**shown, "seq": self.kb.seq}

    def contexts(self, request: Request) -> Page:
        selected = request.path_params.get("name")
        after = reads.number(request.query_params.get("after"), "after", default=0)
        page = reads.number(request.query_params.get("page"), "page")
        return "contexts.html", reads.contexts_page(self.kb, selected, after, page)

    def why(self, request: Request) -> Page:
        return "why.html", reads.why_page(self.kb, request.path_params["handle"])

    async def wraps(self, request: Request, viewer: Caller) -> str | bytes:
        """The wraps' records on a thread, then their entries from the KB."""
        budget = self.daemon.limits.query_budget_s
        records = await self.daemon.read_records(
            lambda: reads.wraps_records(self.kb), budget, wraps_store.ensure
        )
        return await self._from_kb(
            lambda: ("wraps.html", reads.wraps_page(self.kb, records)), viewer
        )

    async def sessions(self, request: Request, viewer: Caller) -> str | bytes:
        """The session index or search, as the API's session search runs."""
        self._introspection()
        search = request.query_params.get("search")

        def read() -> Page:
            return "sessions.html", reads.sessions_page(self.kb, search)

        return await self._from_records(read, viewer, sessions_schema.ready)

    async def session(self, request: Request, viewer: Caller) -> str | bytes:
        self._introspection()
        target = request.path_params["target"]

        def read() -> Page:
            return "session.html", reads.session_page(self.kb, target)

        return await self._from_records(read, viewer, sessions_schema.ready)

    def _introspection(self) -> None:
        if not self.introspection:
            raise Refused(
                "introspection-off",
                "session introspection is off, so the view shows no sessions: start the "
                "daemon with KOINII_INTROSPECTION=1 to show them",
                {},
            )

    async def api(self, request: Request) -> Response:
        headers = _guard_headers(request)
        try:
            self.daemon.guard(headers)
        except Refused as refusal:
            return self.refusal(refusal)
        if self._api is None:
            self._api = api_page()
        host = headers.get(b"host") or "127.0.0.1:7411"
        return self.templates.page("api.html", host=host, version=__version__, **self._api)

    async def channel_slash(self, request: Request) -> Response:
        return RedirectResponse(f"/channel/{quote(request.path_params['name'])}/", 307)


def api_page() -> dict[str, Any]:
    """What the API page shows, read off the OpenAPI document (so off the field table)."""
    document = openapi_document()

    def type_of(schema: dict[str, Any]) -> str:
        if "oneOf" in schema:
            return " or ".join(type_of(option) for option in schema["oneOf"])
        if schema.get("type") == "array":
            return f"array of {type_of(schema.get('items') or {})}"
        return schema.get("type", "any")

    operations = []
    statuses: dict[str, str] = {}
    for path, methods in document["paths"].items():
        post = methods.get("post")
        if post is None:
            continue
        for status, reply in post["responses"].items():
            statuses.setdefault(status, reply["description"])
        body = post["requestBody"]["content"]["application/json"]["schema"]
        required = set(body.get("required", ()))
        fields = [
            {
                "name": name,
                "type": type_of(schema),
                "required": name in required,
                "description": schema.get("description", ""),
            }
            for name, schema in body["properties"].items()
        ]
        operations.append(
            {"id": post["operationId"], "path": path, "summary": post["summary"], "fields": fields}
        )
    return {"operations": operations, "statuses": sorted(statuses.items())}


def routes(daemon: Daemon) -> list[Route]:
    """The view's routes, mounted beside the API by `koinii serve` (`build_app`'s
    `pages`)."""
    view = View(daemon)
    page = view.page
    return [
        Route("/", page(view.from_kb(view.home)), methods=["GET"]),
        Route("/api", view.api, methods=["GET"]),
        Route("/login", view.login_form, methods=["GET"]),
        Route("/login", view.login, methods=["POST"]),
        Route("/logout", view.logout, methods=["POST"]),
        Route("/static/{name}", view.asset, methods=["GET"]),
        Route("/channel/{name}", view.channel_slash, methods=["GET"]),
        Route("/channel/{name}/", page(view.channel), methods=["GET"]),
        Route("/channel/{name}/live", view.stream, methods=["GET"]),
        Route("/channel/{name}/thread/{handle}", page(view.from_kb(view.thread)), methods=["GET"]),
        Route("/channel/{name}/disputes", page(view.from_kb(view.disputes)), methods=["GET"]),
        Route("/contexts", page(view.from_kb(view.contexts)), methods=["GET"]),
        Route("/contexts/{name}", page(view.from_kb(view.contexts)), methods=["GET"]),
        Route("/why/{handle}", page(view.from_kb(view.why)), methods=["GET"]),
        Route("/wraps", page(view.wraps), methods=["GET"]),
        Route("/sessions", page(view.sessions), methods=["GET"]),
        Route("/sessions/{target}", page(view.session), methods=["GET"]),
    ]
