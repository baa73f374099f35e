"""A tiny smoke run of each benchmark, so they keep working (the real runs are not CI's)."""

import pathlib
import subprocess
import sys

import pytest

# Smoke runs of the benchmarks: slow, so CI runs them after the main suite (pytest -m slow).
pytestmark = pytest.mark.slow
BENCHMARKS = pathlib.Path(__file__).parent.parent / "benchmarks"


def benchmark_table(script: str, *args: str, timeout: float = 300) -> str:
    """What `benchmarks/<script> <args>` prints, once it has exited 0."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# the benchmarks with a PostgreSQL column, run against the tests' server (KOINII_TEST_PG,
# which they read too); the others run without one
WITH_POSTGRES = {"wire", "backends", "scale"}


@pytest.mark.parametrize(
    "name",
    [
        "engine",
        "wire",
        "backends",
        "sessions",
        "web",
        "scale",
        "search",
        "recall",
        "cli_startup",
        "ontology",
        "history",
    ],
)
def test_the_benchmark_runs_in_quick_mode_and_prints_its_table(name, request):
    if name in WITH_POSTGRES:
        request.getfixturevalue("postgres")  # skipped, saying why, without a server
    table = benchmark_table(f"{name}.py", "--quick")
    assert "Koinii" in table
    assert "n/a (PostgreSQL not reachable)" not in table
    if name == "recall":  # the transformer peer: measured where installed, else says how
        rows = [row for row in table.splitlines() if "MiniLM-L6-v2 alone | 0 |" in row]
        assert rows, table
        mrr = rows[0].split("|")[3].strip()
        assert mrr.startswith("not installed: pip install") or float(mrr) > 0, rows[0]
    if name == "ontology":  # its peers answer what Koinii answers, checked in the run
        assert "every answer equal to Koinii's" in table
        assert "NOT equal" not in table


def test_the_scale_benchmark_times_its_reads_alone():
    table = benchmark_table("scale.py", "--quick", "--reads")
    assert "facts: reads" in table
    assert "row result, rows/s" in table
    assert "feed" not in table and "daemon" not in table


def test_the_scale_benchmark_times_its_feed_alone():
    table = benchmark_table("scale.py", "--feed", "--watchers", "2")
    assert "## feed: one write, heard by every watcher" in table
    rows = [line.split() for line in table.splitlines()]
    assert any(row[:1] == ["2"] and len(row) >= 3 for row in rows), table
    assert "Load average" in table
    assert "facts" not in table and "closure" not in table


def test_the_resilience_benchmark_runs_each_agent_attack_tiny():
    """Issue 37's attacks, each a hundredth of its size: the table comes out, each attack
    answered as the daemon answers it (the timings are the real run's, not CI's)."""
    table = benchmark_table("resilience.py", "--suite", "agents", "--tiny", timeout=600)
    assert "Koinii" in table and "| verdict |" in table
    for answer in ("batch-too-large", "koinii/foreign-context", "forbidden", "bad-wrap"):
        assert f"| {answer} |" in table, answer
    assert "| bad-session |" in table
