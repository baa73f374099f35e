"""The package's version, in a leaf module: the engine stamps it into checkpoints and
exports, and importing it must load nothing else (the root package re-exports it)."""

__version__ = "0.1.0"
