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
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

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
