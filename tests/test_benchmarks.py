"""A tiny smoke run of each benchmark, so they keep working (the real runs are not CI's)."""

import pathlib
import subprocess
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).parent.parent / "benchmarks"


@pytest.mark.parametrize("name", ["engine", "wire", "backends", "sessions", "web", "search"])
def test_the_benchmark_runs_in_quick_mode_and_prints_its_table(name, postgres):
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{name}.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Koinii" in result.stdout
    assert "n/a (PostgreSQL not reachable)" not in result.stdout
