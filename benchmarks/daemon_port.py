"""Where a benchmark's daemon listens. Every benchmark starts `koinii serve --port 0`, on a
port the system chooses, and learns it from the daemon's start-up line in its log: a port
picked by the benchmark and handed to the daemon could be taken by another process first
(a daemon of a test run on the same machine). The start-up line, unlike `--port-file`, is
printed by the daemons of older trees too (resilience.py --before)."""

from __future__ import annotations

import re
import subprocess
import time

LISTENING = re.compile(r"koinii serve: listening on http://\S+:(\d+) ")


def port_from_log(log_path: str, child: subprocess.Popen, timeout: float = 60.0) -> int:
    """The port the daemon writing its stderr to `log_path` listens on, read from its
    start-up line once it answers. RuntimeError if it exits first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log_path, encoding="utf-8", errors="replace") as log:
            found = LISTENING.search(log.read())
        if found:
            return int(found.group(1))
        if child.poll() is not None:
            raise RuntimeError(f"the daemon exited with {child.returncode} before it answered")
        time.sleep(0.02)
    raise RuntimeError(f"the daemon did not answer within {timeout:g} s")
