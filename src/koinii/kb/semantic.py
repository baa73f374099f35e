"""Semantic ranking, the optional half of search: a small local embedding model, the
vectors of what is searched, and their fusion with the lexical rank (docs/search.md).

Installed with `pip install 'koinii[semantic]'`, which brings WordLlama (`wordllama`):
static token embeddings averaged and normalised — 256 numbers a text — whose weights and
tokenizer ship inside its own wheel (16 MB), so nothing is downloaded at run time and it
runs offline on numpy alone (no PyTorch). It was chosen over a transformer such as
all-MiniLM-L6-v2 (which ships in a wheel too, but needs PyTorch) because it embeds a
sentence in 30 to 50 µs (the transformer: about 10 ms here): a store's every sentence
can be embedded as it is searched, on the writer, without a model server.
`benchmarks/recall.py` measures what it adds.

Invariants:
- The model is loaded once per process, at the first embedding (not when asked whether
  the extra is installed), from the package's own files (downloads disabled): a search
  never touches the network.
- A `Vectors` index holds one unit-length vector per key it was given, keys increasing,
  every key up to `top` offered: its owner (the KB's search) catches it up with what is
  stored, and skips a key it no longer holds (vectors are never updated: what they
  embed, a stored sentence, never changes). The sessions keep their own (meaning.py).
- Fusion is reciprocal-rank fusion (`fuse`): each side contributes weight / (K + rank)
  per hit, so neither side's scores need to be comparable (the search weighs the words
  by how much of the search its best word hit holds); a meaning-only hit counts only
  above `MIN_SIMILARITY`, so a search for something nobody said still finds nothing.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from koinii.errors import Refused

RANKINGS = ("lexical", "hybrid")
K = 60  # reciprocal-rank fusion's constant (Cormack et al.'s usual value)
MIN_SIMILARITY = 0.30  # cosine below which a hit is not "about" the search (recall.py)
DEPTH = 20  # hits each side brings to the fusion, at least (recall.py: 50 finds no more)
DIMENSIONS = 256  # the model's own; cut to 128 or 64, recall.py found more noise hits

_model: Any = None
_missing = False  # the extra is not installed (found out once)
_model_lock = threading.Lock()


def installed() -> bool:
    """Is the semantic extra installed? Asked without loading its model (which the first
    embedding loads), so a process that never ranks by meaning never pays for it."""
    global _missing
    if _model is None and not _missing:
        _missing = importlib.util.find_spec("wordllama") is None
    return not _missing


def ranking_of(ranking: Any) -> str:
    """The ranking a search asked for, checked: `lexical`, `hybrid`, or None for the
    default — hybrid where the semantic extra is installed, else lexical."""
    if ranking is None:
        return "hybrid" if installed() else "lexical"
    if ranking not in RANKINGS:
        raise Refused(
            "bad-option",
            f"ranking is one of {', '.join(RANKINGS)} (or left out for the default), "
            f"not {ranking!r:.40}",
            {"option": "ranking", "allowed": list(RANKINGS)},
        )
    if ranking == "hybrid":
        _embedder()  # refuses, saying how to install it, when it is missing
    return str(ranking)


def model_identity() -> str:
    """What makes the vectors: the model's package, its version and the width kept. A
    checkpoint's vectors are used only under the same (kb/checkpoint.py)."""
    import importlib.metadata  # (a tenth of a second: only where vectors are kept)

    return f"wordllama {importlib.metadata.version('wordllama')} {DIMENSIONS}"


def load() -> None:
    """Load the model now, where the extra is installed (else nothing). It takes a third
    of a second or more, holding the interpreter: a daemon calls this in a thread as it
    starts, so that its first embedding, on its event loop, does not hold every request
    that long."""
    if installed():
        _embedder()


def embed(texts: Sequence[str]) -> Any:
    """The unit-length vectors of `texts` (a float32 array, one row each)."""
    return _embedder().embed(list(texts), norm=True)


def _embedder() -> Any:
    global _model, _missing
    if _model is not None:
        return _model
    with _model_lock:
        if _model is None:
            try:
                if _missing:  # asked once: the import is not retried at every search
                    raise ImportError("wordllama")
                import wordllama
            except ImportError as missing:
                _missing = True
                raise Refused(
                    "semantic-unavailable",
                    "hybrid ranking needs the semantic extra: pip install 'koinii[semantic]' "
                    "(or search with ranking='lexical')",
                    {"missing": "wordllama"},
                ) from missing
            # Its weights and tokenizer lie in the package itself; pointed there as the
            # cache, it finds both and never downloads.
            package = Path(wordllama.__file__).parent
            _model = wordllama.WordLlama.load(cache_dir=package, disable_download=True)
    return _model


class Vectors:
    """Unit vectors by increasing integer key, searched by cosine (see the module
    docstring). Not thread-safe: its owner serialises access (the KB's lock)."""

    def __init__(self) -> None:
        import numpy

        self._np = numpy
        self._keys = self._key_buffer = numpy.zeros(0, dtype=numpy.int64)
        self._rows = self._row_buffer = numpy.zeros((0, DIMENSIONS), dtype=numpy.float32)
        self._pending: list[Any] = []  # (keys, rows) not yet joined to the arrays
        self.top = 0  # the highest key embedded

    def add(self, keyed_texts: Sequence[tuple[int, str]], through: int) -> int:
        """Embed and keep the (key, text) pairs whose keys are above `top`, then move
        `top` to `through`: every key up to it has been offered. How many were added."""
        fresh = [(key, text) for key, text in keyed_texts if key > self.top]
        if fresh:
            np = self._np
            keys = np.fromiter((k for k, _ in fresh), dtype=np.int64, count=len(fresh))
            self._pending.append((keys, embed([text for _, text in fresh])))
        self.top = max(self.top, through)
        return len(fresh)

    def nearest(self, text: str) -> Iterator[tuple[int, float]]:
        """(key, cosine) for every key at least MIN_SIMILARITY from `text`, nearest
        first (ties by key). The nearest 8 x DEPTH are sorted first, the rest only if the
        caller reads past them (many of them may not be visible to it)."""
        self._join()
        if not len(self._keys):
            return
        np = self._np
        scores = self._rows @ embed([text])[0]
        close = np.flatnonzero(scores >= MIN_SIMILARITY)
        first = 8 * DEPTH
        if len(close) > first:
            head = np.argpartition(-scores[close], first)[:first]
            head = close[np.sort(head)]  # back in key order, for a stable sort by score
            rest = np.setdiff1d(close, head, assume_unique=True)
            parts = [head, rest]
        else:
            parts = [close]
        for part in parts:
            for i in part[np.argsort(-scores[part], kind="stable")]:
                yield int(self._keys[i]), float(scores[i])

    def arrays(self) -> tuple[Any, Any]:
        """(keys, rows): the vectors as two contiguous arrays, for a checkpoint."""
        self._join()
        return self._keys, self._rows

    @classmethod
    def restored(cls, top: int, keys: Any, rows: Any) -> Vectors:
        """Vectors read back from a checkpoint: every key up to `top` was offered."""
        vectors = cls()
        vectors._keys, vectors._rows, vectors.top = keys, rows, top
        vectors._key_buffer, vectors._row_buffer = keys, rows
        return vectors

    def _join(self) -> None:
        """The pending vectors into the arrays: views of buffers that grow by doubling,
        so joining a few is not a copy of all (a search after every slice of embedding
        copied 100 MB at 100,000 vectors, on the daemon's loop)."""
        if not self._pending:
            return
        np = self._np
        n = len(self._keys)
        wanted = n + sum(len(keys) for keys, _ in self._pending)
        if wanted > len(self._key_buffer):
            capacity = max(wanted, 2 * len(self._key_buffer))
            keys = np.empty(capacity, dtype=np.int64)
            rows = np.empty((capacity, DIMENSIONS), dtype=np.float32)
            keys[:n], rows[:n] = self._keys, self._rows
            self._key_buffer, self._row_buffer = keys, rows
        for keys, rows in self._pending:
            self._key_buffer[n : n + len(keys)] = keys
            self._row_buffer[n : n + len(keys)] = rows
            n += len(keys)
        self._keys, self._rows = self._key_buffer[:n], self._row_buffer[:n]
        self._pending.clear()


def fuse(
    lexical: Sequence[Any], semantic: Sequence[Any], *, lexical_weight: float = 1.0
) -> list[tuple[Any, float]]:
    """Reciprocal-rank fusion of two best-first lists of keys: (key, fused score), best
    first; ties go to the lexical order, then the semantic. `lexical_weight` scales the
    lexical list's share (the meaning list's is 1): the search sets it by how strong its
    word evidence is (search.py)."""
    score: dict[Any, float] = {}
    for weight, ranked in ((lexical_weight, lexical), (1.0, semantic)):
        for rank, key in enumerate(ranked):
            score[key] = score.get(key, 0.0) + weight / (K + rank + 1)
    return sorted(score.items(), key=lambda kv: -kv[1])
