"""Transport guards: the names the daemon answers to, the origins it serves, and the
connections it keeps (docs/security.md, "Transport guards").

Invariants:
- Every request names, in its Host header, a name the daemon answers to (`Hosts`):
  the loopback names and addresses, the address it is bound to, and the names given
  with `--allow-host`; any other is refused `bad-host` (403). A page on a site whose
  name was re-pointed at this machine (DNS rebinding) sends its own name as the Host,
  and is refused — even though it is same-origin to the browser.
- A request that carries an Origin (a browser's) comes from the daemon's own origin:
  `http(s)://<the Host it named>`. A page on any other origin — another port of
  localhost included — is refused `cross-origin` (403).
- Only a connection with a request in flight holds its place: the others — still
  sending headers, or idle between requests — are closed after a deadline, or the
  moment the daemon needs their place for a new connection (`guarded_protocol`), so
  clients without a token cannot exhaust the connections (or the descriptors) that a
  client with one needs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from koinii.errors import Refused

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARDS = ("0.0.0.0", "::", "")


def host_name(header: str) -> str:
    """The name of a Host header, lower-cased, without its port or a final dot."""
    header = header.strip().lower()
    if header.startswith("["):  # an IPv6 literal: [::1]:7411
        end = header.find("]")
        return header[1:end] if end > 0 else header
    if header.count(":") == 1:
        header = header.split(":", 1)[0]
    return header.rstrip(".")


def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class Hosts:
    """The names the daemon answers to: loopback, its bound address, and `allowed`.

    Bound to every interface (0.0.0.0, ::), it answers to any IP address, which no
    rebinding page can send (its Host is its own name); names are allowed one by one.
    """

    def __init__(self, bound: str = "127.0.0.1", allowed: Iterable[str] = ()) -> None:
        bound_name = host_name(bound)
        self.any_address = bound_name in _WILDCARDS
        names = {*LOOPBACK_NAMES, *(host_name(n) for n in allowed)}
        if not self.any_address:
            names.add(bound_name)
        self.names = frozenset(names)

    def answers_to(self, name: str) -> bool:
        if name in self.names:
            return True
        address = _address(name)
        return address is not None and (address.is_loopback or self.any_address)

    def check(self, header: str | None) -> None:
        name = host_name(header or "")
        if name and self.answers_to(name):
            return
        shown = name[:100] or "(none)"
        raise Refused(
            "bad-host",
            f"this daemon does not answer to the host {shown}: a request names one of "
            f"{', '.join(sorted(self.names))} in its Host header (a page whose site name "
            f"points at this machine is refused). To use this name, start the daemon "
            f"with --allow-host {shown if name else 'NAME'}",
            {"host": shown, "allowed": sorted(self.names)},
        )


def check_origin(origin: str | None, host: str | None) -> None:
    """A browser's request comes from the daemon's own origin, or is refused."""
    if origin is None:
        return
    if origin not in (f"http://{host}", f"https://{host}"):
        raise Refused(
            "cross-origin",
            "requests from another origin (a browser page) are refused",
            {"origin": origin[:200]},
        )


# --- connections ---------------------------------------------------------------------------

FD_RESERVE = 64  # descriptors kept for the store, the log and the listener
HEADER_BYTES = 64 * 1024  # the most a request's line and headers may take

_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_431 = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n"
    b"connection: close\r\n\r\n"
)
_503 = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def connection_cap(requested: int | None = None) -> int:
    """How many connections the daemon keeps at once: `requested`, or what the process's
    descriptor limit leaves after `FD_RESERVE` (a cap past the limit would let the
    connections starve the accept loop itself)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    room = max(8, soft - FD_RESERVE) if soft != resource.RLIM_INFINITY else 65_536
    return min(requested, room) if requested else min(room, 65_536)


def guarded_protocol(cap: int, header_s: float) -> type:
    """uvicorn's httptools protocol under the connection guards:

    - a connection sends a request's line and headers within `header_s` of opening, or
      of its last response, and in at most `HEADER_BYTES`, or is closed (408, 431);
    - at most `cap` connections are kept: one more makes room by closing the oldest
      connection that has no request in flight — one still sending its headers, or idle
      between requests. A client cannot hold a slot without a request in flight, and an
      unauthenticated request is answered (401) at once, so connections without a token
      cannot lock out a client that has one. (A body that stalls is the application's to
      time out: `Limits.body_s`.)
    """
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    idle: dict[Any, None] = {}  # the connections with no request in flight, oldest first

    class Guarded(HttpToolsProtocol):
        _deadline: Any = None
        _reading_headers = False
        _header_bytes = 0

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._idle()
            if len(self.connections) > cap:
                self._make_room()

        def _idle(self) -> None:
            """No request in flight: the place may be taken, and the next request's
            headers are due within `header_s` (the rest of a body answered early, too)."""
            idle[self] = None
            self._disarm()
            self._deadline = self.loop.call_later(header_s, self._close, _408)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _make_room(self) -> None:
            oldest = next((c for c in idle if c is not self), None)
            if oldest is not None:
                oldest._close(None)
            else:  # every other connection is serving a request: this one must wait
                self._close(_503)

        def _close(self, answer: bytes | None) -> None:
            idle.pop(self, None)
            self._disarm()
            if not self.transport.is_closing():
                if answer is not None:
                    self.transport.write(answer)
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._reading_headers and not self.transport.is_closing():
                self._header_bytes += len(data)
                if self._header_bytes > HEADER_BYTES:
                    self._close(_431)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._reading_headers = True
            self._header_bytes = 0

        def on_headers_complete(self) -> None:
            self._reading_headers = False
            idle.pop(self, None)  # a request in flight: its place is its own
            self._disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            pipelined = bool(self.pipeline)  # its next request is read already
            super().on_response_complete()
            if not pipelined and not self.transport.is_closing():
                self._idle()

        def connection_lost(self, exc: Exception | None) -> None:
            idle.pop(self, None)
            self._disarm()
            super().connection_lost(exc)

    return Guarded
