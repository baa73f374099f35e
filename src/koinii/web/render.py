"""The view's HTML: the Jinja2 templates and static files packaged with Koinii, and the
headers every page of the view carries.

Invariants:
- Every value a page shows is escaped (autoescape on for every template): an agent's
  text is data, never markup — a sentence holding `<script>` shows as that text.
- Every response of the view carries `SECURITY_HEADERS`: a Content-Security-Policy that
  allows only this daemon's own scripts, styles and connections (no inline script, no
  other origin) and forbids framing, so a page elsewhere cannot frame or script it.
- The assets are read from the installed package once, at start-up; nothing is fetched
  from anywhere else (the view works offline).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import HTMLResponse, Response

from koinii.disputes.majority import MAJORITY_ARBITER
from koinii.web.moves import Line

PALETTE = 10  # agent colours: classes agent-0 … agent-9 in view.css

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # no-referrer would make the Origin of a form "null"
}
_PAGE_HEADERS = {**SECURITY_HEADERS, "cache-control": "no-store"}
_MEDIA = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def agent_colour(agent: str | None) -> str:
    """The colour class of an agent: the same name, the same colour, on every page."""
    if not agent:
        return "agent-none"
    return f"agent-{zlib.crc32(agent.encode('utf-8')) % PALETTE}"


def clock(ms: int | None) -> str:
    """An epoch-ms time as HH:MM:SS (UTC)."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")


def iso(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


class Templates:
    """The view's templates and static files."""

    def __init__(self) -> None:
        self.env = Environment(
            loader=PackageLoader("koinii.web", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
            # They ship in the package and never change under a running daemon: checked
            # for a change at every render, each line of the live feed cost a stat() of
            # its template file, on the loop
            auto_reload=False,
        )
        self.env.filters.update(colour=agent_colour, clock=clock, iso=iso)
        self.env.globals["majority"] = MAJORITY_ARBITER  # "resolved by the majority"
        folder = resources.files("koinii.web") / "static"
        self.static = {item.name: item.read_bytes() for item in folder.iterdir() if item.is_file()}
        self._compiled: asyncio.Future | None = None

    async def compiled(self) -> None:
        """Return once every template is compiled: the first caller has them compiled on
        a thread (they took 120 ms, of the loop, at the first page a daemon showed)."""
        if self._compiled is None:
            self._compiled = asyncio.ensure_future(asyncio.to_thread(self._compile))
        await self._compiled

    def _compile(self) -> None:
        for name in self.env.list_templates():
            self.env.get_template(name)

    def page(self, template: str, status: int = 200, **context: Any) -> Response:
        return self.response(self.html(template, **context), status)

    def html(self, template: str, spend: Callable[[], None] | None = None, **context: Any) -> str:
        """A page's HTML (rendered where its read ran: on the loop, in a snapshot, on a
        thread — a template touches nothing but what it is given); `spend()` once per
        piece of it, to count a long page toward the budget it is read in."""
        made = self.env.get_template(template)
        if spend is None:
            return made.render(**context)
        pieces = []
        for piece in made.generate(**context):
            spend()
            pieces.append(piece)
        return "".join(pieces)

    @staticmethod
    def response(html: str | bytes, status: int = 200) -> Response:
        return HTMLResponse(html, status_code=status, headers=_PAGE_HEADERS)

    def line(self, line: Line) -> str:
        """One move's line, as the channel page and the live stream both show it. Its
        links are relative to the channel's page (`/channel/<name>/`), so one rendering
        serves every channel that sees the move."""
        return self.env.get_template("_line.html").render(line=line).strip()

    def asset(self, name: str) -> Response | None:
        body = self.static.get(name)
        if body is None:
            return None
        media = _MEDIA.get(name[name.rfind(".") :], "application/octet-stream")
        headers = {**SECURITY_HEADERS, "cache-control": "public, max-age=300"}
        return Response(body, media_type=media, headers=headers)
