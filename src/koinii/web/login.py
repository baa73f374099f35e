"""Who is looking: the browsers signed in to the view, by an HttpOnly session cookie.

A browser is asked for a token once (any role: a reader token is enough). The daemon
checks it against the token table like a bearer token, then hands the browser a new
random view-session id in a cookie; the token itself is never stored in the browser.

Invariants:
- The cookie is the view's alone: it names a view session, which grants the view's GET
  pages and its live stream — no /v1 route reads it (they still require a bearer
  token), so a cookie, stolen or sent along by a forged request, writes nothing.
- The cookie is `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's
  page makes the browser send it) and `Path=/`; a view session ends after `LIFETIME_S`,
  at sign-out, when its principal's tokens are revoked and the table reloaded (SIGHUP),
  or when the daemon restarts (sessions live in its memory only).
- At most `MAX_SESSIONS` are kept: signing in past that ends the oldest.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict

from koinii.errors import Refused
from koinii.operations import Caller
from koinii.server.tokens import TokenTable

COOKIE = "koinii_view"
LIFETIME_S = 12 * 3600
MAX_SESSIONS = 1024


class ViewSessions:
    """The signed-in browsers of one daemon (see the module docstring)."""

    def __init__(self, tokens: TokenTable) -> None:
        self.tokens = tokens
        self._open: OrderedDict[str, tuple[Caller, float]] = OrderedDict()

    def sign_in(self, token: str) -> tuple[str, Caller]:
        """A new view session for a valid token: (cookie value, who it is). A wrong or
        malformed token is refused `unauthorized`, as over the API."""
        try:
            caller = self.tokens.caller("Bearer " + token.strip())
        except Refused:
            raise Refused(
                "unauthorized",
                "that is not a token this daemon knows: paste the kt_… token that "
                "`koinii token add` printed (any role; a reader token is enough); one "
                "added while the daemon runs counts after kill -HUP <its pid>",
                {},
            ) from None
        session = secrets.token_urlsafe(32)
        self._open[session] = (caller, time.monotonic() + LIFETIME_S)
        while len(self._open) > MAX_SESSIONS:
            self._open.popitem(last=False)
        return session, caller

    def caller(self, session: str | None) -> Caller | None:
        """Who a cookie's view session is, or None (no cookie, unknown, expired)."""
        found = self._open.get(session) if session else None
        if found is None:
            return None
        caller, expires = found
        if time.monotonic() > expires or not self.tokens.holds(caller):
            del self._open[session]
            return None
        return caller

    def sign_out(self, session: str | None) -> None:
        if session:
            self._open.pop(session, None)


def cookie_header(session: str, secure: bool) -> str:
    """The Set-Cookie value of a view session."""
    flags = f"; Max-Age={LIFETIME_S}; Path=/; HttpOnly; SameSite=Strict"
    return f"{COOKIE}={session}{flags}{'; Secure' if secure else ''}"


def cleared_cookie() -> str:
    return f"{COOKIE}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict"
