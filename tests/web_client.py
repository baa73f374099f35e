"""A browser's side of the web view without a browser: plain HTTP with a cookie jar of
one cookie, no redirects followed (the tests look at each answer)."""

from __future__ import annotations

import http.client
import re
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    text: str

    def refusal_kind(self) -> str | None:
        """The kind an error page names (`Refused: <code>kind</code>`)."""
        found = re.search(r"Refused: <code>([^<]+)</code>", self.text)
        return found.group(1) if found else None


@dataclass
class Browser:
    url: str
    cookie: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def _connection(self, timeout: float = 10.0) -> http.client.HTTPConnection:
        parts = urlsplit(self.url)
        return http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)

    def request(self, method: str, path: str, body: bytes | None = None, **headers: str) -> Answer:
        sent = {**self.extra, **{k.replace("_", "-"): v for k, v in headers.items()}}
        if self.cookie:
            sent.setdefault("Cookie", self.cookie)
        connection = self._connection()
        try:
            connection.request(method, path, body=body, headers=sent)
            reply = connection.getresponse()
            text = reply.read().decode("utf-8", "replace")
            return Answer(reply.status, {k.lower(): v for k, v in reply.getheaders()}, text)
        finally:
            connection.close()

    def get(self, path: str, **headers: str) -> Answer:
        return self.request("GET", path, **headers)

    def sign_in(self, token: str, back: str = "/", **headers: str) -> Answer:
        body = urlencode({"token": token, "next": back}).encode()
        answer = self.request(
            "POST", "/login", body, Content_Type="application/x-www-form-urlencoded", **headers
        )
        cookie = answer.headers.get("set-cookie")
        if answer.status == 303 and cookie:
            self.cookie = cookie.split(";", 1)[0]
        return answer

    def events(self, path: str, count: int, timeout: float = 10.0) -> list[tuple[str, str, float]]:
        """Read `count` events of a server-sent-events stream: (event, data, the
        `time.monotonic()` it arrived at)."""
        connection = self._connection(timeout)
        sent = {"Cookie": self.cookie} if self.cookie else {}
        connection.request("GET", path, headers=sent)
        reply = connection.getresponse()
        assert reply.status == 200, reply.read()
        found: list[tuple[str, str, float]] = []
        event, data = "message", []
        try:
            while len(found) < count:
                line = reply.fp.readline().decode("utf-8")
                if not line:
                    break
                line = line.rstrip("\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    data.append(line[6:])
                elif line == "" and data:
                    found.append((event, "\n".join(data), time.monotonic()))
                    event, data = "message", []
        finally:
            connection.close()
        return found
