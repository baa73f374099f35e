"""A user's code type-checks against the package: it ships `py.typed`, and its public
surface is typed (mypy --strict over tests/typing/, as a user's project would run it)."""

import pathlib
import re
import subprocess
import sys

import pytest

# mypy --strict over a user's program: slow, so CI runs it after the main suite (pytest -m slow).
pytestmark = pytest.mark.slow

HERE = pathlib.Path(__file__).parent / "typing"


def mypy(script: pathlib.Path, cache: pathlib.Path) -> list[str]:
    """mypy --strict's error lines for `script`, as `<line>: <code>`."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), str(script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if "No module named mypy" in done.stderr:
        pytest.fail("mypy is not installed: pip install -e '.[test]'")
    found = re.findall(r":(\d+): error: .*\[([a-z-]+)\]$", done.stdout, re.MULTILINE)
    return [f"{line}: {code}" for line, code in found]


def test_the_package_says_it_is_typed():
    import koinii

    assert (pathlib.Path(koinii.__file__).parent / "py.typed").is_file()


def test_a_users_script_is_clean_under_mypy_strict(tmp_path):
    assert mypy(HERE / "user_script.py", tmp_path) == []


def test_the_types_catch_a_users_mistakes(tmp_path):
    lines = (HERE / "misuse.py").read_text().splitlines()
    expected = [
        f"{number}: {m.group(1)}"
        for number, line in enumerate(lines, 1)
        if (m := re.search(r"# error: ([a-z-]+)$", line))
    ]
    assert len(expected) == 13
    assert mypy(HERE / "misuse.py", tmp_path) == expected
