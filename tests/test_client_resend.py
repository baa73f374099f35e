"""When a connection fails, both clients resend only what is safe to resend, and never
report a write whose outcome is unknown as done or refused (daemon.md, status codes).

A scripted HTTP peer on a real socket plays the daemon's side of each failure: a
kept-alive connection closed under a request (the request never reached the daemon:
resent once, on a fresh connection), and a fresh connection closed after the request
arrived (it may have landed: `Unavailable`, and not resent).
"""

import socket
import threading

import pytest

import koinii

OK = b'{"ok":true,"result":{"seq":7}}'


class Peer:
    """Accepts connections; for each, runs the next script: a list of 'answer' (read a
    request, answer it, keep the connection) and 'drop' (read a request, close)."""

    def __init__(self, scripts: list[list[str]]) -> None:
        self.scripts = scripts
        self.requests = 0
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        for script in self.scripts:
            conn, _ = self.listener.accept()
            self.connections += 1
            with conn:
                reader = conn.makefile("rb")
                for step in script:
                    if not self._read_request(reader):
                        break
                    self.requests += 1
                    if step == "drop":
                        break
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(OK), OK)
                    )
                conn.shutdown(socket.SHUT_RDWR)

    @staticmethod
    def _read_request(reader) -> bool:
        length = 0
        line = reader.readline()
        if not line:
            return False
        while line not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
            line = reader.readline()
        reader.read(length)
        return True


def test_a_request_on_a_kept_alive_connection_the_peer_closed_is_resent_once(connect):
    peer = Peer([["answer", "drop"], ["answer"]])
    client = connect(peer.url, timeout=5)
    assert client.stats() == {"seq": 7}
    assert client.stats() == {"seq": 7}  # dropped on the kept-alive connection, then resent
    assert (peer.connections, peer.requests) == (2, 3)


def test_a_request_dropped_on_a_fresh_connection_is_unavailable_and_not_resent(connect):
    peer = Peer([["drop"], ["answer"]])
    client = connect(peer.url, timeout=5)
    with pytest.raises(koinii.Unavailable) as unavailable:
        client.assert_("(p A)", "CxA")  # it reached the peer: it may have landed
    assert "dropped the connection" in str(unavailable.value)
    assert (peer.connections, peer.requests) == (1, 1)


def test_a_kept_alive_connection_dropped_twice_is_unavailable(connect):
    peer = Peer([["answer", "drop"], ["drop"]])
    client = connect(peer.url, timeout=5)
    client.stats()
    with pytest.raises(koinii.Unavailable):
        client.assert_("(p A)", "CxA")
    assert (peer.connections, peer.requests) == (2, 3)
