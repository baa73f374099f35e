"""A streamed reply's next chunk, written by a plain call: the feed's one pass (wire.md §3).

An ASGI application sends each chunk of a reply by awaiting `send`, so a write that a
hundred streams are waiting for resumes a hundred tasks — each through the middleware's
wrappers of `send` — for what is one `transport.write` each: 7.5 ms of the daemon's CPU
for such a write on two cores, against 4.8 ms written in one pass. The daemon's
connections (uvicorn's httptools protocol, `with_write_now`) offer each request, as the
ASGI extension `WRITE_NOW`, a call that writes one chunk of its reply at once and says
whether it could. Invariants:
- A chunk is written only while the reply is open and chunked (its start sent, its end
  not), the client is connected, and the transport is not asking its writers to wait
  (its buffer past the high-water mark: a slow reader). Otherwise the call writes
  nothing and answers False, and the chunk goes by `send`, which waits for the drain.
- It is framed exactly as uvicorn frames a chunk given to `send`: a caller may use both,
  one chunk at a time, and the client reads one well-formed chunked body.
- A caller never writes while its own `send` is still waiting, so chunks keep their order
  (`Subscriptions.lines` calls one or the other, never both at once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WRITE_NOW = "koinii.write_now"  # the ASGI extension: scope["extensions"][WRITE_NOW]

WriteNow = Callable[[bytes], bool]


def with_write_now(protocol: type) -> type:
    """`protocol` (uvicorn's httptools protocol, or a subclass) offering each request's
    scope a `WriteNow` for its reply."""

    class Offering(protocol):  # type: ignore[misc, valid-type]
        def on_headers_complete(self) -> None:
            before = self.cycle
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not before:  # a request began (an upgrade makes none)
                cycle.scope.setdefault("extensions", {})[WRITE_NOW] = _writer(cycle)

    return Offering


def _writer(cycle: Any) -> WriteNow:
    """The `WriteNow` of one request: `cycle` is uvicorn's RequestResponseCycle, whose
    fields say what its `send` would do with a body chunk."""

    def write_now(chunk: bytes) -> bool:
        if (
            cycle.disconnected
            or not cycle.response_started
            or cycle.response_complete
            or not cycle.chunked_encoding
            or cycle.flow.write_paused
            or not chunk
        ):
            return False
        cycle.transport.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        return True

    return write_now
