"""The daemon against its own OpenAPI document: schemathesis finds no 500 and no
response that breaks the schema (bounded examples, fixed seed, so CI is repeatable)."""

import pathlib
import subprocess
import sys

import pytest


# The HTTP layer and its schema are the same over either store (the storage suites run on
# both): one run, on SQLite, of what took a quarter of a worker's time twice.
@pytest.mark.backends("sqlite")
def test_schemathesis_finds_no_server_error_and_no_schema_violation(daemon):
    cli = pathlib.Path(sys.executable).parent / "schemathesis"
    result = subprocess.run(
        [
            str(cli),
            "run",
            f"{daemon.url}/openapi.json",
            "--checks",
            "not_a_server_error,response_schema_conformance,status_code_conformance,"
            "content_type_conformance",
            "--max-examples",
            "25",
            "--phases",
            "examples,coverage,fuzzing",
            "--seed",
            "20261129",
            "--warnings",
            "off",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert daemon.proc.poll() is None  # and the daemon is still up
