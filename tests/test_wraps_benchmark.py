"""benchmarks/wraps.py --quick runs, agrees with raw SQL, and every read is an index search.

Only the shape is checked here (no timing: the full run reports the 2 ms targets)."""

import pathlib
import subprocess
import sys

import pytest

# A smoke run of the wraps benchmark: slow, so CI runs it after the main suite (pytest -m slow).
pytestmark = pytest.mark.slow

BENCHMARK = pathlib.Path(__file__).parent.parent / "benchmarks" / "wraps.py"


def test_the_quick_benchmark_prints_a_table_of_indexed_reads():
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Koinii wrap-queue benchmark: 10,000 wraps")
    rows = [
        line for line in lines if line.startswith(("session read", "hierarchy read", "project"))
    ]
    assert len(rows) == 4
    for row in rows:
        plan = row[row.index("SEARCH") :]
        assert "SCAN" not in plan and "by_" in plan
