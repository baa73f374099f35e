"""How long the `koinii` command takes to start: `koinii --help`, `--version`, a command's
own help, and simple commands that open a small store, each a new process — beside its
peers in the same run: the interpreter alone (`python -c pass`) and the interpreter
importing click (what any click command pays). The target is under 0.3 s for `--help`
and simple commands on an idle machine (issue 40); the ratios to the peers say how much
is Koinii's own, whatever the machine's speed.

Each command runs once first (to write the byte-code caches, as an installed package
has them), then `--runs` times; the table shows the median.

    python benchmarks/cli_startup.py [--runs N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(argv: list[str], runs: int, env: dict[str, str]) -> float:
    subprocess.run(argv, env=env, capture_output=True, check=True, timeout=120)  # warm
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=True, timeout=120)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="3 runs each (a smoke run)")
    runs = 3 if parser.parse_args().quick else parser.parse_args().runs
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = {k: v for k, v in env.items() if not k.startswith("KOINII_")}
    py = [sys.executable]
    with tempfile.TemporaryDirectory() as folder:
        db = os.path.join(folder, "small.db")
        subprocess.run(
            [*py, "-m", "koinii", "assert", "(ready Release)", "-c", "CxOps", "--db", db],
            env=env,
            capture_output=True,
            check=True,
            timeout=120,
        )
        rows = [
            ("python -c pass (peer)", [*py, "-c", "pass"]),
            ("python -c 'import click' (peer)", [*py, "-c", "import click"]),
            ("koinii --help", [*py, "-m", "koinii", "--help"]),
            ("koinii --version", [*py, "-m", "koinii", "--version"]),
            ("koinii query --help", [*py, "-m", "koinii", "query", "--help"]),
            (
                "koinii why-not 1 --db (small store)",
                [*py, "-m", "koinii", "why-not", "1", "--db", db],
            ),
            (
                "koinii query --db (small store)",
                [*py, "-m", "koinii", "query", "(ready ?x)", "-c", "CxOps", "--db", db],
            ),
            ("koinii channels --db (small store)", [*py, "-m", "koinii", "channels", "--db", db]),
        ]
        results = [(name, timed(argv, runs, env)) for name, argv in rows]
    base = results[1][1]
    print(f"Koinii CLI start-up, median of {runs} runs each (a new process each)")
    print(f"{'command':<40} {'seconds':>8} {'x click':>8}")
    for name, seconds in results:
        print(f"{name:<40} {seconds:>8.3f} {seconds / base:>8.2f}")


if __name__ == "__main__":
    main()
