"""Koinii's processes for the tests, forked from one that has already imported Koinii.

A `koinii serve` child spent most of its start importing Koinii, Starlette, uvicorn and the
web view (0.5 s on a quiet machine, several seconds on a busy one), and the suite starts
hundreds. Here a *zygote* — this file run as a script, one per test process — imports them
once and waits; each command the tests start is a `fork` of it running `koinii <args>`: a
real process of its own (its own pid, kill -9, exit codes, files and sockets), that only
skips the imports. The zygote is single-threaded, so the fork is safe.

The test's side, `Forked`, behaves as `subprocess.Popen` does for what the tests use:
`pid`, `poll`, `wait(timeout)`, `send_signal`, `kill`, `terminate`, `returncode` (negative:
the signal that ended it), and the pipes it was given (`stdin`, `stdout`, `stderr`): the
test makes the pipes and passes the child's ends to the zygote with the request
(SCM_RIGHTS), so they are the child's 0, 1 and 2. The zygote reports each child's end on
the connection that started it.

The commands that test how Koinii starts (`python -m koinii …` itself) keep starting it so.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any

DEVNULL = subprocess.DEVNULL
PIPE = subprocess.PIPE
ZYGOTE = "KOINII_TEST_ZYGOTE"  # where a launcher finds the zygote (see `Forker.command`)


class Forked:
    """A forked `koinii` command (see the module docstring)."""

    def __init__(self, conn: socket.socket, pid: int, pipes: dict[str, IO | None]) -> None:
        self._conn = conn
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = pipes.get("stdin")
        self.stdout = pipes.get("stdout")
        self.stderr = pipes.get("stderr")
        self._lock = threading.Lock()

    def _collect(self, timeout: float | None) -> int | None:
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            ready, _, _ = select.select([self._conn], [], [], timeout)
            if not ready:
                return None
            raw = b""
            while not raw.endswith(b"\n"):
                chunk = self._conn.recv(64)
                if not chunk:  # the zygote went: nothing can report the child's end
                    raise RuntimeError(f"lost the zygote of process {self.pid}")
                raw += chunk
            self.returncode = int(json.loads(raw)["returncode"])
            self._conn.close()
            return self.returncode

    def poll(self) -> int | None:
        return self._collect(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"koinii (pid {self.pid})", timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it ended: its end is on the way
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Its end, and what it wrote to the pipes given as PIPE (read whole)."""
        outs: dict[str, Any] = {}

        def drain(name: str, stream: IO) -> None:
            outs[name] = stream.read()

        readers = [
            threading.Thread(target=drain, args=(name, stream), daemon=True)
            for name, stream in (("stdout", self.stdout), ("stderr", self.stderr))
            if stream is not None
        ]
        for reader in readers:
            reader.start()
        self.wait(timeout)
        for reader in readers:
            reader.join(timeout)
        return outs.get("stdout"), outs.get("stderr")


class Forker:
    """The test's side of a zygote: `popen(args, …)` forks `koinii <args>` from it. Made
    with no `path`, it starts a zygote of its own (and `close` stops it); with one, it
    uses the zygote listening there (a launcher's, see `launch`)."""

    def __init__(self, path: str | None = None) -> None:
        self._zygote: subprocess.Popen | None = None
        self._folder: str | None = None
        if path is not None:
            self.path = path
            return
        self._folder = tempfile.mkdtemp(prefix="koinii-zygote-")
        self.path = os.path.join(self._folder, "zygote")
        self._zygote = subprocess.Popen(
            [sys.executable, __file__, self.path],
            stdin=subprocess.PIPE,  # its end of the pipe closing tells it we are gone
            stdout=subprocess.PIPE,
        )
        ready, _, _ = select.select([self._zygote.stdout], [], [], 120)
        if not ready or self._zygote.stdout.readline().strip() != b"ready":
            self._zygote.kill()
            raise RuntimeError("the zygote did not start within 120 s")

    def command(self, args: list[str]) -> tuple[str, list[str], dict[str, str]]:
        """`koinii <args>` as a command another program starts (the MCP SDK's client
        starts its server so): a small launcher that has the zygote fork the command on
        the launcher's own stdin, stdout and stderr, passes signals on, and exits as it
        does. Returns (executable, arguments, the environment to add)."""
        return sys.executable, [__file__, "--launch", *args], {ZYGOTE: self.path}

    def run(
        self,
        args: list[str],
        *,
        input: str | None = None,
        timeout: float = 60,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> subprocess.CompletedProcess:
        """As `subprocess.run([koinii, *args], capture_output=True, text=True)`."""
        child = self.popen(args, stdin=PIPE, stdout=PIPE, stderr=PIPE, text=True, env=env, cwd=cwd)
        if input:
            child.stdin.write(input)
        child.stdin.close()
        try:
            out, err = child.communicate(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            raise
        return subprocess.CompletedProcess(["koinii", *args], child.returncode, out, err)

    def popen(
        self,
        args: list[str],
        *,
        stdin: int | None = DEVNULL,
        stdout: int | None = DEVNULL,
        stderr: int | None = DEVNULL,
        text: bool = False,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        fd_limit: int | None = None,
    ) -> Forked:
        """Fork `koinii <args>`; each stream is DEVNULL, PIPE (a pipe to the test,
        returned on the `Forked`) or None (the test process's own)."""
        child_ends: list[int] = []
        ours: dict[str, IO | None] = {}
        opened: list[int] = []
        for fd, name, how in ((0, "stdin", stdin), (1, "stdout", stdout), (2, "stderr", stderr)):
            if how is None:
                child_ends.append(fd)
            elif how == DEVNULL:
                null = os.open(os.devnull, os.O_RDWR)
                opened.append(null)
                child_ends.append(null)
            else:
                read, write = os.pipe()
                child, mine = (read, write) if fd == 0 else (write, read)
                opened.append(child)
                child_ends.append(child)
                mode = ("w" if fd == 0 else "r") + ("" if text else "b")
                ours[name] = os.fdopen(mine, mode, buffering=-1 if text or fd else 0)
        request = {
            "args": args,
            "env": dict(os.environ if env is None else env),
            "cwd": cwd or os.getcwd(),
            "fd_limit": fd_limit,
        }
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(60)
            conn.connect(self.path)
            socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], child_ends)
            raw = b""
            while not raw.endswith(b"\n"):
                chunk = conn.recv(64)
                if not chunk:
                    raise RuntimeError("the zygote did not fork the command")
                raw += chunk
        finally:
            for fd in opened:
                os.close(fd)
        conn.settimeout(None)
        return Forked(conn, int(json.loads(raw)["pid"]), ours)

    def close(self) -> None:
        if self._zygote is None:
            return
        if self._zygote.poll() is None:
            self._zygote.stdin.close()
            try:
                self._zygote.wait(10)
            except subprocess.TimeoutExpired:
                self._zygote.kill()
        shutil.rmtree(self._folder or "", ignore_errors=True)


# --- the zygote ----------------------------------------------------------------------------


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become `koinii <args>` on the given streams, then exit."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds):
            if fd > 2:
                os.close(fd)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        if request["fd_limit"] is not None:
            import resource

            limit = request["fd_limit"]
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
        sys.argv = ["koinii", *request["args"]]
        from koinii.cli import main

        try:
            main.main(args=request["args"], prog_name="koinii")
            code = 0
        except SystemExit as stopped:
            code = stopped.code if isinstance(stopped.code, int) else (stopped.code is not None)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(int(code))


def _zygote(path: str) -> None:
    # What every command imports, once: the CLI, the daemon and its web view, the MCP
    # server, the clients, the domain operations, what uvicorn imports as it starts; and
    # what every daemon loads as it starts: the shipped vocabulary, parsed, and the search
    # model (a second of CPU each, in a thread). Nothing here may start a thread (a fork
    # copies only the caller); none of these does.
    import uvicorn.lifespan.on
    import uvicorn.loops.auto
    import uvicorn.protocols.http.auto
    import uvicorn.protocols.websockets.auto  # noqa: F401

    import koinii.cli
    import koinii.client.sync
    import koinii.mcp
    import koinii.server
    import koinii.web  # noqa: F401
    from koinii import operations
    from koinii.kb import semantic, vocab

    operations.load_domains()
    for context, _ in vocab.VOCABULARIES:
        vocab.terms_of(context)
    semantic.load()
    assert threading.active_count() == 1, "the zygote started a thread: a fork would lose it"

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    children: dict[int, socket.socket] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    parent_gone = False
    while not parent_gone:
        ready, _, _ = select.select([listener, sys.stdin.fileno()], [], [], 0.05)
        for source in ready:
            if source == listener:
                conn, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                while not message.endswith(b"\n"):
                    message += conn.recv(1 << 20)
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    conn.close()
                    for other in children.values():
                        other.close()
                    _child(json.loads(message), fds)
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            elif not os.read(sys.stdin.fileno(), 1):
                parent_gone = True
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is None:
                continue
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"returncode": code}).encode() + b"\n")
            conn.close()
    for pid in children:  # the tests are gone: nothing they started may outlive them
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _launch(args: list[str]) -> None:
    """The launcher of `Forker.command`: fork `koinii <args>` on this process's streams,
    pass SIGTERM, SIGINT and SIGHUP on to it, and end as it ends."""
    child = Forker(os.environ[ZYGOTE]).popen(
        args, stdin=None, stdout=None, stderr=None, env=dict(os.environ)
    )
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda sig, _frame: child.send_signal(sig))
    code = child.wait()
    if code < 0:  # ended by a signal: end by it too
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    if sys.argv[1] == "--launch":
        _launch(sys.argv[2:])
    else:
        _zygote(sys.argv[1])
