"""The resilience benchmark keeps its property: under every attack of issue 17 the other
clients are served, and no attack holds the daemon past its budget. The bounds are
generous (the target is p99 <= 50 ms): they catch a daemon that freezes, not one that is a
few milliseconds slower. A freeze holds every probe made during it, so the median is
bounded tightly; the tail only loosely, since a machine shared with another run of the
suite stalls a probe now and then (653 ms once, at a load of twice the cores)."""

import json
import pathlib
import subprocess
import sys

BENCHMARK = pathlib.Path(__file__).parent.parent / "benchmarks" / "resilience.py"
GENEROUS_P50_MS = 250
GENEROUS_P99_MS = 1_500  # a stall of a shared machine; the median catches a frozen daemon


def test_no_attack_freezes_the_daemon_or_misreports(postgres):
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick", "--json", "--suite", "transport"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {row["attack"]: row for row in json.loads(result.stdout.splitlines()[-1])}

    for name in ("quiet", "cross-rule write", "15 MiB goal", "3-literal join", "join, limit 1"):
        row = rows[name]
        assert row["failed"] == 0, row
        for call in ("health", "write"):
            assert row[f"{call}_p50_ms"] < GENEROUS_P50_MS, row
            assert row[f"{call}_p99_ms"] < GENEROUS_P99_MS, row
    assert rows["cross-rule write"]["answer"] == "budget-exhausted"
    assert rows["cross-rule write"]["held_s"] < 1.0
    assert rows["15 MiB goal"]["answer"] == "body-too-large"
    assert rows["3-literal join"]["answer"] == "budget-exhausted"
    assert rows["3-literal join"]["held_s"] < 2.0  # its 0.5 s budget, and slack
    assert rows["join, limit 1"]["answer"] == "done"

    stop = rows["SIGTERM, consumers attached"]
    assert stop["held_s"] < 2.0 and stop["answer"].startswith("exit 0; parked wait: normal")
    assert "restart at once: ok" in stop["notes"]
    assert rows["kill -9 restart, subscriber"]["answer"] == "lost 0, repeated 0"
    assert rows["PostgreSQL backend killed"]["answer"] == "write ok; health 200"
