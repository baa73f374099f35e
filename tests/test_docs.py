"""The documentation's examples run: every ```python block of a doc, in order."""

import pathlib
import re

import pytest

# The docs' examples, run: slow, so CI runs it after the main suite (pytest -m slow).
pytestmark = pytest.mark.slow

DOCS = pathlib.Path(__file__).parent.parent / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


@pytest.mark.parametrize("doc", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_the_examples_in_the_doc_run(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for number, block in enumerate(BLOCK.findall(doc.read_text()), 1):
        exec(compile(block, f"{doc.name}[block {number}]", "exec"), namespace)
