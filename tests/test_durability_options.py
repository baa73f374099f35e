"""`synchronous`: what an acknowledged write survives, chosen by the operator and real.

- The store reports the setting it read back from its own connection (SQLite's
  `PRAGMA synchronous`, PostgreSQL's `synchronous_commit`), in-process and on `/health`.
- `koinii serve --synchronous full` syncs the disk for every acknowledged write, and the
  default does not: counted with strace on the daemon process — the system calls
  themselves (fsync/fdatasync), not a setting that claims them. Skipped, loudly, where
  strace cannot trace.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

import koinii
from tests.conftest import port_from, refused

WRITES = 40


@pytest.mark.parametrize("synchronous", ["normal", "full"])
def test_the_store_reports_the_setting_it_runs(new_location, backend, synchronous):
    with koinii.open_kb(new_location(), synchronous=synchronous) as kb:
        durability = kb.durability
    if backend == "sqlite":
        assert durability == {
            "backend": "sqlite",
            "journal_mode": "wal",
            "synchronous": synchronous,
        }
    else:
        assert durability["backend"] == "postgresql"
        if synchronous == "full":
            assert durability["synchronous_commit"] == "on"


def test_an_unknown_level_is_refused_on_every_backend(new_location):
    location = new_location()
    refusal = refused(lambda: koinii.open_kb(location, synchronous="extra"))
    assert refusal.kind == "bad-option" and refusal.data["option"] == "synchronous"
    assert refused(lambda: koinii.open_kb(location, create=False)).kind == "no-such-store"


@pytest.mark.parametrize("args, level", [([], "normal"), (["--synchronous", "full"], "full")])
def test_the_daemon_runs_the_level_it_was_given(start_daemon, backend, args, level):
    daemon = start_daemon(*args)
    durability = daemon.client().health()["durability"]
    if backend == "sqlite":
        assert durability["synchronous"] == level
    elif level == "full":
        assert durability["synchronous_commit"] == "on"


def _strace_works() -> bool:
    if shutil.which("strace") is None:
        return False
    probe = subprocess.run(["strace", "-f", "-o", os.devnull, "true"], capture_output=True)
    return probe.returncode == 0


def _syncs_behind_writes(tmp_path, args: list[str]) -> int:
    """How many fsync/fdatasync calls a daemon makes from its start until it has
    acknowledged WRITES writes (killed then, so shutdown's checkpoint is not counted)."""
    tmp_path.mkdir()
    out = tmp_path / "strace.txt"
    traced = subprocess.Popen(
        ["strace", "-f", "-qq", "-c", "-o", str(out), "-e", "trace=fsync,fdatasync",
         sys.executable, "-m", "koinii", "serve", "--db", str(tmp_path / "kb.db"),
         "--port", "0", "--port-file", str(tmp_path / "port"), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        port = port_from(tmp_path / "port", traced, timeout=60)  # slower, traced
        client = koinii.connect(f"http://127.0.0.1:{port}")
        for i in range(WRITES):
            client.assert_(f"(wrote Item{i})", "CxA")
        import psutil

        (daemon,) = psutil.Process(traced.pid).children()
        daemon.send_signal(signal.SIGKILL)
        traced.wait(30)
    finally:
        if traced.poll() is None:
            traced.kill()
    return _count(out)


def _count(out) -> int:
    return sum(
        int(m.group(1))
        for m in re.finditer(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?f(?:data)?sync$",
                             out.read_text(), re.M)
    )  # fmt: skip


@pytest.mark.skipif(not _strace_works(), reason="strace is not installed, or cannot trace here")
def test_synchronous_full_syncs_the_disk_for_every_acknowledged_write(tmp_path):
    full = _syncs_behind_writes(tmp_path / "full", ["--synchronous", "full"])
    normal = _syncs_behind_writes(tmp_path / "normal", [])
    assert full >= WRITES, full
    assert normal < WRITES / 4, normal
